// Device bodies of the data-movement ops exported graphs put between the layers: Gather (an
// embedding lookup, a token picked from a sequence), Concat (skip connections), Cast (masks, ids)
// and Where (masking). Without them each such node ran on the CPU with a copy each way and a
// synchronisation. Elements move as unsigned words of their size (a float is a uint32_t here), so
// one instantiation per element size serves every dtype; Cast converts between the types below.
//   GatherAt:       element i of y [outer, n_idx, inner] from x [outer, axis_dim, inner]
//   ConcatPieceAt:  element i of one input [outer, piece_row] into y's rows of out_row at offset
//   CastAt:         element i, ONNX Cast semantics (kernels/common/dtype_dispatch.h's CastValue)
//   WhereAt:        element i of y = cond ? x : y under numpy broadcasting (three stride sets)
// The CUDA drivers are kernels/cuda/movement.cu; tests/kernels/cuda_movement_body_test.cc runs
// these on the CPU against the reference kernels.
#pragma once

#include <cstdint>

#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/hd.h"
#include "kernels/cuda/movement.h"

namespace whittle::cuda {

// Indices read as int64 or int32 (one of idx64 / idx32 is null). A negative index counts from
// the end; one out of [-axis_dim, axis_dim) gives zeros and, where there is a report
// (ReportCheck), is reported there as (index, position, axis, axis_dim) by the element of its row
// with outer and inner position 0 (one report per bad index, not one per element).
template <class T>
WH_HD void GatherAt(const T* x, const int64_t* idx64, const int32_t* idx32, T* y, int64_t axis_dim, int64_t n_idx,
                    int64_t inner, int64_t i, int64_t* report = nullptr, int64_t tag = 0, int64_t axis = 0) {
  const int64_t k = i % inner, j = (i / inner) % n_idx, o = i / (inner * n_idx);
  const int64_t v = idx64 ? idx64[j] : static_cast<int64_t>(idx32[j]);
  const int64_t a = v < 0 ? v + axis_dim : v;
  if (a >= 0 && a < axis_dim) {
    y[i] = x[(o * axis_dim + a) * inner + k];
    return;
  }
  y[i] = T(0);
  if (report && o == 0 && k == 0) ReportCheck(report, tag, v, j, axis, axis_dim);
}

template <class T>
WH_HD void ConcatPieceAt(const T* x, T* y, int64_t piece_row, int64_t out_row, int64_t offset, int64_t i) {
  const int64_t o = i / piece_row, k = i - o * piece_row;
  y[o * out_row + offset + k] = x[i];
}

// The element types the CUDA Cast converts (bool as one byte 0/1).
enum class CastType : int { kFloat32, kInt32, kInt64, kUInt8, kInt8, kBool };

// float -> integer D: NaN to 0, saturating at D's limits, truncating toward zero (CastValue's
// FloatToInt on the CPU, compare for compare).
template <class D>
WH_HD D FloatToIntSat(double v, D lo, D hi) {
  if (v != v) return D(0);
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<D>(v);
}

// One value of source type S into destination type `to`, written as element i of y.
template <class S>
WH_HD void CastOne(S s, bool s_is_float, CastType to, void* y, int64_t i) {
  const double v = static_cast<double>(s);
  switch (to) {
    case CastType::kFloat32: static_cast<float*>(y)[i] = static_cast<float>(s); break;
    case CastType::kBool: static_cast<uint8_t*>(y)[i] = s != S(0) ? 1 : 0; break;
    case CastType::kInt32:
      static_cast<int32_t*>(y)[i] = s_is_float ? FloatToIntSat<int32_t>(v, INT32_MIN, INT32_MAX) : static_cast<int32_t>(s);
      break;
    case CastType::kInt64:
      static_cast<int64_t*>(y)[i] = s_is_float ? FloatToIntSat<int64_t>(v, INT64_MIN, INT64_MAX) : static_cast<int64_t>(s);
      break;
    case CastType::kUInt8:
      static_cast<uint8_t*>(y)[i] = s_is_float ? FloatToIntSat<uint8_t>(v, 0, UINT8_MAX) : static_cast<uint8_t>(s);
      break;
    case CastType::kInt8:
      static_cast<int8_t*>(y)[i] = s_is_float ? FloatToIntSat<int8_t>(v, INT8_MIN, INT8_MAX) : static_cast<int8_t>(s);
      break;
  }
}

WH_HD void CastAt(const void* x, CastType from, void* y, CastType to, int64_t i) {
  switch (from) {
    case CastType::kFloat32: CastOne(static_cast<const float*>(x)[i], true, to, y, i); break;
    case CastType::kInt32: CastOne(static_cast<const int32_t*>(x)[i], false, to, y, i); break;
    case CastType::kInt64: CastOne(static_cast<const int64_t*>(x)[i], false, to, y, i); break;
    case CastType::kUInt8: CastOne(static_cast<const uint8_t*>(x)[i], false, to, y, i); break;
    case CastType::kInt8: CastOne(static_cast<const int8_t*>(x)[i], false, to, y, i); break;
    case CastType::kBool: CastOne(static_cast<const uint8_t*>(x)[i] != 0 ? 1 : 0, false, to, y, i); break;
  }
}

// Where's broadcast: the output dims and, per operand, its element strides (0 along a broadcast dim).
struct WhereShape {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  int64_t c_strides[kMaxRank] = {}, x_strides[kMaxRank] = {}, y_strides[kMaxRank] = {};
};

template <class T>
WH_HD void WhereAt(const uint8_t* cond, const T* x, const T* y, T* out, const WhereShape& s, int64_t i) {
  const bool c = cond[StridedOffset(s.rank, s.dims, s.c_strides, i)] != 0;
  out[i] = c ? x[StridedOffset(s.rank, s.dims, s.x_strides, i)] : y[StridedOffset(s.rank, s.dims, s.y_strides, i)];
}

// Pad: per axis d, idx[offset[d] + o] is the input index output index o reads along d
// (kernels/common/index.h's PadSourceIndex, tabled on the host), -1 for the constant.
struct PadGeom {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
  int64_t offset[kMaxRank] = {};
  const int32_t* idx = nullptr;
};

WH_HD void PadAt(const float* x, float* y, float value, const PadGeom& g, int64_t i) {
  int64_t rest = i, off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t o = rest % g.out_dims[d];
    rest /= g.out_dims[d];
    const int32_t s = g.idx[g.offset[d] + o];
    if (s < 0) {
      y[i] = value;
      return;
    }
    off += static_cast<int64_t>(s) * g.in_strides[d];
  }
  y[i] = x[off];
}

}  // namespace whittle::cuda
