#include "lib/ir/codebook_format.h"

#include <string>

namespace whittle {

Status CheckCodebookTensors(const CodebookAttrs& a, const Tensor& codebook, const Tensor& indices, const Tensor* bias,
                            bool scan_indices) {
  if (a.bits != 4 && a.bits != 8) return InvalidArgument("bits must be 4 or 8, got " + std::to_string(a.bits));
  if (a.n < 1 || a.k < 1) return InvalidArgument("out_features and in_features must be >= 1");
  if (codebook.dtype() != DType::kFloat32 || codebook.rank() != 1 || codebook.numel() < 1 ||
      codebook.numel() > (int64_t{1} << a.bits))
    return InvalidArgument("the codebook must be float32 [C] with 1 <= C <= " + std::to_string(int64_t{1} << a.bits) +
                           " (bits=" + std::to_string(a.bits) + "), got " + DTypeName(codebook.dtype()) + " " +
                           DimsToString(codebook.dims()));
  const int64_t want = PackedIndexBytes(a.n * a.k, a.bits);
  if (indices.dtype() != DType::kUInt8 || indices.rank() != 1 || indices.numel() != want)
    return InvalidArgument("the packed indices must be uint8 [" + std::to_string(want) + "] (" + std::to_string(a.n) +
                           "x" + std::to_string(a.k) + " weights at " + std::to_string(a.bits) + " bits), got " +
                           DTypeName(indices.dtype()) + " " + DimsToString(indices.dims()));
  if (bias && (bias->dtype() != DType::kFloat32 || bias->numel() != a.n || bias->rank() != 1))
    return InvalidArgument("the bias must be float32 [" + std::to_string(a.n) + "], got " + DTypeName(bias->dtype()) +
                           " " + DimsToString(bias->dims()));
  if (scan_indices) {
    const uint8_t* p = indices.data<uint8_t>();
    const uint32_t c = static_cast<uint32_t>(codebook.numel());
    for (int64_t e = 0; e < a.n * a.k; ++e)
      if (CodebookIndexAt(p, e, a.bits) >= c)
        return InvalidArgument("index " + std::to_string(CodebookIndexAt(p, e, a.bits)) + " of weight " +
                               std::to_string(e) + " is past the codebook's " + std::to_string(c) + " entries");
  }
  return Status::Ok();
}

}  // namespace whittle
