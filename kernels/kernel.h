// The kernel contract. A kernel sees tensors and attributes, never the graph. Its factory runs
// once at Session::Load (validate attributes it depends on, prepack constant inputs such as
// weights); Compute runs per call, must be const and thread-safe, and writes into outputs the
// runtime has already allocated with the dims the op's shape inference gave.
// Backends: kReference (plain loops, the truth), kCpu (fast), kCuda (when built). Every backend
// declares its kernels the same way, as KernelDefs (op, domain, opset range, dtypes, backend,
// factory); a backend that has no declaration for a node, or whose factory declines it (a null
// kernel), gets the reference backend's kernel. A new backend is one folder of kernels plus one
// declaration per op it covers.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/attribute.h"
#include "lib/ir/domain.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"
#include "whittle/kv_cache.h"
#include "whittle/types.h"

namespace whittle {

// Backend and Precision (with BackendName, PrecisionName, ParsePrecision) are public API:
// include/whittle/types.h.
// The device a backend's kernels read and write (DeviceType is the one device enum).
DeviceType BackendDevice(Backend b);
// The backends compiled into this build, kReference first.
const std::vector<Backend>& BuiltBackends();

struct KernelInit {
  const AttributeMap& attrs;
  int opset = 0;
  std::vector<DType> input_dtypes;        // kUndefined for absent inputs
  std::vector<const Tensor*> const_inputs;  // values of constant inputs, nullptr otherwise
  int num_outputs = 1;
  std::string node_name;                  // for error messages
  Backend backend = Backend::kReference;  // whose compute function the factory picks
  Precision precision = Precision::kFp32;  // SessionOptions::precision (kCuda only)
  // Each input's rank where the graph's static inference knows it, -1 where not (empty: none
  // known). Lets a device factory decline at load what it would only refuse at run time (the
  // 2-D CUDA convolutions on a 1-D or 3-D input), so the node falls back to the CPU instead.
  std::vector<int> input_ranks = {};
  // SessionOptions::pack_weights: false, the Gemm/MatMul kernels read constant weights where they
  // are instead of keeping a packed copy.
  bool pack_weights = true;
  // SessionOptions::num_threads (0: not known): what a control-flow kernel's subgraphs run with.
  int num_threads = 0;

  int InputRank(size_t k) const { return k < input_ranks.size() ? input_ranks[k] : -1; }

