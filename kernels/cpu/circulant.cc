// CPU kernel of ai.whittle BlockCirculantMatMul with real FFTs (FFTW, single precision). Block
// (p, q) times x_q is a circular convolution, so with X_q = rfft(x_q) (H = B/2 + 1 bins) and
// C_pq = rfft(c_pq), y_p = irfft(sum_q C_pq[f] X_q[f]) / B. For one bin f that sum over q is a
// complex matrix product across all rows of A: [Xr Xi] (M x 2Q) times [[Cr Ci] [-Ci Cr]]
// (2Q x 2P) gives [Yr Yi] — a real GEMM against a constant matrix, packed once at load for the
// packed GEMM (kernels/cpu/packed_gemm.h), with 1/B folded in; bins 0 and B/2 are real (Q x P).
// Per call: r2c of every input block (rows in parallel), one packed GEMM per bin, c2r of every
// output block, + bias. Real multiply-adds per row: P*Q*(4H - 2 or 3) in the bins against P*Q*B^2
// dense. FFTW plans are made once per (B, count) under a lock (the planner is not thread-safe),
// FFTW_ESTIMATE so every process picks the same algorithm, and executed with the new-array
// functions on per-thread buffers from fftwf_malloc (the planning arrays' alignment).
#include <fftw3.h>

#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/reference/circulant.h"

