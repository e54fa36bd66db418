// Runs one node outside a graph: infers its output shapes from the concrete inputs, builds the
// kernel of the requested backend (the reference kernel where that backend lacks the op), allocates outputs and
// computes. Session uses the same pieces per node; op tests use this directly to compare the
// reference and CPU kernels.
#pragma once

#include <memory>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ops/op_def.h"

namespace whittle {

// Builds the kernel for node with the given backend (its family falls back to kReference).
// const_inputs[i] is the value of input i if it is constant at load time; input_ranks[i] its rank
// where static inference knows it (-1 where not; KernelInit::input_ranks).
StatusOr<std::unique_ptr<OpKernel>> CreateKernel(const Node& node, int opset, Backend backend,
                                                 const std::vector<DType>& input_dtypes,
                                                 const std::vector<const Tensor*>& const_inputs,
                                                 Precision precision = Precision::kFp32,
                                                 std::vector<int> input_ranks = {}, bool pack_weights = true,
                                                 int num_threads = 0);

// Infers output dims for concrete inputs (absent inputs: nullptr). outputs gets dtype/dims;
// value_reads (optional) gets InferContext::ValueReads(): which inputs' values the shapes depend on.
// Inputs on a device give their dtype and dims only (their values are not read); value_asks
// (optional, set on failure too) gets InferContext::ValueAsks(): which inputs' values inference
// asked for, known or not — a device input among them must be downloaded and inference rerun.
Status InferConcrete(const OpDef& def, const Node& node, int opset, const std::vector<const Tensor*>& inputs,
                     std::vector<DType>* out_dtypes, std::vector<Dims>* out_dims, uint64_t* value_reads = nullptr,
                     uint64_t* value_asks = nullptr);

// A device check report (kernels/kernel.h's kDeviceCheckWords int64): `words` on the device, which
// kernels write, zero between runs; where the device has queued downloads into page-locked
// memory, `landing` on the host, into which the report's words are queued behind the run's
// work, so the wait that ends the run brings them too (no copy of its own after it).
struct DeviceCheckReport {
  Tensor words;
  Tensor landing;
  bool queued = false;  // the words' download into `landing` is queued and not read yet
  bool defined() const { return words.defined(); }
  int64_t* device_words() { return static_cast<int64_t*>(words.raw_data()); }
};
// with_landing: allocate the landing where the device has queued downloads (page-locked memory is
// slow to allocate: for a report read run after run).
StatusOr<DeviceCheckReport> NewDeviceCheckReport(DeviceType device, bool with_landing);
// Queues the report's download behind the work this thread queued (where it has a landing);
// TakeDeviceCheckReport then reads it once the thread has synchronized.
void QueueCheckReportDownload(DeviceCheckReport& report);
// Reads the report once the device work that writes it is done (and, for a queued download, the
// thread has synchronized): the tag a kernel reported under (0: none) and the report's words in
// *words; a written report is zeroed again for the next run.
StatusOr<int64_t> TakeDeviceCheckReport(DeviceCheckReport& report, std::vector<int64_t>* words);

// Validates, infers, builds the kernel (inputs are treated as constants at build time when
// treat_inputs_as_const) and runs it. Returns one tensor per node output (undefined if absent).
StatusOr<std::vector<Tensor>> RunNode(const Node& node, int opset, const std::vector<Tensor>& inputs,
                                      Backend backend, int num_threads = 1, bool treat_inputs_as_const = false);

}  // namespace whittle
