// The models serve-model answers for: each a name, its file, and a BatchingSession over a Session
// loaded from it. Reload() loads the file again into a new Session and swaps it in
// (BatchingSession::Swap: requests already in a batch finish on the old one); a load that fails,
// or a model whose inputs or outputs changed (names, dtypes, shapes: clients and queued requests
// were checked against the old ones), keeps the old model and returns the error. Reloads of one
// model are serialized; requests never wait for them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "whittle/batching_session.h"
#include "whittle/session.h"

namespace whittle::serve {

struct ModelSpec {
  std::string name, path;
};

struct ServedModel {
  std::string name, path;
  std::unique_ptr<BatchingSession> batching;
  std::mutex reload_mu;            // one reload at a time
  std::atomic<int64_t> generation{1};  // successful loads
  mutable std::mutex info_mu;      // guards last_reload_error (never held during a load)
  std::string last_reload_error;   // the last reload's error; empty after a good one
  // Requests run alone on the current session, outside the batching queue: BatchingSession takes
  // only requests whose inputs all have one first axis (the batch), so a model with a 0-d input or
  // inputs of different leading sizes (a state tensor) is served this way (http_server.cc).
  std::atomic<int64_t> direct_in_flight{0};
  std::atomic<int64_t> direct_runs{0};
};

// What /metrics reports per model.
struct ModelStats {
  BatchingStats batching;
  int64_t direct_runs = 0;
};

class ModelRegistry {
 public:
  ModelRegistry(SessionOptions session_options, BatchingOptions batching_options)
      : session_options_(session_options), batching_options_(batching_options) {}
  ~ModelRegistry();

  // Loads the model (refusing inputs or outputs that are not plain tensors) and starts its queue.
  Status Add(const ModelSpec& spec);
  // The model's index, or -1.
  int Find(const std::string& name) const;
  ServedModel& model(int i) { return *models_[static_cast<size_t>(i)]; }
  size_t size() const { return models_.size(); }

  // Loads model i's file again and swaps it in; the time the load took in *load_ms.
  Status Reload(int i, double* load_ms);
  // {name, path, generation, inputs: [{name, dtype, shape}], outputs: [...]}.
  nlohmann::json Describe(int i);
  std::vector<ModelStats> Stats() const;
  const BatchingOptions& batching_options() const { return batching_options_; }
  // Stops every model's queue after finishing what is queued.
  void Shutdown();

 private:
  StatusOr<std::shared_ptr<const Session>> LoadSession(const std::string& path) const;

  SessionOptions session_options_;
  BatchingOptions batching_options_;
  std::vector<std::unique_ptr<ServedModel>> models_;
};

// "image float32[batch,1,28,28]" pairs joined, for log lines.
std::string SignatureText(const Session& s);

}  // namespace whittle::serve
