#include "passes/quantize/awq.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>

namespace whittle::quant {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Multiply-adds one error evaluation may spend (rows x k^2): the whole layer up to this, an even
// subset of its rows beyond (the error is a sum over rows, so a subset estimates it).
constexpr double kEvalBudget = 4.0e9;
// Channels quieter than this share of the loudest count as this loud, so 1/s stays bounded for a
// channel the calibration data never (or hardly) excited.
constexpr double kMinMagnitude = 1e-3;
// The clipping search's ratios: 1, 0.95, ..., 0.55 of each block's range (the paper's grid of 20
// with max_shrink 0.5).
constexpr int kClipSteps = 10;

std::vector<int64_t> EvalRows(int64_t n, int64_t k) {
  const double fit = kEvalBudget / (static_cast<double>(k) * static_cast<double>(k));
  const int64_t m = std::min<int64_t>(n, std::max<int64_t>(64, static_cast<int64_t>(fit)));
  std::vector<int64_t> rows(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) rows[static_cast<size_t>(i)] = i * n / m;
  return rows;
}

// s_c = m_c^alpha, normalized so that max(s) min(s) = 1 (as the paper's implementation does:
// the scales stay centred on 1 whatever alpha).
std::vector<float> Scales(const std::vector<double>& mag, double alpha) {
  std::vector<double> s(mag.size());
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (size_t c = 0; c < mag.size(); ++c) {
    s[c] = std::pow(mag[c], alpha);
    lo = std::min(lo, s[c]);
    hi = std::max(hi, s[c]);
  }
  const double norm = std::sqrt(lo * hi);
  std::vector<float> out(mag.size());
  for (size_t c = 0; c < mag.size(); ++c) out[c] = static_cast<float>(s[c] / norm);
  return out;
}

// sum over rows[i] of dW G dW^T, dW the row of w less the dequantized row qrows[i] of q over s.
double OutputError(const float* w, int64_t k, const std::vector<int64_t>& rows, const std::vector<int64_t>& qrows,
                   const IntBlocks& q, const std::vector<float>& s, const Mat& G) {
  Mat D(static_cast<int64_t>(rows.size()), k);
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t c = 0; c < k; ++c)
      D(static_cast<int64_t>(i), c) = w[rows[i] * k + c] - q.Dequant(qrows[i], c) / s[static_cast<size_t>(c)];
  const Mat E = D * G;
  return E.cwiseProduct(D).cast<double>().sum();
}

// W diag(s) for the given rows, row-major.
std::vector<float> ScaledRows(const float* w, int64_t k, const std::vector<int64_t>& rows, const std::vector<float>& s) {
  std::vector<float> ws(rows.size() * static_cast<size_t>(k));
  for (size_t i = 0; i < rows.size(); ++i)
    for (int64_t c = 0; c < k; ++c) ws[i * static_cast<size_t>(k) + static_cast<size_t>(c)] = w[rows[i] * k + c] * s[static_cast<size_t>(c)];
  return ws;
}

// The paper's clipping search on the scaled weights ws [n, k], whose inputs have the Gram gs:
// each block's range shrunk to the ratio whose block output error d^T G_jj d is least. (One
// matrix-vector product per candidate: Eigen runs those on this thread, where small matrix
// products would each wake its thread pool.)
int64_t ClipSearch(const std::vector<float>& ws, const Mat& gs, IntBlocks* q) {
  const int64_t n = q->n, k = q->k, nb = q->blocks();
  int64_t clipped = 0;
  Eigen::VectorXf d(q->block), gd(q->block);
  for (int64_t j = 0; j < nb; ++j) {
    const int64_t c0 = j * q->block, width = std::min(q->block, k - c0);
    const Eigen::MatrixXf gjj = gs.block(c0, c0, width, width);
    d.resize(width);
    for (int64_t r = 0; r < n; ++r) {
      const float* v = ws.data() + r * k + c0;
      double best = std::numeric_limits<double>::max();
      int best_step = 0;
      float best_scale = 1.f;
      uint8_t best_zero = 0;
      for (int step = 0; step < kClipSteps; ++step) {
        float sc;
        uint8_t z;
        BlockParams(v, width, 1, q->symmetric, q->bits, 1.f - static_cast<float>(step) / 20.f, &sc, &z);
        for (int64_t t = 0; t < width; ++t) d(t) = v[t] - (static_cast<float>(Code(v[t], sc, z, q->bits)) - z) * sc;
        gd.noalias() = gjj * d;
        const double e = d.dot(gd);
        if (e < best) {
          best = e;
          best_step = step;
          best_scale = sc;
          best_zero = z;
        }
      }
      if (best_step == 0) continue;  // the block's full range: as rounded already
      ++clipped;
      q->scale[static_cast<size_t>(r * nb + j)] = best_scale;
      q->zero[static_cast<size_t>(r * nb + j)] = best_zero;
      for (int64_t t = 0; t < width; ++t) q->codes[static_cast<size_t>(r * k + c0 + t)] = Code(v[t], best_scale, best_zero, q->bits);
    }
  }
  return clipped;
}

}  // namespace

