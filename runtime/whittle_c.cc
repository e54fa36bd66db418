#include "whittle/whittle_c.h"

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/device.h"
#include "lib/ir/memory_meter.h"
#include "lib/ir/run_deadline.h"
#include "runtime/backend_name.h"
#include "whittle/session.h"

struct whittle_session {
  std::unique_ptr<whittle::Session> s;
};
struct whittle_tensor {
  whittle::Tensor t;
};

namespace {
thread_local std::string g_last_error;

int SetError(const std::string& m) {
  g_last_error = m;
  return 1;
}

// The named inputs of a run, or an error (what: the function's name).
int Feeds(const char* what, const char* const* input_names, const whittle_tensor* const* inputs, size_t n_inputs,
          std::map<std::string, whittle::Tensor>* feeds) {
  if (n_inputs && (!input_names || !inputs)) return SetError(std::string(what) + ": null argument");
  for (size_t i = 0; i < n_inputs; ++i) {
    if (!input_names[i] || !inputs[i]) return SetError(std::string(what) + ": null input " + std::to_string(i));
    (*feeds)[input_names[i]] = inputs[i]->t;
  }
  return 0;
}
// A device name of the C API: "cpu" or "cuda", read by ParseBackend (the reference loops are not
// offered here); nullopt for anything else.
std::optional<whittle::Backend> DeviceBackend(const char* device) {
  if (!device) return std::nullopt;
  auto b = whittle::ParseBackend(device);
  if (!b.ok() || *b == whittle::Backend::kReference) return std::nullopt;
  return *b;
}
}  // namespace

