// The arithmetic of INT8 quantization shared by the --int8 emitters and their tests: scale and
// zero-point choice for activations (asymmetric uint8 whose range always contains 0, or
// symmetric int8), symmetric int8 weights per output channel or per tensor (levels -127..127,
// so |w - dq(q(w))| <= scale/2 for every element), and int32 biases at scale a_scale*w_scale[n]
// (computed in float, as the runtime's kernels do). Rounding is half-to-even like QuantizeLinear.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/ir/tensor.h"

namespace whittle::quant {

// Scale and zero point of one activation tensor.
struct ActParams {
  float scale = 1.f;
  int32_t zero_point = 0;
  DType dtype = DType::kUInt8;  // kUInt8 (asymmetric) or kInt8 (symmetric, zero point 0)
  float lo = 0, hi = 0;         // the range the parameters were chosen for (after widening to 0)
};

// Parameters for the real range [lo, hi]; the range is widened to contain 0 so that zero
// padding and Relu's zeros are exact. A degenerate range gets scale 1 (scales must be > 0).
ActParams ChooseActParams(float lo, float hi, DType dtype);

// The levels of an activation dtype: [-128, 127] for kInt8, [0, 255] for kUInt8.
void QRange(DType dt, int32_t* qmin, int32_t* qmax);

// round-half-to-even(x / scale) + zero_point, saturated to the dtype's range (infinities too).
int32_t QuantizeValue(float x, const ActParams& p);
float DequantizeValue(int32_t q, const ActParams& p);

// A float weight quantized to symmetric int8.
struct QuantizedWeight {
  Tensor values;              // int8, same dims as the float weight
  std::vector<float> scales;  // one per slice along `axis`, or one (axis < 0)
  int64_t axis = -1;          // channel axis, -1 for per-tensor
};

// w float32; axis in [0, rank) for per-channel scales max|w_c|/qmax, or -1 for one scale.
// qmax 127 (full int8) or 63 (7 bits, "reduce range": keeps u8*s8 pair sums inside int16 for
// x86 kernels without VNNI). An all-zero slice gets scale 1.
QuantizedWeight QuantizeWeightSymmetric(const Tensor& w, int64_t axis, int qmax = 127);

// Transposes a 2-D tensor of 1-byte or 4-byte elements (Gemm transB=1 weights for
// MatMulInteger/QLinearMatMul, which take B as [K, N]).
Tensor Transpose2D(const Tensor& t);

// Bias b (float32, N elements) as int32 at scale float(a_scale * w_scales[n]) (w_scales has N
// entries or one); values past the int32 range saturate.
Tensor QuantizeBias(const Tensor& b, float a_scale, const std::vector<float>& w_scales);
// The per-channel bias scales float(a_scale * w_scales[n]) used above.
std::vector<float> BiasScales(float a_scale, const std::vector<float>& w_scales);

}  // namespace whittle::quant
