#include "lib/ir/binary_format.h"

#include <algorithm>
#include <cmath>

namespace whittle {

StatusOr<bool> ParseBinaryActivations(const std::string& s) {
  if (s == "float") return false;
  if (s == "binary") return true;
  return InvalidArgument("activations must be \"float\" or \"binary\", got \"" + s + "\"");
}

Status CheckBinaryTensors(const BinaryAttrs& a, const Tensor& bits, const Tensor& alpha, const Tensor* bias,
                          bool scan_padding) {
  if (a.n < 1 || a.k < 1)
    return InvalidArgument("out_features and the contracted size must be >= 1, got " + std::to_string(a.n) + " and " +
                           std::to_string(a.k));
  const int64_t words = BinaryWords(a.k);
  if (bits.dtype() != DType::kUInt64 || bits.rank() != 2 || bits.dim(0) != a.n || bits.dim(1) != words)
    return InvalidArgument("the packed weight bits must be uint64 [" + std::to_string(a.n) + ", " +
                           std::to_string(words) + "] (" + std::to_string(a.k) + " inputs, 64 per word), got " +
                           DTypeName(bits.dtype()) + " " + DimsToString(bits.dims()));
  if (alpha.dtype() != DType::kFloat32 || alpha.rank() != 1 || alpha.numel() != a.n)
    return InvalidArgument("alpha must be float32 [" + std::to_string(a.n) + "], got " + DTypeName(alpha.dtype()) +
                           " " + DimsToString(alpha.dims()));
  if (bias && (bias->dtype() != DType::kFloat32 || bias->rank() != 1 || bias->numel() != a.n))
    return InvalidArgument("the bias must be float32 [" + std::to_string(a.n) + "], got " + DTypeName(bias->dtype()) +
                           " " + DimsToString(bias->dims()));
  if (scan_padding && a.k % 64 != 0) {
    const uint64_t pad = ~uint64_t{0} << (a.k % 64);
    const uint64_t* p = bits.data<uint64_t>();
    for (int64_t n = 0; n < a.n; ++n)
      if (p[n * words + words - 1] & pad)
        return InvalidArgument("row " + std::to_string(n) + " of the packed weight bits sets padding bits past input " +
                               std::to_string(a.k) + " (they must be zero)");
  }
  return Status::Ok();
}

double PackSigns(const float* x, int64_t k, uint64_t* out) {
  double s = 0;
  for (int64_t w = 0; w < BinaryWords(k); ++w) {
    uint64_t v = 0;
    const int64_t end = std::min<int64_t>(64, k - w * 64);
    for (int64_t b = 0; b < end; ++b) {
      const float f = x[w * 64 + b];
      v |= static_cast<uint64_t>(f >= 0.f) << b;
      s += std::fabs(f);
    }
    out[w] = v;
  }
  return s;
}

}  // namespace whittle