extern "C" {

int whittle_session_load(const char* model_path, int num_threads, whittle_session** out) {
  return whittle_session_load_on(model_path, num_threads, "cpu", out);
}

int whittle_session_load_on(const char* model_path, int num_threads, const char* device, whittle_session** out) {
  return whittle_session_load_with(model_path, num_threads, device, "fp32", out);
}

int whittle_session_load_with(const char* model_path, int num_threads, const char* device, const char* precision,
                              whittle_session** out) {
  return whittle_session_load_ex(model_path, num_threads, device, precision, 0, out);
}

int whittle_set_limits(int64_t max_memory_bytes, int64_t max_run_ms) {
  if (max_memory_bytes < 0 || max_run_ms < 0)
    return SetError("whittle_set_limits: budgets must be >= 0 (0: none), got max_memory_bytes " +
                    std::to_string(max_memory_bytes) + ", max_run_ms " + std::to_string(max_run_ms));
  whittle::SetProcessMemoryBudget(max_memory_bytes);
  whittle::SetProcessRunTimeBudget(max_run_ms);
  return 0;
}

int whittle_session_load_ex(const char* model_path, int num_threads, const char* device, const char* precision,
                            unsigned flags, whittle_session** out) {
  if (!model_path || !out || !device || !precision) return SetError("whittle_session_load: null argument");
  if (flags & ~WHITTLE_CUDA_GRAPHS) return SetError("whittle_session_load: unknown flags " + std::to_string(flags));
  const std::optional<whittle::Backend> backend = DeviceBackend(device);
  if (!backend)
    return SetError(std::string("whittle_session_load: device must be \"cpu\" or \"cuda\", got \"") + device + "\"");
  auto p = whittle::ParsePrecision(precision);
  if (!p.ok()) return SetError("whittle_session_load: " + p.status().message());
  whittle::SessionOptions so;
  so.num_threads = num_threads;
  so.backend = *backend;
  so.precision = *p;
  so.cuda_graphs = (flags & WHITTLE_CUDA_GRAPHS) != 0;
  auto r = whittle::Session::Load(model_path, so);
  if (!r.ok()) return SetError(r.status().message());
  *out = new whittle_session{std::move(*r)};  // owned by the caller: whittle_session_free
  return 0;
}

void whittle_session_free(whittle_session* s) { delete s; }
size_t whittle_session_num_inputs(const whittle_session* s) { return s ? s->s->inputs().size() : 0; }
size_t whittle_session_num_outputs(const whittle_session* s) { return s ? s->s->outputs().size() : 0; }
const char* whittle_session_input_name(const whittle_session* s, size_t i) {
  return s && i < s->s->inputs().size() ? s->s->inputs()[i].name.c_str() : nullptr;
}
const char* whittle_session_output_name(const whittle_session* s, size_t i) {
  return s && i < s->s->outputs().size() ? s->s->outputs()[i].name.c_str() : nullptr;
}

int whittle_tensor_create(int32_t dtype, const int64_t* dims, size_t rank, const void* data, whittle_tensor** out) {
  if (!out || (rank && !dims)) return SetError("whittle_tensor_create: null argument");
  if (!whittle::IsSupportedDType(dtype)) return SetError("whittle_tensor_create: unsupported dtype " + std::to_string(dtype));
  whittle::Dims d(dims, dims + rank);
  auto n = whittle::CheckedNumElements(d);
  if (!n.ok()) return SetError("whittle_tensor_create: " + n.status().message());
  whittle::Tensor t(static_cast<whittle::DType>(dtype), d);
  if (t.nbytes() && !data) return SetError("whittle_tensor_create: null data");
  if (t.nbytes()) std::memcpy(t.raw_data(), data, t.nbytes());
  *out = new whittle_tensor{std::move(t)};  // owned by the caller: whittle_tensor_free
  return 0;
}

int whittle_session_new_input(const whittle_session* s, int32_t dtype, const int64_t* dims, size_t rank,
                              whittle_tensor** out) {
  if (!s || !out || (rank && !dims)) return SetError("whittle_session_new_input: null argument");
  if (!whittle::IsSupportedDType(dtype))
    return SetError("whittle_session_new_input: unsupported dtype " + std::to_string(dtype));
  auto t = s->s->NewHostTensor(static_cast<whittle::DType>(dtype), whittle::Dims(dims, dims + rank));
  if (!t.ok()) return SetError("whittle_session_new_input: " + t.status().message());
  *out = new whittle_tensor{std::move(*t)};  // owned by the caller: whittle_tensor_free
  return 0;
}

void whittle_tensor_free(whittle_tensor* t) { delete t; }
int32_t whittle_tensor_dtype(const whittle_tensor* t) { return t ? static_cast<int32_t>(t->t.dtype()) : 0; }
size_t whittle_tensor_rank(const whittle_tensor* t) { return t ? t->t.dims().size() : 0; }
const int64_t* whittle_tensor_dims(const whittle_tensor* t) { return t ? t->t.dims().data() : nullptr; }
const void* whittle_tensor_data(const whittle_tensor* t) { return t && t->t.defined() ? t->t.raw_data() : nullptr; }
void* whittle_tensor_mutable_data(whittle_tensor* t) { return t && t->t.defined() ? t->t.raw_data() : nullptr; }

int whittle_session_run_into(const whittle_session* s, const char* const* input_names, const whittle_tensor* const* inputs,
                             size_t n_inputs, whittle_tensor* const* outputs) {
  if (!s || !outputs) return SetError("whittle_session_run_into: null argument");
  std::map<std::string, whittle::Tensor> feeds;
  if (int e = Feeds("whittle_session_run_into", input_names, inputs, n_inputs, &feeds); e != 0) return e;
  std::vector<whittle::Tensor> into;
  for (size_t i = 0; i < s->s->outputs().size(); ++i) {
    if (!outputs[i]) return SetError("whittle_session_run_into: null output " + std::to_string(i));
    into.push_back(outputs[i]->t);  // shares the caller's buffer
  }
  const whittle::Status st = s->s->RunInto(feeds, into);
  if (!st.ok()) return SetError(st.message());
  for (size_t i = 0; i < into.size(); ++i) outputs[i]->t.quant = into[i].quant;
  return 0;
}

int whittle_session_run(const whittle_session* s, const char* const* input_names, const whittle_tensor* const* inputs,
                        size_t n_inputs, whittle_tensor** outputs) {
  if (!s || !outputs) return SetError("whittle_session_run: null argument");
  std::map<std::string, whittle::Tensor> feeds;
  if (int e = Feeds("whittle_session_run", input_names, inputs, n_inputs, &feeds); e != 0) return e;
  auto r = s->s->Run(feeds);
  if (!r.ok()) return SetError(r.status().message());
  for (size_t i = 0; i < r->size(); ++i)  // the C API hands out tensors only
    if (!(*r)[i].is_tensor())
      return SetError("whittle_session_run: output '" + s->s->outputs()[i].name + "' is a " +
                      whittle::ValueKindName(s->s->outputs()[i].kind) + "; the C API returns tensors only");
  for (size_t i = 0; i < r->size(); ++i) outputs[i] = new whittle_tensor{std::move((*r)[i])};
  return 0;
}

int whittle_device_memory(const char* device, int64_t* live_bytes, int64_t* peak_bytes) {
  if (DeviceBackend(device) != whittle::Backend::kCuda)
    return SetError(std::string("whittle_device_memory: device must be \"cuda\", got ") +
                    (device ? "\"" + std::string(device) + "\"" : "null"));
  const whittle::DeviceMemoryUse use = whittle::DeviceMemoryInUse(whittle::DeviceType::kCuda);
  if (live_bytes) *live_bytes = use.live_bytes;
  if (peak_bytes) *peak_bytes = use.peak_bytes;
  return 0;
}

int whittle_device_memory_reset_peak(const char* device) {
  if (int e = whittle_device_memory(device, nullptr, nullptr); e != 0) return e;
  whittle::ResetDeviceMemoryPeak(whittle::DeviceType::kCuda);
  return 0;
}

const char* whittle_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
