// Reference kernels (plain loops, the truth) of the integer linear ops: QGemm / QConv
// (ai.whittle), QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger, DynamicQuantizeLinear.
// Contract: acc = sum_k (a - a_zp) * (b - b_zp[n]) in int32, plus an int32 bias; the output is
// either acc (int32), float(acc) * S[c] (S = a_scale * b_scale[c]), or the quantized
// saturate(round_half_even(float(acc) * M[c]) + y_zp) with M = float(a_scale * b_scale[c]) / y_scale;
// Relu clamps at 0 / y_zp. The fast CPU kernels (kernels/cpu/qgemm.h) must match bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/common/qlinear_fns.h"
#include "kernels/common/quant_params.h"
#include "kernels/reference/conv.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// y[r, col] from acc[r, col] (rows x cols, row-major); the channel is r when channel_is_row, else col.
void QEpilogueReference(const QOutput& out, const int32_t* acc, int64_t rows, int64_t cols, bool channel_is_row,
                        void* y);

// Element (r, c) minus its zero point (zp index: r for A, c for B).
int32_t QMatrixAt(const QMatrix& m, int64_t r, int64_t c, int64_t zp_index);

// acc[i * N + j] = sum_k (a[i,k] - a_zp[i]) * (b[k,j] - b_zp[j]).
void QGemmAccReference(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K, int32_t* acc);

// Conv geometry of an integer conv (x [N, C, D...], w [M, C/group, k...]).
StatusOr<ConvShape> ResolveQConvShape(const std::string& node, const AttributeMap& attrs, const Dims& x,
                                      const Dims& w);
// acc [N, M, out...]: sum over the group's channels and taps of (x - x_zp) * (w - w_zp[m]); taps in
// the padding read x_zp (they add 0). x_zp is a scalar, w_zp 1 or M values.
void QConvAccReference(const ConvShape& s, const void* x, DType x_dtype, int32_t x_zp, const void* w, DType w_dtype,
                       const std::vector<int32_t>& w_zp, int32_t* acc);

// ONNX DynamicQuantizeLinear: uint8, range [min(0, min x), max(0, max x)], scale = range / 255,
// zero point = saturate(round_half_even(-min / scale)), y = saturate(round_half_even(x / scale) + zp).
void DynamicQuantizeLinearReference(const float* x, int64_t n, uint8_t* y, float* y_scale, uint8_t* y_zero_point);

namespace reference {
extern const QLinearFns kQLinearFns;
}  // namespace reference

}  // namespace whittle