namespace whittle {
namespace cpu {
namespace {

struct FftPlans {
  fftwf_plan r2c = nullptr;  // count real blocks of B (B apart) -> count x H complex (H apart)
  fftwf_plan c2r = nullptr;  // the inverse (unnormalized), destroys its input
};

// Plans live for the process: one pair per (B, count), shared by every kernel and thread.
const FftPlans& PlansFor(int64_t B, int64_t count) {
  static std::mutex mu;
  static std::map<std::pair<int64_t, int64_t>, FftPlans> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find({B, count});
  if (it != cache.end()) return it->second;
  const int n = static_cast<int>(B), h = static_cast<int>(B / 2 + 1), howmany = static_cast<int>(count);
  float* r = fftwf_alloc_real(static_cast<size_t>(B * count));
  fftwf_complex* c = fftwf_alloc_complex(static_cast<size_t>(h * count));
  FftPlans p;
  p.r2c = fftwf_plan_many_dft_r2c(1, &n, howmany, r, nullptr, 1, n, c, nullptr, 1, h, FFTW_ESTIMATE);
  p.c2r = fftwf_plan_many_dft_c2r(1, &n, howmany, c, nullptr, 1, h, r, nullptr, 1, n, FFTW_ESTIMATE);
  fftwf_free(r);
  fftwf_free(c);
  return cache.emplace(std::make_pair(B, count), p).first->second;
}

// A per-thread scratch array with FFTW's alignment, grown on demand.
template <class T>
class FftwScratch {
 public:
  ~FftwScratch() { fftwf_free(p_); }
  T* get(size_t n) {
    if (n > n_) {
      fftwf_free(p_);
      p_ = static_cast<T*>(fftwf_malloc(n * sizeof(T)));
      n_ = n;
    }
    return p_;
  }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

class CirculantKernel : public OpKernel {
 public:
  CirculantKernel(const CirculantAttrs& a, const Tensor& blocks, SimdIsa isa)
      : a_(a), B_(a.block), P_(a.p()), Q_(a.q()), H_(a.block / 2 + 1) {
    fwd_ = &PlansFor(B_, Q_);
    inv_ = &PlansFor(B_, P_);
    // The spectra C_pq[f] = sum_t c[t] e^{-2 pi i f t / B} (FFTW's forward sign), in double.
    const float* c = blocks.data<float>();
    std::vector<double> re(static_cast<size_t>(P_ * Q_ * H_)), im(re.size());
    const double w = 2 * 3.14159265358979323846 / static_cast<double>(B_);
    for (int64_t pq = 0; pq < P_ * Q_; ++pq)
      for (int64_t f = 0; f < H_; ++f) {
        double sr = 0, si = 0;
        for (int64_t t = 0; t < B_; ++t) {
          const double ang = w * static_cast<double>((f * t) % B_);
          sr += c[pq * B_ + t] * std::cos(ang);
          si -= c[pq * B_ + t] * std::sin(ang);
        }
        re[static_cast<size_t>(pq * H_ + f)] = sr / static_cast<double>(B_);
        im[static_cast<size_t>(pq * H_ + f)] = si / static_cast<double>(B_);
      }
    for (int64_t f = 0; f < H_; ++f) {
      const bool real = RealBin(f);
      const int64_t kr = real ? Q_ : 2 * Q_, nc = real ? P_ : 2 * P_;
      std::vector<float> m(static_cast<size_t>(kr * nc));  // [kr, nc] row-major
      for (int64_t p = 0; p < P_; ++p)
        for (int64_t q = 0; q < Q_; ++q) {
          const size_t e = static_cast<size_t>((p * Q_ + q) * H_ + f);
          const float cr = static_cast<float>(re[e]), ci = static_cast<float>(im[e]);
          m[static_cast<size_t>(q * nc + p)] = cr;
          if (real) continue;
          m[static_cast<size_t>(q * nc + P_ + p)] = ci;
          m[static_cast<size_t>((Q_ + q) * nc + p)] = -ci;
          m[static_cast<size_t>((Q_ + q) * nc + P_ + p)] = cr;
        }
      bins_.emplace_back(m.data(), false, kr, nc, isa);
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 1 || x.dims().back() != a_.k)
      return InvalidArgument("BlockCirculantMatMul: A " + DimsToString(x.dims()) + " must end in in_features " +
                             std::to_string(a_.k));
    const int64_t M = x.numel() / a_.k;
    if (M == 0) return Status::Ok();
    const float* A = x.data<float>();
    const float* bias = ctx.inputs.size() > 2 && ctx.inputs[2] ? ctx.inputs[2]->data<float>() : nullptr;
    float* Y = ctx.outputs[0]->data<float>();
    // Bin f of the inputs: rows of 2Q floats ([Xr | Xi], Q when the bin is real); of the outputs:
    // rows of 2P. One slice per bin, M rows each.
    thread_local std::vector<float> xs, ys;
    xs.resize(static_cast<size_t>(H_ * M * 2 * Q_));
    ys.resize(static_cast<size_t>(H_ * M * 2 * P_));
    float* X = xs.data();
    float* Yb = ys.data();
    const int64_t B = B_, P = P_, Q = Q_, H = H_, K = a_.k, N = a_.n;
    ParallelFor(M, ctx.num_threads, [&](int64_t m) {
      thread_local FftwScratch<float> rbuf;
      thread_local FftwScratch<fftwf_complex> cbuf;
      float* r = rbuf.get(static_cast<size_t>(Q * B));
      fftwf_complex* c = cbuf.get(static_cast<size_t>(Q * H));
      std::copy(A + m * K, A + (m + 1) * K, r);
      std::fill(r + K, r + Q * B, 0.f);
      fftwf_execute_dft_r2c(fwd_->r2c, r, c);
      for (int64_t f = 0; f < H; ++f) {
        const bool real = RealBin(f);
        float* row = X + f * M * 2 * Q + m * (real ? Q : 2 * Q);
        for (int64_t q = 0; q < Q; ++q) row[q] = c[q * H + f][0];
        if (!real)
          for (int64_t q = 0; q < Q; ++q) row[Q + q] = c[q * H + f][1];
      }
    });
    for (int64_t f = 0; f < H; ++f) {
      const bool real = RealBin(f);
      bins_[static_cast<size_t>(f)].Multiply(M, X + f * M * 2 * Q, real ? Q : 2 * Q, Yb + f * M * 2 * P,
                                             real ? P : 2 * P, nullptr, false, ctx.num_threads);
    }
    ParallelFor(M, ctx.num_threads, [&](int64_t m) {
      thread_local FftwScratch<float> rbuf;
      thread_local FftwScratch<fftwf_complex> cbuf;
      float* r = rbuf.get(static_cast<size_t>(P * B));
      fftwf_complex* c = cbuf.get(static_cast<size_t>(P * H));
      for (int64_t f = 0; f < H; ++f) {
        const bool real = RealBin(f);
        const float* row = Yb + f * M * 2 * P + m * (real ? P : 2 * P);
        for (int64_t p = 0; p < P; ++p) {
          c[p * H + f][0] = row[p];
          c[p * H + f][1] = real ? 0.f : row[P + p];
        }
      }
      fftwf_execute_dft_c2r(inv_->c2r, c, r);
      float* y = Y + m * N;
      if (bias) {
        for (int64_t n = 0; n < N; ++n) y[n] = r[n] + bias[n];
      } else {
        std::copy(r, r + N, y);
      }
    });
    return Status::Ok();
  }

 private:
  // Bins whose spectra are real for real blocks: 0, and B/2 when B is even.
  bool RealBin(int64_t f) const { return f == 0 || 2 * f == B_; }

  CirculantAttrs a_;
  int64_t B_, P_, Q_, H_;
  const FftPlans* fwd_ = nullptr;  // count Q
  const FftPlans* inv_ = nullptr;  // count P
  std::vector<PackedGemmB> bins_;  // per bin: [Q, P] real, or [2Q, 2P] [[Cr Ci] [-Ci Cr]]
};

KernelOr Make(const CirculantAttrs& a, const KernelInit& init) {
  const SimdIsa isa = ActiveSimdIsa();
  if (isa == SimdIsa::kScalar || init.const_inputs.size() < 2 || !init.const_inputs[1]) return KernelOr(nullptr);
  return std::unique_ptr<OpKernel>(new CirculantKernel(a, *init.const_inputs[1], isa));
}

}  // namespace
const CirculantFns kCirculantFns{Make};
}  // namespace cpu
}  // namespace whittle
