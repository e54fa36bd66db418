// Host side of the int8 epilogue: a QOutput (kernels/common/quant_params.h) as the tile GEMM's
// QEpiParams, with the multipliers and bias wherever the backend keeps them (device buffers in
// kernels/cuda/qlinear.cc, host vectors in the CPU emulation of tests/kernels/cuda_body_test.cc).
#pragma once

#include "kernels/common/quant_params.h"
#include "kernels/cuda/qgemm_body.h"

namespace whittle::cuda {

// mult: out.multiplier's values (null when empty); bias: out.bias's (null when empty).
inline QEpiParams EpilogueParams(const QOutput& out, const float* mult, const int32_t* bias) {
  QEpiParams p;
  switch (out.kind) {
    case QOutput::Kind::kInt32: p.out = QOut::kInt32; break;
    case QOutput::Kind::kFloat: p.out = QOut::kFloat; break;
    case QOutput::Kind::kQuantized: p.out = out.dtype == DType::kUInt8 ? QOut::kUInt8 : QOut::kInt8; break;
  }
  p.mult = out.multiplier.empty() ? nullptr : mult;
  p.mult_n = out.multiplier.empty() ? 1 : static_cast<int64_t>(out.multiplier.size());
  p.bias = out.bias.empty() ? nullptr : bias;
  p.zero_point = out.zero_point;
  p.qmin = out.qmin;
  p.qmax = out.qmax;
  p.relu = out.relu;
  return p;
}

}  // namespace whittle::cuda
