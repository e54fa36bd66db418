// Small graph-building helpers shared by the --int8 emitters (QDQ, QOperator, dynamic): fresh
// values and initializers with unique names, nodes appended with their outputs, the quantized
// form of a layer's weight (int8, scales, zero points) and the removal of replaced nodes.
// Emitters only append while they work and remove replaced nodes once at the end, so node
// indices taken from the plan stay valid throughout.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "passes/quantize/int8_plan.h"
#include "passes/quantize/quant_math.h"

namespace whittle::quant {

int NewValue(Graph& g, const std::string& name, DType dt);
int NewInit(Graph& g, const std::string& name, Tensor t);
// Appends a node (name made unique among nodes by the caller's prefix) and returns its index.
int Emit(Graph& g, const std::string& op, const std::string& name, std::vector<int> inputs, std::vector<int> outputs,
         AttributeMap attrs = {});
// Scalar scale and zero point initializers for activation parameters.
int ScaleInit(Graph& g, const std::string& base, float scale);
int ZeroPointInit(Graph& g, const std::string& base, const ActParams& p);

// A layer's weight as stored by an emitter.
struct EmittedWeight {
  int values = -1, scale = -1, zero_point = -1;  // initializer ids
  std::vector<float> scales;
  int64_t axis = -1;  // of the stored tensor; -1 per-tensor
  int64_t bytes = 0;  // of the three initializers
};
// as_kn: store as [K, N] (MatMulInteger/QLinearMatMul's B; transposes a Gemm transB=1 weight).
// Zero points (all 0) have the scales' shape: a vector per channel, a scalar per tensor.
EmittedWeight EmitWeight(Graph& g, const QuantLayer& l, bool as_kn);

}  // namespace whittle::quant
