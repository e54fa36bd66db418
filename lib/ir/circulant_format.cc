#include "lib/ir/circulant_format.h"

#include <algorithm>
#include <string>
#include <vector>

namespace whittle {

Status CheckCirculantAttrs(const CirculantAttrs& a) {
  if (a.block < 1) return InvalidArgument("block must be >= 1, got " + std::to_string(a.block));
  if (a.n < 1 || a.k < 1)
    return InvalidArgument("out_features and in_features must be >= 1, got " + std::to_string(a.n) + " and " +
                           std::to_string(a.k));
  constexpr int64_t kMax = int64_t{1} << 31;
  if (a.block > kMax || a.n > kMax || a.k > kMax || a.p() * a.q() > kMax / a.block)
    return InvalidArgument("block " + std::to_string(a.block) + " with " + std::to_string(a.n) + "x" +
                           std::to_string(a.k) + " features is too large");
  return Status::Ok();
}

Status CheckCirculantTensors(const CirculantAttrs& a, const Tensor& blocks, const Tensor* bias) {
  WH_RETURN_IF_ERROR(CheckCirculantAttrs(a));
  const Dims want{a.p(), a.q(), a.block};
  if (blocks.dtype() != DType::kFloat32 || blocks.dims() != want)
    return InvalidArgument("the block vectors must be float32 " + DimsToString(want) + " (out_features " +
                           std::to_string(a.n) + ", in_features " + std::to_string(a.k) + ", block " +
                           std::to_string(a.block) + "), got " + DTypeName(blocks.dtype()) + " " +
                           DimsToString(blocks.dims()));
  if (bias && (bias->dtype() != DType::kFloat32 || bias->rank() != 1 || bias->numel() != a.n))
    return InvalidArgument("the bias must be float32 [" + std::to_string(a.n) + "], got " + DTypeName(bias->dtype()) +
                           " " + DimsToString(bias->dims()));
  return Status::Ok();
}

Status CheckCirculantGradWeightShapes(const CirculantAttrs& a, const Tensor& dy, const Tensor& x) {
  const bool ok = dy.dtype() == DType::kFloat32 && x.dtype() == DType::kFloat32 && x.rank() >= 1 &&
                  dy.rank() == x.rank() && x.dims().back() == a.k && dy.dims().back() == a.n &&
                  std::equal(x.dims().begin(), x.dims().end() - 1, dy.dims().begin());
  if (!ok)
    return InvalidArgument("BlockCirculantMatMulGradWeight: dY " + std::string(DTypeName(dy.dtype())) + " " +
                           DimsToString(dy.dims()) + " and A " + DTypeName(x.dtype()) + " " + DimsToString(x.dims()) +
                           " must be float32 [..., " + std::to_string(a.n) + "] and [..., " + std::to_string(a.k) +
                           "] with the same leading dims");
  return Status::Ok();
}

void ExpandCirculant(const CirculantAttrs& a, const float* blocks, float* w) {
  const int64_t B = a.block, Q = a.q();
  for (int64_t r = 0; r < a.n; ++r)
    for (int64_t c = 0; c < a.k; ++c) {
      const int64_t i = r % B, j = c % B;
      w[r * a.k + c] = blocks[((r / B) * Q + c / B) * B + (i - j + B) % B];
    }
}

void FitCirculant(const CirculantAttrs& a, const float* w, float* blocks) {
  const int64_t B = a.block, P = a.p(), Q = a.q();
  std::vector<double> sum(static_cast<size_t>(P * Q * B), 0.0);
  std::vector<int64_t> cnt(sum.size(), 0);
  for (int64_t r = 0; r < a.n; ++r)
    for (int64_t c = 0; c < a.k; ++c) {
      const size_t e = static_cast<size_t>(((r / B) * Q + c / B) * B + (r % B - c % B + B) % B);
      sum[e] += w[r * a.k + c];
      ++cnt[e];
    }
  for (size_t e = 0; e < sum.size(); ++e) blocks[e] = cnt[e] ? static_cast<float>(sum[e] / static_cast<double>(cnt[e])) : 0.f;
}

int64_t CirculantMacsPerRow(const CirculantAttrs& a) {
  const int64_t B = a.block, H = B / 2 + 1, real = B % 2 == 0 ? std::min<int64_t>(2, H) : 1;
  int64_t lg = 0;
  while ((int64_t{1} << lg) < B) ++lg;
  return a.p() * a.q() * (real + 4 * (H - real)) + (a.p() + a.q()) * B * lg;
}

}  // namespace whittle
