// Fast CPU RNN, GRU and LSTM (float32) on Sgemm: per direction, one GEMM projects the inputs of
// every time step at once (X·W^T, [seq*batch, gates*hidden]) and one GEMM per step multiplies the
// hidden state of the whole batch by R^T (GRU without linear_before_reset: one for the z and r
// gates, a second for (r ⊙ H)·Rh^T). Constant W, R and B are captured at load time (the two bias
// halves pre-summed wherever ONNX adds them); the element-wise gate math runs in float. Sequences
// shorter than seq_length keep their state frozen after their last step (an empty one ends with
// zero Y_h and Y_c). Other dtypes: the builders return an ok null kernel and the family's
// BackendTable builds the reference one.
#pragma once

#include "kernels/common/recurrent_attrs.h"

namespace whittle::cpu {

extern const RecurrentFns kRecurrentFns;

}  // namespace whittle::cpu
