#include "tools/serve-model/model_registry.h"

#include <map>
#include <new>
#include <utility>

namespace whittle::serve {
namespace {

nlohmann::json ShapeJson(const SymShape& s) {
  nlohmann::json dims = nlohmann::json::array();
  for (const Dim& d : s) {
    if (d.known()) dims.push_back(d.value);
    else if (!d.param.empty()) dims.push_back(d.param);
    else dims.push_back(nullptr);
  }
  return dims;
}

nlohmann::json IoJson(const std::vector<IoInfo>& io) {
  nlohmann::json out = nlohmann::json::array();
  for (const IoInfo& v : io)
    out.push_back({{"name", v.name}, {"dtype", DTypeName(v.dtype)}, {"shape", ShapeJson(v.shape)}});
  return out;
}

std::string IoText(const IoInfo& v) { return v.name + " " + DTypeName(v.dtype) + SymShapeToString(v.shape); }

// What a reload may not change: clients, and requests already checked, rely on it.
Status SameSignature(const Session& old_s, const Session& new_s) {
  auto compare = [](const char* what, const std::vector<IoInfo>& a, const std::vector<IoInfo>& b) -> Status {
    bool same = a.size() == b.size();
    for (size_t i = 0; same && i < a.size(); ++i)
      same = a[i].name == b[i].name && a[i].dtype == b[i].dtype && a[i].shape == b[i].shape;
    if (same) return Status::Ok();
    std::string before, after;
    for (const IoInfo& v : a) before += (before.empty() ? "" : ", ") + IoText(v);
    for (const IoInfo& v : b) after += (after.empty() ? "" : ", ") + IoText(v);
    return InvalidArgument(std::string("its ") + what + " changed from (" + before + ") to (" + after +
                           "); restart the server to serve a model with other " + what);
  };
  WH_RETURN_IF_ERROR(compare("inputs", old_s.inputs(), new_s.inputs()));
  return compare("outputs", old_s.outputs(), new_s.outputs());
}

// One run of a one-row batch of zeros, so the first request does not pay for planning; only where
// every dim after the batch axis is fixed. Its result does not matter.
void WarmUp(const Session& s) {
  std::map<std::string, Tensor> feeds;
  for (const IoInfo& in : s.inputs()) {
    if (in.shape.empty() || DTypeSize(in.dtype) == 0) return;
    Dims dims{1};
    for (size_t d = 1; d < in.shape.size(); ++d) {
      if (!in.shape[d].known()) return;
      dims.push_back(in.shape[d].value);
    }
    feeds[in.name] = Tensor(in.dtype, dims);
  }
  (void)s.Run(feeds);
}

}  // namespace

std::string SignatureText(const Session& s) {
  std::string in, out;
  for (const IoInfo& v : s.inputs()) in += (in.empty() ? "" : ", ") + IoText(v);
  for (const IoInfo& v : s.outputs()) out += (out.empty() ? "" : ", ") + IoText(v);
  return in + " -> " + out;
}

ModelRegistry::~ModelRegistry() { Shutdown(); }

StatusOr<std::shared_ptr<const Session>> ModelRegistry::LoadSession(const std::string& path) const {
  try {
    auto s = Session::Load(path, session_options_);
    if (!s.ok()) return s.status();
    std::shared_ptr<const Session> session(std::move(*s));
    for (const auto* io : {&session->inputs(), &session->outputs()})
      for (const IoInfo& v : *io)
        if (v.kind != ValueKind::kTensor)
          return Unimplemented(path + ": '" + v.name + "' is a " + ValueKindName(v.kind) +
                               "; serve-model serves models whose inputs and outputs are tensors");
    WarmUp(*session);
    return session;
  } catch (const std::bad_alloc& e) {
    return ResourceExhausted(path + ": out of memory while loading (" + e.what() + ")");
  }
}

Status ModelRegistry::Add(const ModelSpec& spec) {
  if (Find(spec.name) >= 0) return InvalidArgument("two models are named '" + spec.name + "' (use --name)");
  WH_ASSIGN_OR_RETURN(std::shared_ptr<const Session> session, LoadSession(spec.path));
  WH_ASSIGN_OR_RETURN(std::unique_ptr<BatchingSession> batching, BatchingSession::Make(session, batching_options_));
  auto m = std::make_unique<ServedModel>();
  m->name = spec.name;
  m->path = spec.path;
  m->batching = std::move(batching);
  models_.push_back(std::move(m));
  return Status::Ok();
}

int ModelRegistry::Find(const std::string& name) const {
  for (size_t i = 0; i < models_.size(); ++i)
    if (models_[i]->name == name) return static_cast<int>(i);
  return -1;
}

Status ModelRegistry::Reload(int i, double* load_ms) {
  ServedModel& m = model(i);
  std::lock_guard<std::mutex> lock(m.reload_mu);
  const auto start = std::chrono::steady_clock::now();
  Status st = [&]() -> Status {
    WH_ASSIGN_OR_RETURN(std::shared_ptr<const Session> fresh, LoadSession(m.path));
    WH_RETURN_IF_ERROR(SameSignature(*m.batching->session(), *fresh));
    return m.batching->Swap(std::move(fresh));
  }();
  *load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (st.ok()) ++m.generation;
  std::lock_guard<std::mutex> info_lock(m.info_mu);
  m.last_reload_error = st.ok() ? std::string() : st.message();
  return st;
}

nlohmann::json ModelRegistry::Describe(int i) {
  ServedModel& m = model(i);
  std::shared_ptr<const Session> s = m.batching->session();
  nlohmann::json out = {{"name", m.name}, {"path", m.path}};
  out["generation"] = m.generation.load();
  {
    std::lock_guard<std::mutex> lock(m.info_mu);
    if (!m.last_reload_error.empty()) out["last_reload_error"] = m.last_reload_error;
  }
  out["inputs"] = IoJson(s->inputs());
  out["outputs"] = IoJson(s->outputs());
  const BatchingOptions& o = m.batching->options();
  out["batching"] = {{"max_batch", o.max_batch}, {"max_delay_ms", o.max_delay_ms}, {"max_queue", o.max_queue},
                     {"workers", o.workers}, {"policy", o.eager ? "eager" : "timeout"}};
  return out;
}

std::vector<ModelStats> ModelRegistry::Stats() const {
  std::vector<ModelStats> out;
  for (const auto& m : models_) out.push_back({m->batching->stats(), m->direct_runs.load()});
  return out;
}

void ModelRegistry::Shutdown() {
  for (auto& m : models_) m->batching->Shutdown();
}

}  // namespace whittle::serve
