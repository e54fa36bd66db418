#include "kernels/kernel.h"

#include "kernels/backend_module.h"

namespace whittle {

StatusOr<int64_t> KernelAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kReference: return "reference";
    case Backend::kCpu: return "cpu";
    case Backend::kCuda: return "cuda";
  }
  return "?";
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

StatusOr<Precision> ParsePrecision(const std::string& s) {
  for (Precision p : {Precision::kFp32, Precision::kTf32, Precision::kFp16, Precision::kBf16})
    if (s == PrecisionName(p)) return p;
  return InvalidArgument("unknown precision '" + s + "' (fp32, tf32, fp16 or bf16)");
}

DeviceType BackendDevice(Backend b) { return b == Backend::kCuda ? DeviceType::kCuda : DeviceType::kCpu; }

const std::vector<Backend>& BuiltBackends() {
  static const std::vector<Backend> kBuilt = [] {
    std::vector<Backend> b = {Backend::kReference, Backend::kCpu};
    if (CudaBackendLoaded()) b.push_back(Backend::kCuda);  // loads its module (kernels/backend_module.h)
    return b;
  }();
  return kBuilt;
}

KernelRegistry& KernelRegistry::Global() {
  static KernelRegistry r;
  return r;
}

void KernelRegistry::Register(const std::string& domain, const std::string& op_type, KernelFactory f) {
  WH_CHECK(Find(domain, op_type) == nullptr);
  entries_.push_back({domain, op_type, std::move(f)});
}

void KernelRegistry::Wrap(const std::string& domain, const std::string& op_type,
                          const std::function<KernelFactory(KernelFactory)>& wrap) {
  for (auto& e : entries_)
    if (e.domain == domain && e.op_type == op_type) {
      e.factory = wrap(e.factory);
      return;
    }
  WH_CHECK(false && "KernelRegistry::Wrap: no such op");
}

const KernelFactory* KernelRegistry::Find(const std::string& domain, const std::string& op_type) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  for (const auto& e : entries_)
    if (e.domain == d && e.op_type == op_type) return &e.factory;
  return nullptr;
}

}  // namespace whittle
