// Reference RNN, GRU and LSTM: plain loops over float and double, one sequence and one step at a
// time, dot products accumulated in double. Each sequence runs over its own length (forwards, or
// from its last valid step backwards); Y past that length is zero and Y_h/Y_c hold the state
// after its last processed step (zero for an empty sequence, as ONNX Runtime gives). clip bounds
// the input of every gate activation, not the cell state that LSTM's h takes (ONNX Runtime's
// reading of the spec, checked by tests/tools/ort_recurrent_check.py). Attributes are parsed
// and checked by the family's factory (kernels/recurrent_kernels.cc).
#pragma once

#include "kernels/common/recurrent_attrs.h"

namespace whittle::reference {

extern const RecurrentFns kRecurrentFns;

}  // namespace whittle::reference