  // Input 0 is float32 and every other present input is float32 too (the fast paths' condition).
  bool AllFloat32() const {
    for (DType t : input_dtypes)
      if (t != DType::kFloat32 && t != DType::kUndefined) return false;
    return !input_dtypes.empty() && input_dtypes[0] == DType::kFloat32;
  }
};

// A device kernel's report of what it found wrong in values it never reads on the host (a Gather
// index out of range; OpKernel::ChecksOnDevice): kDeviceCheckWords int64 of device memory, zero
// until a kernel reports. report[0] takes the reporter's tag (KernelContext::check_tag; the first
// report of a run wins) and report[1..] its details; once the run's device work is done the
// runtime reads the report, asks that kernel what it means (OpKernel::DeviceCheckError) and
// zeroes it again. No kernel waits for the device to check a value on the host, so such a run can
// be captured as a CUDA graph.
inline constexpr int kDeviceCheckWords = 8;

struct KernelContext {
  std::vector<const Tensor*> inputs;  // nullptr for absent optional inputs
  std::vector<Tensor*> outputs;       // preallocated (dtype, dims); nullptr for absent outputs
  int num_threads = 1;
  // The run's device check report (device memory), or null: a ChecksOnDevice kernel then checks
  // on the host (downloading what it checks). check_tag identifies this call in the report.
  int64_t* device_check = nullptr;
  int64_t check_tag = 1;
  // Per input, empty or null where none: the cache that input k's past lives in, grown in place
  // (Session::RunWithCaches; only for the inputs in OpKernel::InPlaceCacheInputs). The kernel then
  // reads the past from it, appends this call's rows past its length (Reserve first), leaves its
  // length to the session (which commits it once the run succeeded) and writes nothing to the
  // paired output, which is then null.
  std::vector<KvCache*> caches = {};
  KvCache* Cache(size_t k) const { return k < caches.size() ? caches[k] : nullptr; }
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual Status Compute(KernelContext& ctx) const = 0;
  // >= 0: output 0 is input k's bytes with the inferred dims (Reshape, Flatten, Identity ...).
  // The runtime then shares the buffer and does not call Compute.
  virtual int OutputAliasesInput() const { return -1; }
  // True: Compute assigns each present ctx.outputs[k] itself (If, Loop, Scan: the shapes are known
  // only once a subgraph ran). The runtime then neither infers the node's output shapes nor
  // allocates them; ctx.outputs point at undefined tensors.
  virtual bool SetsOutputs() const { return false; }
  // Whose memory Compute reads and writes: the runtime hands a kCuda kernel device tensors only
  // (copying inputs made elsewhere) and a CPU kernel host tensors only.
  virtual DeviceType device() const { return DeviceType::kCpu; }
  // A device kernel's inputs (bit k: input k) that it reads on the host: small parameters such as
  // Slice's starts and ends, which decide the launch. The runtime hands these over as host
  // tensors (downloading one made on the device) and does not upload such a constant.
  virtual uint64_t HostInputs() const { return 0; }
  // Whether Compute reports what it finds wrong in device values on the device
  // (KernelContext::device_check) instead of reading them on the host; DeviceCheckError then
  // turns this kernel's report (kDeviceCheckWords) into the error the CPU kernel would give.
  virtual bool ChecksOnDevice() const { return false; }
  virtual Status DeviceCheckError(const int64_t* /*report*/) const { return Internal("a device check failed"); }
  // Inputs (bit k: input k) that are a past key/value cache this kernel can grow in place
  // (KernelContext::caches), and the output that would return the grown cache for input k.
  virtual uint64_t InPlaceCacheInputs() const { return 0; }
  virtual int InPlaceCacheOutput(int /*input*/) const { return -1; }
};

// Whether input k's bit is set in a per-input mask (HostInputs, InferContext::ValueAsks...; inputs
// past 63 share bit 63).
inline bool InputBit(uint64_t mask, size_t k) { return (mask >> (k < 63 ? k : 63)) & 1; }

// Where a kernel takes input k: its device, or the host for what it reads there (HostInputs).
inline DeviceType InputDevice(const OpKernel& kernel, size_t k) {
  const DeviceType d = kernel.device();
  return d != DeviceType::kCpu && InputBit(kernel.HostInputs(), k) ? DeviceType::kCpu : d;
}

using KernelFactory = std::function<StatusOr<std::unique_ptr<OpKernel>>(const KernelInit&)>;

// An opset range's open end (KernelDef::end_version).
inline constexpr int kOpsetMax = 1 << 30;

// One backend's kernel for an op, as ONNX Runtime's providers declare theirs: the factory builds
// it for a node of (domain, op_type) at an opset in [since_version, end_version] (1..kOpsetMax:
// every opset the op's schema takes), returning a null kernel where it declines the node's
// dtypes or attributes. dtypes lists input 0's element types it takes (empty: those the factory
// checks); it is what the coverage table (run-model --list-ops) prints.
struct KernelDef {
  std::string domain, op_type;  // domain "" is ai.onnx
  int since_version = 1, end_version = kOpsetMax;
  std::vector<DType> dtypes;
  Backend backend = Backend::kReference;
  KernelFactory factory;
};

// The declaration of op (domain, op_type) by `factory` on `backend`, input 0 of `dtypes`.
KernelDef DeclareKernel(Backend backend, std::string domain, std::string op_type, std::vector<DType> dtypes,
                        KernelFactory factory, int since_version = 1, int end_version = kOpsetMax);

// Element-type sets of the declarations.
extern const std::vector<DType> kFloatTypes;    // float32, float64
extern const std::vector<DType> kFloatHalfTypes;  // float32, float64, float16, bfloat16
extern const std::vector<DType> kIntegerTypes;  // every integer type
extern const std::vector<DType> kNumericTypes;  // integers and floats
extern const std::vector<DType> kNumericHalfTypes;  // integers, floats, float16, bfloat16
extern const std::vector<DType> kAllTypes;      // numeric, bool, float16, bfloat16

// Every backend's declarations, looked up by (domain, op, opset, backend).
class KernelRegistry {
 public:
  static KernelRegistry& Global();
  // Adds a declaration; two of one (domain, op_type, backend) must not share an opset.
  void Add(KernelDef def);
  // A kernel for every backend: a reference declaration whose factory serves the others too
  // (it sees init.backend). For ops that are the same everywhere (test ops, aliases).
  void Register(const std::string& domain, const std::string& op_type, KernelFactory f);
  // The op's factory (nullptr if the op has no declaration): it builds init.backend's declared
  // kernel for init.opset, and where that backend has none or its factory returns a null kernel,
  // the reference declaration's kernel (same init).
  const KernelFactory* Find(const std::string& domain, const std::string& op_type) const;
  // The declaration of (domain, op_type) on backend at opset, or nullptr.
  const KernelDef* FindDef(const std::string& domain, const std::string& op_type, int opset, Backend backend) const;
  // Puts def in place of the declaration of its (domain, op_type, backend, since_version) and
  // returns the replaced factory (empty where there was none: def is then added). For tests that
  // stand in for a backend.
  KernelFactory Replace(KernelDef def);
  // Every declaration, in the order the ops were first declared.
  std::vector<const KernelDef*> Declarations() const;

