#include "runtime/node_runner.h"

#include "lib/ir/device.h"
#include "runtime/subgraph_session.h"

namespace whittle {

StatusOr<std::unique_ptr<OpKernel>> CreateKernel(const Node& node, int opset, Backend backend,
                                                 const std::vector<DType>& input_dtypes,
                                                 const std::vector<const Tensor*>& const_inputs,
                                                 Precision precision, std::vector<int> input_ranks,
                                                 bool pack_weights, int num_threads) {
  RegisterAllKernels();
  InstallSubgraphSessions();  // If, Loop and Scan run their subgraphs as sessions
  const KernelFactory* f = KernelRegistry::Global().Find(node.domain, node.op_type);
  if (!f) return Unimplemented(node.DebugName() + ": no kernel for op '" + node.op_type + "'");
  KernelInit init{node.attrs, opset, input_dtypes, const_inputs, static_cast<int>(node.outputs.size()), node.name,
                  backend, precision, std::move(input_ranks), pack_weights};
  init.num_threads = num_threads;
  auto k = (*f)(init);
  if (!k.ok()) return k.status().WithContext(node.DebugName());
  return k;
}

Status InferConcrete(const OpDef& def, const Node& node, int opset, const std::vector<const Tensor*>& inputs,
                     std::vector<DType>* out_dtypes, std::vector<Dims>* out_dims, uint64_t* value_reads,
                     uint64_t* value_asks) {
  InferContext ctx(node, opset);
  for (const Tensor* t : inputs) {
    if (!t) ctx.AddInput(false, DType::kUndefined, std::nullopt, nullptr);
    else if (!t->is_tensor())  // a sequence or an optional without a value (Identity's alias)
      ctx.AddInput(true, t->element_dtype(), SymShape{}, nullptr,
                   t->is_sequence() ? ValueKind::kSequence : ValueKind::kOptionalTensor);
    else ctx.AddInput(true, t->dtype(), ToSymShape(t->dims()), t->device() == DeviceType::kCpu ? t : nullptr);
  }
  for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
  const Status inferred = InferNode(def, ctx);
  if (value_asks) *value_asks = ctx.ValueAsks();
  WH_RETURN_IF_ERROR(inferred);
  if (value_reads) *value_reads = ctx.ValueReads();
  out_dtypes->assign(node.outputs.size(), DType::kUndefined);
  out_dims->assign(node.outputs.size(), Dims());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] < 0) continue;
    const auto& s = ctx.OutputShape(static_cast<int>(i));
    std::optional<Dims> d = s ? ToDims(*s) : std::nullopt;
    if (!d) return Internal(node.DebugName() + ": output " + std::to_string(i) + " has no concrete shape at run time");
    auto n = CheckedNumElements(*d);
    if (!n.ok()) return n.status().WithContext(node.DebugName());
    (*out_dtypes)[i] = ctx.OutputDType(static_cast<int>(i));
    (*out_dims)[i] = std::move(*d);
  }
  return Status::Ok();
}

StatusOr<DeviceCheckReport> NewDeviceCheckReport(DeviceType device, bool with_landing) {
  constexpr size_t kBytes = kDeviceCheckWords * sizeof(int64_t);
  DeviceCheckReport r;
  // Zero-filled, as a DeviceRuntime allocates.
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Buffer::AllocateOn(device, kBytes));
  r.words = Tensor(DType::kInt64, {kDeviceCheckWords}, std::move(b));
  const DeviceRuntime* rt = DeviceRuntimeFor(device);
  if (with_landing && rt && rt->download_async && rt->allocate_host) {
    auto landing = Buffer::AllocatePageLocked(device, kBytes);
    if (landing.ok()) r.landing = Tensor(DType::kInt64, {kDeviceCheckWords}, std::move(*landing));
  }
  return r;
}

void QueueCheckReportDownload(DeviceCheckReport& report) {
  if (!report.landing.defined()) return;
  const DeviceRuntime* rt = DeviceRuntimeFor(report.words.device());
  report.queued = rt->download_async(report.landing.raw_data(), report.words.raw_data(), report.words.nbytes()).ok();
}

