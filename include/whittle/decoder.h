// Decoder: greedy token-by-token generation on a decoder-only language model as exporters write
// them (Hugging Face / torch.onnx): inputs input_ids [batch, seq] and, where the model has them,
// attention_mask [batch, past + seq] and position_ids [batch, seq]; past_key_values.<i>.key/value
// [batch, kv_heads, past, head_dim] fed back from the outputs present.<i>.key/value; output
// logits [batch, seq, vocab]. Prefill runs the prompt with an empty past, then each Step runs one
// token against the cache the previous call returned. What run-model --generate runs; services
// step it themselves. One Decoder holds one sequence (batch 1); it is not thread-safe, the
// Session under it is.
// Where the model's caches can grow in place (Session::CheckCacheBindings: each past input is
// read by a kernel that appends to a KvCache, ai.onnx Attention), the Decoder keeps one KvCache
// per cache input and runs Session::RunWithCaches: no step copies the past. Otherwise (an
// exporter's Concat of past and new rows) it feeds each step the present.* tensors of the last.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "whittle/kv_cache.h"
#include "whittle/session.h"
#include "whittle/status.h"
#include "whittle/tensor.h"

namespace whittle {

class Decoder {
 public:
  // Checks that session has the layout above (input_ids, logits, and each past_key_values.* input
  // paired with a present.* output); the session must outlive the Decoder.
  // in_place false: always feed the caches as tensors (the comparison the tests make).
  static StatusOr<std::unique_ptr<Decoder>> Create(const Session& session, bool in_place = true);

  // Runs the prompt (ids, at least one) from an empty cache; returns the last position's logits
  // [vocab]. Starts a new sequence. stats, where given, gets the run's per-node times
  // (Session::Run's RunStats; timing each node costs a little).
  StatusOr<std::vector<float>> Prefill(const std::vector<int64_t>& ids, RunStats* stats = nullptr);
  // Runs one token after what came before; returns its logits [vocab].
  StatusOr<std::vector<float>> Step(int64_t id, RunStats* stats = nullptr);

  // Tokens in the cache (prompt and steps so far).
  int64_t past_length() const { return past_; }
  int64_t vocab_size() const { return vocab_; }
  int num_layers_cached() const { return static_cast<int>(cache_.size()); }
  // Whether the caches grow in place; where not, why (the session's reason, or "not asked").
  bool cache_in_place() const { return in_place_; }
  const std::string& cache_copied_why() const { return copied_why_; }
  // Cache i (in the model's input order) as the model's present.* output holds it:
  // [1, kv_heads, past, head_dim] (a copy).
  Tensor cache(int i) const;

 private:
  struct CacheSlot {
    std::string input, output;  // past_key_values.<i>.key, present.<i>.key
    int output_index = -1;
    Tensor value;               // [1, kv_heads, past, head_dim], fed as a tensor
    Dims empty;                 // the same with past 0
    std::unique_ptr<KvCache> kv;  // grown in place instead (cache_in_place)
  };
  explicit Decoder(const Session& s) : session_(s) {}
  StatusOr<std::vector<float>> Run(const std::vector<int64_t>& ids, RunStats* stats);

  const Session& session_;
  bool has_mask_ = false, has_positions_ = false, in_place_ = false;
  std::string copied_why_;
  int logits_index_ = -1;
  int64_t past_ = 0, vocab_ = 0;
  std::vector<CacheSlot> cache_;
};

}  // namespace whittle
