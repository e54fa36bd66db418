// Eigen-typed helpers behind passes/layer_inputs.h, shared by the passes that fit layers to
// calibration data (the SVD pass's whitening, the pruning pass's reconstruction).
#pragma once

#include <Eigen/Dense>

#include <algorithm>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle {

using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// 2-D Conv geometry of a layer.
struct ConvGeo {
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
};

inline ConvGeo ReadConvGeo(const Node& n, const Tensor& w) {
  ConvGeo c;
  c.kh = w.dim(2);
  c.kw = w.dim(3);
  const std::vector<int64_t> s = n.attrs.GetInts("strides"), d = n.attrs.GetInts("dilations"),
                             p = n.attrs.GetInts("pads");
  if (s.size() == 2) c.sh = s[0], c.sw = s[1];
  if (d.size() == 2) c.dh = d[0], c.dw = d[1];
  if (p.size() == 4) c.pt = p[0], c.pl = p[1], c.pb = p[2], c.pr = p[3];
  return c;
}

// Feature rows of a layer's input batch x (Gemm/MatMul: rows of the last dim; Conv with weight w:
// im2col patches at up to per_image output positions of each image, chosen by pick(count) when
// fewer than all, their flat indices in *chosen), each with a trailing 1.
template <class Pick>
RowMat FeatureRows(const Node& node, const Tensor& w, const Tensor& x, int64_t per_image, Pick&& pick,
                   std::vector<int64_t>* chosen) {
  const float* px = x.data<float>();
  if (node.op_type != "Conv") {
    const int64_t k = x.dim(x.rank() - 1), r = k == 0 ? 0 : x.numel() / k;
    RowMat rows = RowMat::Zero(r, k + 1);
    for (int64_t i = 0; i < r; ++i) {
      for (int64_t j = 0; j < k; ++j) rows(i, j) = px[i * k + j];
      rows(i, k) = 1.0;
    }
    return rows;
  }
  const ConvGeo c = ReadConvGeo(node, w);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t oh = (H + c.pt + c.pb - c.dh * (c.kh - 1) - 1) / c.sh + 1;
  const int64_t ow = (W + c.pl + c.pr - c.dw * (c.kw - 1) - 1) / c.sw + 1;
  const int64_t per = std::min(per_image, oh * ow), K = c.kh * c.kw;
  RowMat rows = RowMat::Zero(N * per, C * K + 1);
  chosen->clear();
  for (int64_t img = 0; img < N; ++img)
    for (int64_t s = 0; s < per; ++s) {
      const int64_t pos = per == oh * ow ? s : pick(oh * ow);
      chosen->push_back(img * oh * ow + pos);
      const int64_t y0 = (pos / ow) * c.sh - c.pt, x0 = (pos % ow) * c.sw - c.pl;
      auto row = rows.row(img * per + s);
      for (int64_t ch = 0; ch < C; ++ch)
        for (int64_t i = 0; i < c.kh; ++i)
          for (int64_t j = 0; j < c.kw; ++j) {
            const int64_t yy = y0 + i * c.dh, xx = x0 + j * c.dw;
            if (yy >= 0 && yy < H && xx >= 0 && xx < W) row(ch * K + i * c.kw + j) = px[((img * C + ch) * H + yy) * W + xx];
          }
      row(C * K) = 1.0;
    }
  return rows;
}

}  // namespace whittle