StatusOr<int64_t> TakeDeviceCheckReport(DeviceCheckReport& report, std::vector<int64_t>* words) {
  if (report.queued) {
    report.queued = false;
    words->assign(report.landing.data<int64_t>(), report.landing.data<int64_t>() + kDeviceCheckWords);
  } else {
    WH_ASSIGN_OR_RETURN(Tensor host, report.words.ToDevice(DeviceType::kCpu));
    words->assign(host.data<int64_t>(), host.data<int64_t>() + kDeviceCheckWords);
  }
  if ((*words)[0] != 0) WH_RETURN_IF_ERROR(CopyTensorBytes(Tensor(DType::kInt64, {kDeviceCheckWords}), &report.words));
  return (*words)[0];
}

StatusOr<std::vector<Tensor>> RunNode(const Node& node, int opset, const std::vector<Tensor>& inputs,
                                      Backend backend, int num_threads, bool treat_inputs_as_const) {
  RegisterAllOps();
  WH_RETURN_IF_ERROR(ValidateNode(node, opset));
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  std::vector<const Tensor*> in;
  std::vector<DType> dts;
  std::vector<int> ranks;
  for (const Tensor& t : inputs) {
    in.push_back(t.defined() ? &t : nullptr);
    dts.push_back(t.defined() ? t.dtype() : DType::kUndefined);
    ranks.push_back(t.defined() ? t.rank() : -1);
  }
  std::vector<const Tensor*> consts = treat_inputs_as_const ? in : std::vector<const Tensor*>(in.size(), nullptr);
  WH_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel,
                      CreateKernel(node, opset, backend, dts, consts, Precision::kFp32, ranks));
  std::vector<DType> odt;
  std::vector<Dims> odims;
  const bool sets_outputs = kernel->SetsOutputs();  // control flow: shapes come from its run
  if (!sets_outputs) WH_RETURN_IF_ERROR(InferConcrete(*def, node, opset, in, &odt, &odims));
  // A device kernel gets device copies of the inputs (host ones of those it reads on the host:
  // OpKernel::HostInputs) and device outputs, copied back after.
  const DeviceType dev = kernel->device();
  std::vector<Tensor> moved(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const DeviceType want = InputDevice(*kernel, i);
    if (in[i] && in[i]->device() != want) {
      WH_ASSIGN_OR_RETURN(moved[i], in[i]->ToDevice(want));
      in[i] = &moved[i];
    }
  }
  std::vector<Tensor> outs(node.outputs.size());
  KernelContext ctx;
  ctx.inputs = in;
  ctx.num_threads = num_threads;
  int alias = kernel->OutputAliasesInput();
  for (size_t i = 0; i < outs.size(); ++i) {
    if (node.outputs[i] < 0) { ctx.outputs.push_back(nullptr); continue; }
    if (sets_outputs) {
    } else if (i == 0 && alias >= 0) {
      outs[i] = in[static_cast<size_t>(alias)]->Reshaped(odims[i]);
    } else if (dev == DeviceType::kCpu) {
      outs[i] = Tensor(odt[i], odims[i]);
    } else {
      WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b,
                          Buffer::AllocateOn(dev, static_cast<size_t>(NumElements(odims[i])) * DTypeSize(odt[i])));
      outs[i] = Tensor(odt[i], odims[i], std::move(b));
    }
    ctx.outputs.push_back(&outs[i]);
  }
  DeviceCheckReport report;  // a device kernel's check report (kernels/kernel.h), read once its work is done
  if (alias < 0 && dev != DeviceType::kCpu && kernel->ChecksOnDevice()) {
    WH_ASSIGN_OR_RETURN(report, NewDeviceCheckReport(dev, /*with_landing=*/false));
    ctx.device_check = report.device_words();
  }
  if (alias < 0) WH_RETURN_IF_ERROR(kernel->Compute(ctx).WithContext(node.DebugName()));
  for (size_t i = 0; sets_outputs && i < outs.size(); ++i)
    if (node.outputs[i] >= 0 && !outs[i].defined())
      return Internal(node.DebugName() + ": output " + std::to_string(i) + " was not set");
  for (Tensor& t : outs) {
    if (!t.defined() || t.device() == DeviceType::kCpu) continue;
    WH_ASSIGN_OR_RETURN(t, t.ToDevice(DeviceType::kCpu));
  }
  if (report.defined()) {
    std::vector<int64_t> words;
    WH_ASSIGN_OR_RETURN(int64_t tag, TakeDeviceCheckReport(report, &words));
    if (tag != 0) return kernel->DeviceCheckError(words.data()).WithContext(node.DebugName());
  }
  return outs;
}

}  // namespace whittle
