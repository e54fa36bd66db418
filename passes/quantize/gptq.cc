#include "passes/quantize/gptq.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>

namespace whittle::quant {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

IntBlocks Empty(int64_t n, int64_t k, int64_t block, bool symmetric, int bits) {
  IntBlocks q;
  q.n = n;
  q.k = k;
  q.block = block;
  q.symmetric = symmetric;
  q.bits = bits;
  q.codes.assign(static_cast<size_t>(n * k), 0);
  q.scale.assign(static_cast<size_t>(n * q.blocks()), 1.f);
  q.zero.assign(static_cast<size_t>(n * q.blocks()), static_cast<uint8_t>(1 << (bits - 1)));
  return q;
}

}  // namespace

void BlockParams(const float* v, int64_t count, int64_t stride, bool symmetric, int bits, float clip, float* scale,
                 uint8_t* zero) {
  float lo = 0.f, hi = 0.f;  // the range always holds 0, so 0 is exact
  for (int64_t i = 0; i < count; ++i) {
    lo = std::min(lo, v[i * stride]);
    hi = std::max(hi, v[i * stride]);
  }
  lo *= clip;
  hi *= clip;
  const int half = 1 << (bits - 1), qmax = (1 << bits) - 1;
  if (symmetric) {
    const float m = std::max(-lo, hi);
    *scale = m > 0.f ? m / static_cast<float>(half - 1) : 1.f;
    *zero = static_cast<uint8_t>(half);
  } else {
    const float range = hi - lo;
    *scale = range > 0.f ? range / static_cast<float>(qmax) : 1.f;
    *zero = static_cast<uint8_t>(std::clamp(std::nearbyint(-lo / *scale), 0.f, static_cast<float>(qmax)));
  }
}

uint8_t Code(float w, float scale, uint8_t zero, int bits) {
  return static_cast<uint8_t>(
      std::clamp(std::nearbyint(w / scale) + static_cast<float>(zero), 0.f, static_cast<float>((1 << bits) - 1)));
}

IntBlocks QuantizeRtn(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric, int bits) {
  IntBlocks q = Empty(n, k, block, symmetric, bits);
  const int64_t nb = q.blocks();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < nb; ++j) {
      const int64_t c0 = j * block, c1 = std::min(k, c0 + block);
      float& s = q.scale[static_cast<size_t>(r * nb + j)];
      uint8_t& z = q.zero[static_cast<size_t>(r * nb + j)];
      BlockParams(w + r * k + c0, c1 - c0, 1, symmetric, bits, 1.f, &s, &z);
      for (int64_t c = c0; c < c1; ++c) q.codes[static_cast<size_t>(r * k + c)] = Code(w[r * k + c], s, z, bits);
    }
  return q;
}

bool QuantizeGptq(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric, const std::vector<double>& gram,
                  IntBlocks* out, int bits, double dampening) {
  IntBlocks q = Empty(n, k, block, symmetric, bits);
  const int64_t nb = q.blocks();
  Mat W = Eigen::Map<const Mat>(w, n, k);
  Eigen::MatrixXd H(k, k);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) H(i, j) = gram[static_cast<size_t>(i * k + j)];
  // Features never seen: their weights cannot matter; the paper zeroes them and sets H_ii = 1.
  for (int64_t i = 0; i < k; ++i)
    if (H(i, i) == 0.0) {
      H(i, i) = 1.0;
      W.col(i).setZero();
    }
  double mean_diag = 0;
  for (int64_t i = 0; i < k; ++i) mean_diag += H(i, i);
  H.diagonal().array() += dampening * mean_diag / static_cast<double>(k);
  // U: the upper Cholesky factor of H^-1 (H^-1 = U^T U), as the paper uses it.
  Eigen::LLT<Eigen::MatrixXd> llt(H);
  if (llt.info() != Eigen::Success) return false;
  const Eigen::MatrixXd Hinv = llt.solve(Eigen::MatrixXd::Identity(k, k));
  Eigen::LLT<Eigen::MatrixXd> llt_inv(Hinv);
  if (llt_inv.info() != Eigen::Success) return false;
  const Mat U = Eigen::MatrixXd(llt_inv.matrixU()).cast<float>();

  const int64_t lazy = std::max<int64_t>(128, block);
  for (int64_t i1 = 0; i1 < k; i1 += lazy) {
    const int64_t i2 = std::min(k, i1 + lazy), cols = i2 - i1;
    Mat W1 = W.middleCols(i1, cols);
    Mat Err(n, cols);
    for (int64_t i = 0; i < cols; ++i) {
      const int64_t c = i1 + i;
      if (c % block == 0) {
        // This block's parameters from its columns as they stand now (all inside W1: lazy is a
        // multiple of block).
        const int64_t width = std::min(block, k - c);
        for (int64_t r = 0; r < n; ++r)
          BlockParams(&W1(r, i), width, 1, symmetric, bits, 1.f, &q.scale[static_cast<size_t>(r * nb + c / block)],
                      &q.zero[static_cast<size_t>(r * nb + c / block)]);
      }
      const float d = U(c, c);
      for (int64_t r = 0; r < n; ++r) {
        const size_t j = static_cast<size_t>(r * nb + c / block);
        const uint8_t code = Code(W1(r, i), q.scale[j], q.zero[j], bits);
        q.codes[static_cast<size_t>(r * k + c)] = code;
        const float deq = (static_cast<float>(code) - q.zero[j]) * q.scale[j];
        Err(r, i) = (W1(r, i) - deq) / d;
      }
      // The rest of the lazy batch absorbs this column's error.
      if (i + 1 < cols)
        W1.rightCols(cols - i - 1).noalias() -= Err.col(i) * U.block(c, c + 1, 1, cols - i - 1);
    }
    if (i2 < k) W.rightCols(k - i2).noalias() -= Err * U.block(i1, i2, cols, k - i2);
  }
  *out = std::move(q);
  return true;
}

}  // namespace whittle::quant
