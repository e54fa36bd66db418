// Fast CPU integer linear ops (QGemm / QLinearMatMul / MatMulInteger and QConv / QLinearConv /
// ConvInteger): the compute functions of cpu::kQLinearFns, bit-identical to the reference. They
// choose per call between oneDNN, the byte kernel and the int16 kernel of kernels/cpu/qgemm.h,
// and pack constant weights once at load (PackGemmWeights / PackConvWeights) for whichever of
// the two own kernels is exact for them.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/common/qlinear_fns.h"

namespace whittle::cpu {

// w: K x N (GEMM) or [M, C/group, k...] (conv), int8 or uint8, with its zero points.
QPackedWeights PackGemmWeights(const Tensor& w, const std::vector<int32_t>& w_zp);
QPackedWeights PackConvWeights(const Tensor& w, const std::vector<int32_t>& w_zp, int64_t group);
// c.packed_b / c.packed_w: what the Pack* functions above returned, or null.
Status QGemm(const QGemmCall& c, int threads);
Status QConv(const QConvCall& c, int threads);
// Whether QConv fuses c's max pool: on the channels-last byte kernel with multipliers >= 0.
bool QConvPools(const QConvCall& c);

// QGemm and QConv with their packing; DynamicQuantizeLinear takes the reference's.
extern const QLinearFns kQLinearFns;

}  // namespace whittle::cpu
