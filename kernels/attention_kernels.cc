// Kernel of ai.whittle Attention (lib/ops/attention.cc): per (batch, head), S = scale * Q K^T,
// a softmax per row, then Y = P V, with Q, K and V read in place from the packed QKV rows (row
// stride 3*H*d) and Y written in place (row stride H*d). The per-head matrices are small (a ViT's
// tokens x 64), so each (batch, head) pair is one task. The reference backend (and a CPU without
// AVX2) runs plain loops; the CPU backend runs the two products on packed_gemm.h's register tiles.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/attention_shape.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/vmath.h"
#include "kernels/kernel.h"

namespace whittle {
namespace {

// One (batch, head)'s view of the optional additive mask: element (i, j) at p[i * si + j * sj]
// (strides 0 along broadcast dims); p null when there is none.
struct MaskView {
  const float* p = nullptr;
  int64_t si = 0, sj = 0;
};

// row[0..n) = softmax(row + mask row i), in place.
inline void SoftmaxRow(float* row, int64_t n, const MaskView& mask, int64_t i) {
  if (mask.p)
    for (int64_t j = 0; j < n; ++j) row[j] += mask.p[i * mask.si + j * mask.sj];
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
  const float inv = 1.f / cpu::VExpShiftSum(row, row, n, mx);
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

// y[0..len) += a * x[0..len): 16 at a time in fixed-length steps (straight-line vector code for
// the short rows attention has, no per-call loop set-up), then the tail.
inline void Axpy(float* __restrict y, const float* __restrict x, float a, int64_t len) {
  int64_t u = 0;
  for (; u + 16 <= len; u += 16)
    for (int w = 0; w < 16; ++w) y[u + w] += a * x[u + w];
  for (; u < len; ++u) y[u] += a * x[u];
}

// s: n*n scores, kt: d*n (K transposed). The loops run the reduction index outermost so that
// every inner loop is a contiguous multiply-add into a row that stays in L1 (no dependent
// chain through one accumulator, no horizontal sums).
void AttentionHead(const float* q, const float* k, const float* v, int64_t n, int64_t d, int64_t ld_in, float scale,
                   const MaskView& mask, float* y, int64_t ld_out, float* s, float* kt) {
  for (int64_t j = 0; j < n; ++j)
    for (int64_t t = 0; t < d; ++t) kt[t * n + j] = k[j * ld_in + t] * scale;
  std::fill(s, s + n * n, 0.f);
  for (int64_t t = 0; t < d; ++t) {
    const float* kr = kt + t * n;
    for (int64_t i = 0; i < n; ++i) {
      Axpy(s + i * n, kr, q[i * ld_in + t], n);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    SoftmaxRow(s + i * n, n, mask, i);
    std::fill(y + i * ld_out, y + i * ld_out + d, 0.f);
  }
  for (int64_t j = 0; j < n; ++j) {
    const float* vj = v + j * ld_in;
    for (int64_t i = 0; i < n; ++i) {
      Axpy(y + i * ld_out, vj, s[i * n + j], d);
    }
  }
}

// The same on packed_gemm.h's register tiles (AVX2 / AVX-512): K^T (scaled) and V are packed into
// column panels per head, then S = Q K^T and Y = P V run as small GEMMs reading Q in place and
// writing Y in place. buf holds the panels (ceil(n/nr)*d*nr + ceil(d/nr)*n*nr floats).
void AttentionHeadTiled(cpu::SimdIsa isa, const float* q, const float* k, const float* v, int64_t n, int64_t d,
                        int64_t ld_in, float scale, const MaskView& mask, float* y, int64_t ld_out, float* s,
                        float* buf) {
  const bool wide = isa == cpu::SimdIsa::kAvx512;
  const int64_t nr = wide ? cpu::packed_gemm_avx512::kNr : cpu::packed_gemm_avx2::kNr;
  const int64_t max_rows = wide ? cpu::packed_gemm_avx512::kMaxRows : cpu::packed_gemm_avx2::kMaxRows;
  const auto tile = wide ? &cpu::packed_gemm_avx512::Tile : &cpu::packed_gemm_avx2::Tile;
  const int64_t kp_n = (n + nr - 1) / nr, vp_n = (d + nr - 1) / nr;
  float* kp = buf;                 // [kp_n][d][nr]: K^T * scale
  float* vp = buf + kp_n * d * nr;  // [vp_n][n][nr]: V
  for (int64_t p = 0; p < kp_n; ++p)
    for (int64_t t = 0; t < d; ++t)
      for (int64_t jj = 0; jj < nr; ++jj) {
        const int64_t j = p * nr + jj;
        kp[(p * d + t) * nr + jj] = j < n ? k[j * ld_in + t] * scale : 0.f;
      }
  for (int64_t p = 0; p < vp_n; ++p)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t tt = 0; tt < nr; ++tt) {
        const int64_t t = p * nr + tt;
        vp[(p * n + j) * nr + tt] = t < d ? v[j * ld_in + t] : 0.f;
      }
  for (int64_t r0 = 0; r0 < n; r0 += max_rows) {
    const int rows = static_cast<int>(std::min(max_rows, n - r0));
    for (int64_t p = 0; p < kp_n; ++p)
      tile(rows, 1, d, q + r0 * ld_in, ld_in, kp + p * d * nr, d * nr, s + r0 * n + p * nr, n,
           std::min(nr, n - p * nr), nullptr, false);
  }
  for (int64_t i = 0; i < n; ++i) SoftmaxRow(s + i * n, n, mask, i);
  for (int64_t r0 = 0; r0 < n; r0 += max_rows) {
    const int rows = static_cast<int>(std::min(max_rows, n - r0));
    for (int64_t p = 0; p < vp_n; ++p)
      tile(rows, 1, n, s + r0 * n, n, vp + p * n * nr, n * nr, y + r0 * ld_out + p * nr, ld_out,
           std::min(nr, d - p * nr), nullptr, false);
  }
}

// plain: the reference backend's plain loops; else the register tiles where the CPU has them.
StatusOr<std::unique_ptr<OpKernel>> MakeAttention(const KernelInit& init, bool plain) {
  if (init.input_dtypes.empty() || init.input_dtypes[0] != DType::kFloat32)
    return InvalidArgument(init.node_name + ": Attention takes float32");
  const int64_t h = init.attrs.GetInt("heads", 0), d = init.attrs.GetInt("head_dim", 0);
  const float scale = init.attrs.GetFloat("scale", 1.f);
  if (h < 1 || d < 1) return InvalidArgument(init.node_name + ": heads and head_dim must be >= 1");
  return WrapFnKernel([h, d, scale, plain](KernelContext& ctx) -> Status {
    const Tensor& x = *ctx.inputs[0];
    Tensor& y = *ctx.outputs[0];
    WH_RETURN_IF_ERROR(CheckAttentionQkv(x, y, h, d));
    const int64_t b = x.dim(0), n = x.dim(1), ld_in = 3 * h * d, ld_out = h * d;
    // The mask's strides over [B, H, N, N], right-aligned, 0 where it broadcasts.
    const Tensor* mask_t = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    int64_t ms[4] = {0, 0, 0, 0};
    if (mask_t) WH_RETURN_IF_ERROR(AttentionMaskStrides(*mask_t, b, h, n, ms));
    float s_all = scale;
    if (ctx.inputs.size() > 1 && ctx.inputs[1]) {
      const Tensor& st = *ctx.inputs[1];
      WH_RETURN_IF_ERROR(CheckAttentionScale(st));
      s_all *= st.data<float>()[0];
    }
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    const cpu::SimdIsa isa = plain ? cpu::SimdIsa::kScalar : cpu::ActiveSimdIsa();
    const int threads = b * h * n * n * d >= (1 << 16) ? ctx.num_threads : 1;
    ParallelFor(b * h, threads, [&](int64_t t) {
      thread_local std::vector<float> s, kt;
      const int64_t panels = (n + 31) / 32 * d * 32 + (d + 31) / 32 * n * 32;  // enough for either panel width
      if (s.size() < static_cast<size_t>(n * n)) s.resize(static_cast<size_t>(n * n));
      if (kt.size() < static_cast<size_t>(std::max(n * d, panels))) kt.resize(static_cast<size_t>(std::max(n * d, panels)));
      const int64_t bi = t / h, hi = t % h;
      const float* base = xp + bi * n * ld_in + hi * d;
      float* yh = yp + bi * n * ld_out + hi * d;
      MaskView mask;
      if (mask_t) mask = {mask_t->data<float>() + bi * ms[0] + hi * ms[1], ms[2], ms[3]};
      if (isa == cpu::SimdIsa::kScalar)
        AttentionHead(base, base + h * d, base + 2 * h * d, n, d, ld_in, s_all, mask, yh, ld_out, s.data(),
                      kt.data());
      else
        AttentionHeadTiled(isa, base, base + h * d, base + 2 * h * d, n, d, ld_in, s_all, mask, yh, ld_out,
                           s.data(), kt.data());
    });
    return Status::Ok();
  });
}

}  // namespace

void RegisterAttentionKernels(KernelRegistry& r) {
  r.Add(DeclareKernel(Backend::kReference, kWhittleDomain, "Attention", {DType::kFloat32},
                      [](const KernelInit& init) { return MakeAttention(init, true); }));
  r.Add(DeclareKernel(Backend::kCpu, kWhittleDomain, "Attention", {DType::kFloat32},
                      [](const KernelInit& init) { return MakeAttention(init, false); }));
}

}  // namespace whittle
