// Registers the RNN, GRU and LSTM kernels: attributes parsed and checked once here, then built by
// init.backend's builder (the reference: plain loops, float and double; the fast CPU one: float32
// on Sgemm with the weights captured at load time).
#include "kernels/common/recurrent_attrs.h"
#include "kernels/cpu/recurrent.h"
#include "kernels/kernel.h"
#include "kernels/reference/recurrent.h"

namespace whittle {
namespace {

const BackendTable<RecurrentFns> kRecurrent{{Backend::kReference, &reference::kRecurrentFns},
                                            {Backend::kCpu, &cpu::kRecurrentFns}};

}  // namespace

void RegisterRecurrentKernels(KernelRegistry& r) {
  DeclareFamily(r, kRecurrent, &RecurrentFns::rnn, "", "RNN", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(RecurrentAttrs a, ParseRecurrentAttrs(RecurrentOp::kRnn, init));
    return kRecurrent.Make(init.backend, &RecurrentFns::rnn, a, init);
  });
  DeclareFamily(r, kRecurrent, &RecurrentFns::gru, "", "GRU", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(RecurrentAttrs a, ParseRecurrentAttrs(RecurrentOp::kGru, init));
    return kRecurrent.Make(init.backend, &RecurrentFns::gru, a, init);
  });
  DeclareFamily(r, kRecurrent, &RecurrentFns::lstm, "", "LSTM", kFloatTypes, [](const KernelInit& init) -> KernelOr {
    WH_ASSIGN_OR_RETURN(RecurrentAttrs a, ParseRecurrentAttrs(RecurrentOp::kLstm, init));
    return kRecurrent.Make(init.backend, &RecurrentFns::lstm, a, init);
  });
}

}  // namespace whittle
