// ONNX DFT (opsets 17 and 20): how the attributes and the optional dft_length / axis inputs
// resolve into one transform, shared by shape inference (lib/ops/signal.cc) and the kernels so the
// output shape and the arithmetic can never disagree. Layout: input [batch..., signal..., C] with
// C = 1 (real) or 2 (real, imaginary); the transform runs along one signal axis; the output has
// the same rank and ends in 2, except the inverse one-sided transform (irfft), whose output is
// real and ends in 1 (as the onnx package's reference and its test_dft_irfft cases define it).
#pragma once

#include <cstdint>
#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct DftShape {
  int64_t axis = 0;      // normalised, in [0, rank - 2]
  int64_t length = -1;   // N, the transform length; -1 when not yet known
  int64_t out_len = -1;  // the output's size along axis; -1 when not yet known
  int64_t out_comp = 2;  // the output's last dim
};

// rank: the input's rank; axis: as given (negative counts from the back over the input rank);
// axis_len, last: the input's sizes along axis and in the last dim, -1 when unknown (inference);
// dft_length: -1 when the input is absent. Errors say what was expected.
inline StatusOr<DftShape> ResolveDft(int64_t rank, int64_t axis, int64_t axis_len, int64_t last, int64_t dft_length,
                                     bool inverse, bool onesided) {
  if (rank < 2)
    return InvalidArgument("DFT input must have rank >= 2 ([signal..., 1 or 2]), got rank " + std::to_string(rank));
  if (last >= 0 && last != 1 && last != 2)
    return InvalidArgument("DFT input's last dim must be 1 (real) or 2 (complex), got " + std::to_string(last));
  if (axis < -rank || axis >= rank)
    return InvalidArgument("DFT axis " + std::to_string(axis) + " is out of range for input rank " + std::to_string(rank));
  DftShape s;
  s.axis = axis < 0 ? axis + rank : axis;
  if (s.axis == rank - 1)
    return InvalidArgument("DFT axis " + std::to_string(axis) +
                           " names the last dim, which holds the real and imaginary parts; expected a signal axis in "
                           "[0, " + std::to_string(rank - 2) + "]");
  if (onesided && !inverse && last == 2)
    return InvalidArgument("DFT onesided=1 needs a real input (last dim 1); a complex input has no one-sided spectrum");
  if (dft_length == 0 || dft_length < -1)
    return InvalidArgument("DFT dft_length must be >= 1, got " + std::to_string(dft_length));
  const bool irfft = inverse && onesided;
  if (dft_length > 0) {
    s.length = dft_length;
  } else if (axis_len >= 0) {
    // irfft without dft_length: the even signal whose half spectrum has axis_len bins (numpy).
    s.length = irfft ? 2 * (axis_len - 1) : axis_len;
    if (s.length < 1)
      return InvalidArgument("DFT signal axis of size " + std::to_string(axis_len) + " gives an empty transform" +
                             (irfft ? "; an inverse one-sided DFT of one bin needs dft_length" : ""));
  }
  if (s.length > (int64_t{1} << 40)) return InvalidArgument("DFT length " + std::to_string(s.length) + " is too large");
  s.out_len = s.length < 0 ? -1 : (onesided && !inverse ? s.length / 2 + 1 : s.length);
  s.out_comp = irfft ? 1 : 2;
  return s;
}

// A scalar int32/int64 input (dft_length, axis): rank 0 or one element.
inline StatusOr<int64_t> DftScalarInput(const Tensor& t, const char* what) {
  if (t.numel() != 1 || t.rank() > 1)
    return InvalidArgument(std::string("DFT ") + what + " must be a scalar, got shape " + DimsToString(t.dims()));
  if (t.dtype() == DType::kInt64) return t.data<int64_t>()[0];
  if (t.dtype() == DType::kInt32) return static_cast<int64_t>(t.data<int32_t>()[0]);
  return InvalidArgument(std::string("DFT ") + what + " must be int32 or int64, got " + DTypeName(t.dtype()));
}

}  // namespace whittle
