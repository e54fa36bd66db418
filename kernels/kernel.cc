#include "kernels/kernel.h"

#include <mutex>
#include <shared_mutex>

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

const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64};
const std::vector<DType> kFloatHalfTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
const std::vector<DType> kIntegerTypes = {DType::kInt8,  DType::kUInt8,  DType::kInt16, DType::kUInt16,
                                          DType::kInt32, DType::kUInt32, DType::kInt64, DType::kUInt64};
const std::vector<DType> kNumericTypes = {DType::kFloat32, DType::kFloat64, DType::kInt8,  DType::kUInt8,
                                          DType::kInt16,   DType::kUInt16,  DType::kInt32, DType::kUInt32,
                                          DType::kInt64,   DType::kUInt64};
const std::vector<DType> kNumericHalfTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                              DType::kInt8,    DType::kUInt8,   DType::kInt16,   DType::kUInt16,
                                              DType::kInt32,   DType::kUInt32,  DType::kInt64,   DType::kUInt64};
const std::vector<DType> kAllTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                      DType::kInt8,    DType::kUInt8,   DType::kInt16,   DType::kUInt16,
                                      DType::kInt32,   DType::kUInt32,  DType::kInt64,   DType::kUInt64,
                                      DType::kBool};

KernelDef DeclareKernel(Backend backend, std::string domain, std::string op_type, std::vector<DType> dtypes,
                        KernelFactory factory, int since_version, int end_version) {
  KernelDef d;
  d.domain = std::move(domain);
  d.op_type = std::move(op_type);
  d.since_version = since_version;
  d.end_version = end_version;
  d.dtypes = std::move(dtypes);
  d.backend = backend;
  d.factory = std::move(factory);
  return d;
}

KernelRegistry& KernelRegistry::Global() {
  static KernelRegistry r;
  return r;
}

namespace {

const std::string& CanonicalDomain(const std::string& domain) {
  static const std::string kOnnx;
  return domain == "ai.onnx" ? kOnnx : domain;
}

// Guards every registry's declarations: the CUDA module declares its kernels when it is loaded,
// which may be while other threads build sessions (each Op stays where it is: ops_ holds pointers).
std::shared_mutex& RegistryMutex() {
  static std::shared_mutex mu;
  return mu;
}

bool Covers(const KernelDef& d, int opset) { return d.since_version <= opset && opset <= d.end_version; }

}  // namespace

KernelRegistry::Op* KernelRegistry::FindOp(const std::string& domain, const std::string& op_type) const {
  const std::string& d = CanonicalDomain(domain);
  for (const auto& op : ops_)
    if (op->domain == d && op->op_type == op_type) return op.get();
  return nullptr;
}

void KernelRegistry::Add(KernelDef def) {
  std::unique_lock<std::shared_mutex> lock(RegistryMutex());
  def.domain = CanonicalDomain(def.domain);
  WH_CHECK(def.factory && def.since_version <= def.end_version);
  Op* op = FindOp(def.domain, def.op_type);
  if (!op) {
    ops_.push_back(std::make_unique<Op>());
    op = ops_.back().get();
    op->domain = def.domain;
    op->op_type = def.op_type;
    // The backend's declaration, else (absent, or declining with a null kernel) the reference's.
    op->build = [op](const KernelInit& init) -> KernelOr {
      // The factories are copied under the lock and called outside it: a factory may load the
      // CUDA module, which declares more kernels (Add).
      KernelFactory ref, own;
      {
        std::shared_lock<std::shared_mutex> lock(RegistryMutex());
        for (const KernelDef& d : op->defs) {
          if (d.backend == Backend::kReference && Covers(d, init.opset)) ref = d.factory;
          if (!own && init.backend != Backend::kReference && d.backend == init.backend && Covers(d, init.opset))
            own = d.factory;
        }
      }
      if (own) {
        KernelOr k = own(init);
        if (!k.ok() || *k) return k;
      }
      if (!ref)
        return Unimplemented("no " + std::string(BackendName(init.backend)) + " or reference kernel for " +
                             op->op_type + " at opset " + std::to_string(init.opset));
      return ref(init);
    };
  }
  for (const KernelDef& d : op->defs)
    WH_CHECK(d.backend != def.backend || d.end_version < def.since_version || def.end_version < d.since_version);
  op->defs.push_back(std::move(def));
}

void KernelRegistry::Register(const std::string& domain, const std::string& op_type, KernelFactory f) {
  Add(DeclareKernel(Backend::kReference, domain, op_type, {}, std::move(f)));
}

KernelFactory KernelRegistry::Replace(KernelDef def) {
  {
    std::unique_lock<std::shared_mutex> lock(RegistryMutex());
    if (Op* op = FindOp(def.domain, def.op_type))
      for (KernelDef& d : op->defs)
        if (d.backend == def.backend && d.since_version == def.since_version) {
          KernelFactory old = std::move(d.factory);
          d = std::move(def);
          d.domain = op->domain;
          return old;
        }
  }
  Add(std::move(def));
  return nullptr;
}

const KernelFactory* KernelRegistry::Find(const std::string& domain, const std::string& op_type) const {
  std::shared_lock<std::shared_mutex> lock(RegistryMutex());
  const Op* op = FindOp(domain, op_type);
  return op ? &op->build : nullptr;
}

const KernelDef* KernelRegistry::FindDef(const std::string& domain, const std::string& op_type, int opset,
                                         Backend backend) const {
  std::shared_lock<std::shared_mutex> lock(RegistryMutex());
  if (const Op* op = FindOp(domain, op_type))
    for (const KernelDef& d : op->defs)
      if (d.backend == backend && Covers(d, opset)) return &d;
  return nullptr;
}

std::vector<const KernelDef*> KernelRegistry::Declarations() const {
  std::shared_lock<std::shared_mutex> lock(RegistryMutex());
  std::vector<const KernelDef*> out;
  for (const auto& op : ops_)
    for (const KernelDef& d : op->defs) out.push_back(&d);
  return out;
}

}  // namespace whittle
