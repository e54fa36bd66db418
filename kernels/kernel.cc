#include "kernels/kernel.h"

namespace whittle {

StatusOr<int64_t> KernelAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

const char* ProviderName(Provider p) { return p == Provider::kReference ? "reference" : "cpu"; }

KernelRegistry& KernelRegistry::Global() {
  static KernelRegistry r;
  return r;
}

void KernelRegistry::Register(Provider p, const std::string& domain, const std::string& op_type, KernelFactory f) {
  WH_CHECK(Find(p, domain, op_type) == nullptr);
  entries_.push_back({p, domain, op_type, std::move(f)});
}

const KernelFactory* KernelRegistry::Find(Provider p, const std::string& domain, const std::string& op_type) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  for (const auto& e : entries_)
    if (e.provider == p && e.domain == d && e.op_type == op_type) return &e.factory;
  return nullptr;
}

}  // namespace whittle
