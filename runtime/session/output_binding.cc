#include "runtime/session/output_binding.h"

#include <algorithm>

#include "lib/ir/device.h"

namespace whittle {

Status WriteOutputsInto(const Graph& g, const std::vector<const Tensor*>& produced, std::vector<Tensor>& into,
                        bool* queued) {
  if (into.size() != produced.size())
    return InvalidArgument("RunInto: the model has " + std::to_string(produced.size()) + " output(s), got " +
                           std::to_string(into.size()) + " tensor(s) to write them into");
  for (size_t i = 0; i < produced.size(); ++i) {  // every one checked before any is written
    const Tensor& t = *produced[i];
    const Tensor& d = into[i];
    if (!t.is_tensor())
      return InvalidArgument("RunInto: output '" + g.value(g.outputs()[i]).name +
                             "' is a sequence or an optional; Run returns those");
    if (!d.defined() || d.dtype() != t.dtype() || d.dims() != t.dims())
      return InvalidArgument("RunInto: output '" + g.value(g.outputs()[i]).name + "' is " + DTypeName(t.dtype()) +
                             DimsToString(t.dims()) + ", its tensor " +
                             (d.defined() ? std::string(DTypeName(d.dtype())) + DimsToString(d.dims()) : "is empty"));
  }
  for (size_t i = 0; i < produced.size(); ++i) {
    const Tensor& t = *produced[i];
    Tensor& dst = into[i];
    dst.quant = t.quant;
    const DeviceRuntime* rt = t.device() != DeviceType::kCpu ? DeviceRuntimeFor(t.device()) : nullptr;
    if (rt && rt->download_async && dst.buffer()->page_locked() && t.nbytes()) {
      WH_RETURN_IF_ERROR(rt->download_async(dst.raw_data(), t.raw_data(), t.nbytes()));
      *queued = true;
    } else {
      WH_RETURN_IF_ERROR(CopyTensorBytes(t, &dst));
    }
  }
  return Status::Ok();
}

Status CollectOutputs(const Graph& g, const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& slots,
                      OutputsOn outputs_on, RunArena& arena, std::vector<Tensor>* results) {
  for (int o : g.outputs()) {
    Tensor& t = slots[static_cast<size_t>(o)];
    if (!t.defined()) {  // a cache grown in place (RunWithCaches): the KvCache holds it
      results->push_back(Tensor());
      continue;
    }
    // Never hand out a constant's or an input's buffer: the caller may write into results.
    bool shared = g.value(o).is_constant();
    for (const auto& [name, x] : inputs) shared |= t.is_tensor() && x.is_tensor() && x.defined() && x.buffer() == t.buffer();
    if (!t.is_tensor()) {  // a sequence (its elements are never written) or an optional without a value
      results->push_back(t);
      continue;
    }
    if (t.device() != DeviceType::kCpu && outputs_on == OutputsOn::kWhereComputed && !shared) {
      if (std::find(arena.lent.begin(), arena.lent.end(), t.buffer()) == arena.lent.end())
        arena.lent.push_back(t.buffer());
      results->push_back(t);
      continue;
    }
    if (t.device() != DeviceType::kCpu) {  // the copy back waits for the device's queued work
      auto h = t.ToDevice(DeviceType::kCpu);
      if (!h.ok()) return h.status();
      results->push_back(std::move(*h));
      continue;
    }
    results->push_back(shared ? t.Clone() : t);
  }
  return Status::Ok();
}

}  // namespace whittle