 private:
  struct Op {
    std::string domain, op_type;
    std::vector<KernelDef> defs;
    KernelFactory build;  // Find's factory
  };
  Op* FindOp(const std::string& domain, const std::string& op_type) const;
  std::vector<std::unique_ptr<Op>> ops_;
};

// Registers every kernel family (idempotent, thread-safe).
void RegisterAllKernels();

using KernelOr = StatusOr<std::unique_ptr<OpKernel>>;

// A family's compute functions per backend. Fns is the family's struct of function pointers
// (e.g. struct NormFns { MakeBatchNormFn batch_norm; ... }); each backend folder defines one
// instance, and the family's glue lists them, one row per backend:
//   const BackendTable<NormFns> kNorm{{Backend::kReference, &reference::kNormFns},
//                                     {Backend::kCpu, &cpu::kNormFns}};
// Pick returns the requested backend's function, or the reference backend's where that one is
// absent (null). Make calls a kernel-building member with args; where the backend's builder is
// absent or returns a null kernel ("not for these dtypes/attributes"), the reference builds it.
// DeclareFamily declares an op on the backends whose row has its builder.
template <class Fns>
class BackendTable {
 public:
  BackendTable(std::initializer_list<std::pair<Backend, const Fns*>> rows) : rows_(rows) {}

  template <class F>
  F Pick(Backend b, F Fns::*member) const {
    for (const auto& [backend, fns] : rows_)
      if (backend == b && fns && fns->*member) return fns->*member;
    return Reference(member);
  }

  // The backends whose row has member (kReference first): those a family declares the op on.
  template <class F>
  std::vector<Backend> Backends(F Fns::*member) const {
    std::vector<Backend> out;
    for (Backend b : {Backend::kReference, Backend::kCpu, Backend::kCuda})
      for (const auto& [backend, fns] : rows_)
        if (backend == b && fns && fns->*member) {
          out.push_back(b);
          break;
        }
    return out;
  }

  template <class F, class... Args>
  KernelOr Make(Backend b, F Fns::*member, Args&&... args) const {
    if (b != Backend::kReference) {
      F f = Pick(b, member);
      if (f && f != Reference(member)) {
        KernelOr k = f(args...);
        if (!k.ok() || *k) return k;
      }
    }
    F ref = Reference(member);
    if (!ref) return Unimplemented(std::string("no reference kernel for ") + BackendName(b));
    return ref(args...);
  }

 private:
  template <class F>
  F Reference(F Fns::*member) const {
    for (const auto& [backend, fns] : rows_)
      if (backend == Backend::kReference && fns) return fns->*member;
    return nullptr;
  }

  std::vector<std::pair<Backend, const Fns*>> rows_;
};

// Declares op (domain, op_type) with factory on every backend of table that has member: the
// family's factory, which picks init.backend's builder from the table (dtypes: what it takes
// there, its fallbacks to the reference builder included).
template <class Fns, class F>
void DeclareFamily(KernelRegistry& r, const BackendTable<Fns>& table, F Fns::*member, const std::string& domain,
                   const std::string& op_type, const std::vector<DType>& dtypes, const KernelFactory& factory,
                   int since_version = 1, int end_version = kOpsetMax) {
  for (Backend b : table.Backends(member))
    r.Add(DeclareKernel(b, domain, op_type, dtypes, factory, since_version, end_version));
}

// A kernel whose Compute is a plain function of (attrs-derived state, ctx): convenient for
// element-wise and shape kernels with no prepacking.
template <class Fn>
class FnKernel : public OpKernel {
 public:
  explicit FnKernel(Fn fn) : fn_(std::move(fn)) {}
  Status Compute(KernelContext& ctx) const override { return fn_(ctx); }

 private:
  Fn fn_;
};
template <class Fn>
std::unique_ptr<OpKernel> MakeFnKernel(Fn fn) { return std::make_unique<FnKernel<Fn>>(std::move(fn)); }

// Wraps a Compute function as a factory result.
template <class Fn>
StatusOr<std::unique_ptr<OpKernel>> WrapFnKernel(Fn fn) {
  return std::unique_ptr<OpKernel>(MakeFnKernel(std::move(fn)));
}

// Normalises axis into [0, rank), or says it is out of range (kernels cannot see lib/ops helpers).
StatusOr<int64_t> KernelAxis(int64_t axis, int64_t rank);

// Kernel that aliases input k (see OpKernel::OutputAliasesInput).
class AliasKernel : public OpKernel {
 public:
  explicit AliasKernel(int k) : k_(k) {}
  Status Compute(KernelContext&) const override { return Status::Ok(); }
  int OutputAliasesInput() const override { return k_; }

 private:
  int k_;
};

}  // namespace whittle
