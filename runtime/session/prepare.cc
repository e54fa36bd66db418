// Session::Impl::Prepare: one step per node in topological order, each with its kernel (on the
// session's backend; on the CPU for a node that backend lacks, and for a device session's shape
// arithmetic), the constants device kernels read uploaded once, and every value's last reader, after
// which its buffer is recycled.
#include <set>
#include <string>

#include "runtime/session/session_impl.h"

namespace whittle {
namespace {

// Shape arithmetic on a device session (docs/design-notes.md, "Shape arithmetic stays on the
// host"). Shape and Size read only dims, which live on the host for a device tensor too; the ops
// below, fed only by such values and small constants, compute shapes, indices and scalars that
// Reshape, Slice or Attention read back on the host. Placed on the device, each of those tiny
// values cost a copy each way and a synchronisation per run (the exported transformer's 9
// fallback nodes). None of these ops makes an output larger than its inputs allow (no
// ConstantOfShape, Range, Expand, Tile: their sizes come from values).
constexpr int64_t kMaxHostShapeConstant = 64;  // elements of a constant a host shape step may read

bool ShapeArithmeticOp(const Node& n) {
  static const std::set<std::string> kOps = {
      "Gather", "Concat", "Cast", "Add", "Sub", "Mul", "Div", "Mod", "Pow", "Sqrt", "Neg", "Abs", "Reciprocal",
      "Floor", "Ceil", "Round", "Min", "Max", "Sign", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
      "Not", "And", "Or", "Where", "Slice", "Squeeze", "Unsqueeze", "Reshape", "Flatten", "Identity",
      "ReduceProd", "ReduceSum", "ReduceMin", "ReduceMax", "Transpose"};
  return n.domain.empty() && kOps.count(n.op_type) > 0;
}

}  // namespace

Status Session::Impl::Prepare() {
  const Graph& g = graph_;
  for (int i : g.inputs()) {
    const Value& v = g.value(i);
    if (v.is_constant()) continue;
    inputs_.push_back({v.name, v.dtype, v.shape ? *v.shape : SymShape{}, v.kind});
  }
  for (int o : g.outputs()) {
    const Value& v = g.value(o);
    outputs_.push_back({v.name, v.dtype, v.shape ? *v.shape : SymShape{}, v.kind});
  }
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  const size_t nv = g.values().size();
  release_after_.assign(nv, -1);
  const bool on_device = BackendDevice(opts_.backend) != DeviceType::kCpu;
  std::vector<char> host_value(nv, 0);  // on a device session: computed on the host by shape steps
  for (int ni : order) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    auto step = std::make_unique<RunStep>();
    step->node = &n;
    step->def = OpRegistry::Global().Find(n.domain, n.op_type);
    step->opset = static_cast<int>(g.OpsetFor(n.domain));
    std::vector<DType> dts;
    std::vector<const Tensor*> consts;
    std::vector<int> ranks;
    for (int i : n.inputs) {
      dts.push_back(i < 0 ? DType::kUndefined : g.value(i).dtype);
      consts.push_back(i >= 0 && g.value(i).initializer ? &*g.value(i).initializer : nullptr);
      ranks.push_back(i >= 0 && g.value(i).shape ? static_cast<int>(g.value(i).shape->size()) : -1);
    }
    bool host_shape = false;
    if (on_device && ReadsDimsOnly(n)) {
      host_shape = true;
      step->dims_only = 1;
    } else if (on_device && ShapeArithmeticOp(n)) {
      bool computed = false;
      host_shape = true;
      for (int i : n.inputs) {
        if (i < 0) continue;
        const Value& v = g.value(i);
        if (host_value[static_cast<size_t>(i)]) computed = true;
        else if (!v.initializer || v.initializer->numel() > kMaxHostShapeConstant) host_shape = false;
      }
      host_shape &= computed;
    }
    if (host_shape) {
      for (int o : n.outputs)
        if (o >= 0) host_value[static_cast<size_t>(o)] = 1;
      host_nodes_.push_back(n.name.empty() ? n.op_type : n.name + " (" + n.op_type + ")");
    }
    WH_ASSIGN_OR_RETURN(step->kernel, CreateKernel(n, step->opset, host_shape ? Backend::kCpu : opts_.backend, dts,
                                                   consts, host_shape ? Precision::kFp32 : opts_.precision, ranks,
                                                   opts_.pack_weights, opts_.num_threads));
    if (!step->kernel) return Internal(n.DebugName() + ": no kernel was built");
    step->alias = step->kernel->OutputAliasesInput();
    step->host_step = host_shape;
    if (!host_shape && step->alias < 0 && step->kernel->device() != BackendDevice(opts_.backend)) {
      // No kernel on the session's device for this node: the fast CPU one, with explicit copies.
      WH_ASSIGN_OR_RETURN(step->kernel, CreateKernel(n, step->opset, Backend::kCpu, dts, consts, Precision::kFp32, {},
                                                     true, opts_.num_threads));
      fallback_nodes_.push_back(n.name.empty() ? n.op_type : n.name + " (" + n.op_type + ")");
    }
    step->device = step->kernel->device();
    step->sets_outputs = step->alias < 0 && step->kernel->SetsOutputs();
    if (step->device != DeviceType::kCpu) step->host_in = step->kernel->HostInputs();
    step->checks = step->alias < 0 && step->device != DeviceType::kCpu && step->kernel->ChecksOnDevice();
    device_checks_ |= step->checks;
    if (step->alias < 0 && step->device != DeviceType::kCpu)
      for (size_t k = 0; k < n.inputs.size(); ++k) {  // constants a device kernel reads: uploaded once, here
        const int i = n.inputs[k];
        if (InputBit(step->host_in, k)) continue;  // read on the host
        if (i >= 0 && g.value(i).initializer && !device_consts_.count(i)) {
          WH_ASSIGN_OR_RETURN(Tensor t, g.value(i).initializer->ToDevice(step->device));
          device_consts_.emplace(i, std::move(t));
        }
      }
    // Weights mapped from external data: the kernel has read or repacked what it needs by now, so
    // their pages go back (a kernel that reads them in place maps them again on its first run).
    for (const Tensor* c : consts)
      if (c && c->defined() && c->buffer()->mapped()) c->buffer()->ReleaseResidentPages();
    const int si = static_cast<int>(steps_.size());
    for (int i : n.inputs)
      if (i >= 0 && !g.value(i).is_constant()) release_after_[static_cast<size_t>(i)] = si;
    for (int o : n.outputs)
      if (o >= 0 && release_after_[static_cast<size_t>(o)] < 0) release_after_[static_cast<size_t>(o)] = si;
    steps_.push_back(std::move(step));
  }
  for (int o : g.outputs()) release_after_[static_cast<size_t>(o)] = -1;
  host_shape_value_ = std::move(host_value);
  release_at_step_.assign(steps_.size(), {});
  for (size_t v = 0; v < nv; ++v)
    if (release_after_[v] >= 0) release_at_step_[static_cast<size_t>(release_after_[v])].push_back(static_cast<int>(v));
  return Status::Ok();
}

}  // namespace whittle
