// What --int8 will quantize, decided before anything is emitted: the Conv/Gemm/MatMul layers
// with a constant float weight (and their fused Relu or ReLU6-style Clip), the shape/pool ops that can run on the
// quantized tensors between them (MaxPool, Flatten, Reshape, ...), and the activation tensors
// that need a scale and zero point — measured by calibration or inherited through those ops.
// Layers already between DequantizeLinear/QuantizeLinear are left alone (idempotence).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "passes/pass.h"
#include "passes/quantize/int8_options.h"
#include "passes/quantize/quant_math.h"

namespace whittle::quant {

struct QuantLayer {
  int node = -1;
  std::string name, op_type;
  int input = -1;      // activation value (input 0)
  int weight = -1;     // float32 initializer
  int bias = -1;       // float32 initializer with N elements, or -1
  int bias_add = -1;   // a MatMul's Add of a constant [N] bias, kept before the output QDQ (static qdq), or -1
  int act = -1;        // Relu, or Clip with constant bounds, fused after the layer (static mode), or -1
  int output = -1;     // the value quantized after the layer: the activation's output when fused
  int64_t weight_axis = 0;  // output-channel axis of the stored weight
  bool trans_b = false;     // Gemm transB=1: weight stored [N, K]
  bool per_channel = true;
  int weight_qmax = 127;    // 63 with reduce-range=1
};

struct Int8Plan {
  std::vector<QuantLayer> layers;
  std::vector<int> passthrough;      // nodes run on quantized data (static mode)
  std::map<int, int> inherit;        // value -> value whose parameters it reuses
  std::vector<int> calibrate;        // values whose ranges are measured (static mode)
  std::map<int, ActParams> existing; // values already produced by a DequantizeLinear
  std::map<int, LayerReport> skipped;  // node index -> candidate layer left alone, with the reason
  std::vector<int> act_matmuls;        // attention=1: activation x activation MatMuls (inputs quantized)
};


// Matches layers on g (shapes inferred). Errors name unknown exclude=/layer= nodes.
StatusOr<Int8Plan> MakePlan(const Graph& g, const Int8Config& c);

// Parameters of every quantized value: calibrated ranges, inherited ones and existing DQs.
struct ParamTable {
  std::map<int, ActParams> params;
  const ActParams& at(int id) const { return params.at(id); }
  bool has(int id) const { return params.count(id) != 0; }
};

}  // namespace whittle::quant