bool QuantizeAwq(const float* w, int64_t n, int64_t k, int64_t block, bool symmetric, int bits,
                 const std::vector<double>& gram, bool clip, AwqResult* out, int grid) {
  if (static_cast<int64_t>(gram.size()) != k * k || grid < 1) return false;
  std::vector<double> mag(static_cast<size_t>(k));
  double loudest = 0;
  for (int64_t c = 0; c < k; ++c) {
    mag[static_cast<size_t>(c)] = std::sqrt(std::max(0.0, gram[static_cast<size_t>(c * k + c)]));
    loudest = std::max(loudest, mag[static_cast<size_t>(c)]);
  }
  if (!(loudest > 0) || !std::isfinite(loudest)) return false;
  for (double& m : mag) m = std::max(m, kMinMagnitude * loudest) / loudest;  // in (0, 1]: pow stays finite
  Mat G(k, k);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < k; ++j) G(i, j) = static_cast<float>(gram[static_cast<size_t>(i * k + j)] / (loudest * loudest));

  const std::vector<int64_t> rows = EvalRows(n, k);
  std::vector<int64_t> sub(rows.size());
  for (size_t i = 0; i < sub.size(); ++i) sub[i] = static_cast<int64_t>(i);
  const int64_t m = static_cast<int64_t>(rows.size());
  double best = std::numeric_limits<double>::max(), rtn = 0;
  int best_i = 0;
  for (int i = 0; i < grid; ++i) {
    const std::vector<float> s = Scales(mag, static_cast<double>(i) / grid);
    const std::vector<float> ws = ScaledRows(w, k, rows, s);
    const double e = OutputError(w, k, rows, sub, QuantizeRtn(ws.data(), m, k, block, symmetric, bits), s, G);
    if (i == 0) rtn = e;
    if (e < best) {
      best = e;
      best_i = i;
    }
  }

  AwqResult r;
  const double alpha = static_cast<double>(best_i) / grid;
  r.alpha = static_cast<float>(alpha);
  const std::vector<float> s = Scales(mag, alpha);
  std::vector<int64_t> all(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
  const std::vector<float> ws = ScaledRows(w, k, all, s);
  r.q = QuantizeRtn(ws.data(), n, k, block, symmetric, bits);
  r.error = best;
  r.rtn_error = rtn;
  if (clip) {
    Mat gs(k, k);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) gs(i, j) = G(i, j) / (s[static_cast<size_t>(i)] * s[static_cast<size_t>(j)]);
    IntBlocks qc = r.q;
    const int64_t clipped = ClipSearch(ws, gs, &qc);
    // Each block's choice ignores the other blocks' errors; keep it only if the layer's is lower.
    const double e = clipped ? OutputError(w, k, rows, rows, qc, s, G) : best;
    if (e < best) {
      r.q = std::move(qc);
      r.error = e;
      r.clipped = clipped;
    }
  }
  r.inv_scale.resize(static_cast<size_t>(k));
  for (int64_t c = 0; c < k; ++c) r.inv_scale[static_cast<size_t>(c)] = 1.f / s[static_cast<size_t>(c)];
  const double unit = loudest * loudest;  // the errors in the caller's Gram units
  r.error *= unit;
  r.rtn_error *= unit;
  *out = std::move(r);
  return true;
}

}  // namespace whittle::quant
