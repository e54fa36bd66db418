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
// Blocks computed at run time (a training graph's param; a gradient's transposed blocks) are
// transformed per call and multiplied by the plain sgemm. The blocks' gradient op
// (BlockCirculantMatMulGradWeight) is here too, below the forward kernel.
#include <Eigen/Core>
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/circulant.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/sgemm.h"

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

// Bins whose spectra are real for real blocks: 0, and B/2 when B is even.
bool RealBin(int64_t f, int64_t B) { return f == 0 || 2 * f == B; }

// The spectra of the block vectors (1/B folded in) as one GEMM operand per bin f, stored
// transposed ([nc][kr], ready for a transB product): [P][Q] real for bins 0 and B/2, otherwise
// [2P][2Q] with rows p = [Cr -Ci] and P + p = [Ci Cr] — i.e. B = [[Cr Ci] [-Ci Cr]] (2Q x 2P).
// One batched FFTW r2c over the P*Q blocks, then one pass over them in order that writes every
// bin's matrix in order (a [kr][nc] fill strides by a row of up to megabytes per entry).
std::vector<std::vector<float>> BinMatrices(const CirculantAttrs& a, const float* c) {
  const int64_t B = a.block, P = a.p(), Q = a.q(), H = B / 2 + 1;
  float* r = fftwf_alloc_real(static_cast<size_t>(P * Q * B));
  fftwf_complex* spec = fftwf_alloc_complex(static_cast<size_t>(P * Q * H));
  std::copy(c, c + P * Q * B, r);
  fftwf_execute_dft_r2c(PlansFor(B, P * Q).r2c, r, spec);
  std::vector<std::vector<float>> mt(static_cast<size_t>(H));
  for (int64_t f = 0; f < H; ++f) mt[static_cast<size_t>(f)].resize(static_cast<size_t>(RealBin(f, B) ? P * Q : 4 * P * Q));
  const float inv = 1.f / static_cast<float>(B);
  for (int64_t p = 0; p < P; ++p)
    for (int64_t q = 0; q < Q; ++q) {
      const fftwf_complex* v = spec + (p * Q + q) * H;
      for (int64_t f = 0; f < H; ++f) {
        const float re = v[f][0] * inv, im = v[f][1] * inv;
        float* m = mt[static_cast<size_t>(f)].data();
        if (RealBin(f, B)) {
          m[p * Q + q] = re;
          continue;
        }
        const int64_t kr = 2 * Q;
        m[p * kr + q] = re;
        m[p * kr + Q + q] = -im;
        m[(P + p) * kr + q] = im;
        m[(P + p) * kr + Q + q] = re;
      }
    }
  fftwf_free(spec);
  fftwf_free(r);
  return mt;
}

// The real FFT of every row of x [M, L] cut into `count` blocks of B (zero-padded past L), laid
// out per bin: bin f's slice (M rows, 2*count floats [re | im] apart, count when the bin is
// real) starts at out + f * M * 2 * count.
void RowSpectra(const float* x, int64_t M, int64_t L, int64_t B, int64_t count, int threads, float* out) {
  const FftPlans& plan = PlansFor(B, count);
  const int64_t H = B / 2 + 1;
  ParallelFor(M, threads, [&](int64_t m) {
    thread_local FftwScratch<float> rbuf;
    thread_local FftwScratch<fftwf_complex> cbuf;
    float* r = rbuf.get(static_cast<size_t>(count * B));
    fftwf_complex* c = cbuf.get(static_cast<size_t>(count * H));
    std::copy(x + m * L, x + (m + 1) * L, r);
    std::fill(r + L, r + count * B, 0.f);
    fftwf_execute_dft_r2c(plan.r2c, r, c);
    for (int64_t f = 0; f < H; ++f) {
      const bool real = RealBin(f, B);
      float* row = out + f * M * 2 * count + m * (real ? count : 2 * count);
      for (int64_t q = 0; q < count; ++q) row[q] = c[q * H + f][0];
      if (!real)
        for (int64_t q = 0; q < count; ++q) row[count + q] = c[q * H + f][1];
    }
  });
}

class CirculantKernel : public OpKernel {
 public:
  // blocks null: computed at run time (a training graph's param, or the transposed blocks of a
  // gradient), checked and transformed on every call.
  CirculantKernel(const CirculantAttrs& a, const Tensor* blocks, SimdIsa isa)
      : a_(a), B_(a.block), P_(a.p()), Q_(a.q()), H_(a.block / 2 + 1) {
    inv_ = &PlansFor(B_, P_);
    if (!blocks) return;
    const std::vector<std::vector<float>> mt = BinMatrices(a_, blocks->data<float>());
    for (int64_t f = 0; f < H_; ++f) {
      const bool real = RealBin(f, B_);
      bins_.emplace_back(mt[static_cast<size_t>(f)].data(), true, real ? Q_ : 2 * Q_, real ? P_ : 2 * P_, isa);
    }
  }

  Status Compute(KernelContext& ctx) const override {
    const Tensor& x = *ctx.inputs[0];
    if (x.rank() < 1 || x.dims().back() != a_.k)
      return InvalidArgument("BlockCirculantMatMul: A " + DimsToString(x.dims()) + " must end in in_features " +
                             std::to_string(a_.k));
    const Tensor* bias_t = ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr;
    // Computed blocks (checked per call by the factory's wrapper, kernels/circulant_kernels.cc):
    // their matrices made per call and multiplied unpacked (packing them for one use costs more
    // than the sgemm's own blocking).
    std::vector<std::vector<float>> computed;
    if (bins_.empty()) computed = BinMatrices(a_, ctx.inputs[1]->data<float>());
    const int64_t M = x.numel() / a_.k;
    if (M == 0) return Status::Ok();
    const float* bias = bias_t ? bias_t->data<float>() : nullptr;
    float* Y = ctx.outputs[0]->data<float>();
    // Bin f of the inputs: rows of 2Q floats ([Xr | Xi], Q when the bin is real); of the outputs:
    // rows of 2P. One slice per bin, M rows each.
    thread_local std::vector<float> xs, ys;
    xs.resize(static_cast<size_t>(H_ * M * 2 * Q_));
    ys.resize(static_cast<size_t>(H_ * M * 2 * P_));
    float* X = xs.data();
    float* Yb = ys.data();
    const int64_t B = B_, P = P_, Q = Q_, H = H_, N = a_.n;
    RowSpectra(x.data<float>(), M, a_.k, B, Q, ctx.num_threads, X);
    for (int64_t f = 0; f < H; ++f) {
      const bool real = RealBin(f, B);
      const int64_t kr = real ? Q : 2 * Q, nc = real ? P : 2 * P;
      if (computed.empty()) {
        bins_[static_cast<size_t>(f)].Multiply(M, X + f * M * 2 * Q, kr, Yb + f * M * 2 * P, nc, nullptr, false,
                                               ctx.num_threads);
      } else {
        Sgemm(false, true, M, nc, kr, 1.f, X + f * M * 2 * Q, kr, computed[static_cast<size_t>(f)].data(), kr, 0.f,
              Yb + f * M * 2 * P, nc, ctx.num_threads);
      }
    }
    ParallelFor(M, ctx.num_threads, [&](int64_t m) {
      thread_local FftwScratch<float> rbuf;
      thread_local FftwScratch<fftwf_complex> cbuf;
      float* r = rbuf.get(static_cast<size_t>(P * B));
      fftwf_complex* c = cbuf.get(static_cast<size_t>(P * H));
      for (int64_t f = 0; f < H; ++f) {
        const bool real = RealBin(f, B);
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
  CirculantAttrs a_;
  int64_t B_, P_, Q_, H_;
  const FftPlans* inv_ = nullptr;  // count P
  std::vector<PackedGemmB> bins_;  // constant blocks' operands; empty when computed per call
};

// dblocks = d/dblocks sum(Y * dY) (kernels/reference/circulant.h) through the FFTs: block (p, q)'s
// gradient is the batch sum of the circular cross-correlation of dy_p with x_q, whose spectrum
// is sum_m G_p[f] conj(X_q[f]). For one bin that is a complex product over the rows,
// [Gr Gi]^T (2P x M) times [Xr Xi] (M x 2Q): Re = Gr^T Xr + Gi^T Xi, Im = Gi^T Xr - Gr^T Xi
// (bins 0 and B/2: Gr^T Xr). Then one c2r per block, / B. Per call: r2c of the rows of A and
// dY, one [2P, M] x [M, 2Q] product per bin (Eigen, bins in parallel), P*Q inverse FFTs.
class CirculantGradWeightKernel : public OpKernel {
 public:
  explicit CirculantGradWeightKernel(const CirculantAttrs& a) : a_(a) {}

  Status Compute(KernelContext& ctx) const override {
    const Tensor& dy = *ctx.inputs[0];
    const Tensor& x = *ctx.inputs[1];
    WH_RETURN_IF_ERROR(CheckCirculantGradWeightShapes(a_, dy, x));
    const int64_t B = a_.block, P = a_.p(), Q = a_.q(), H = B / 2 + 1, M = x.numel() / a_.k;
    float* out = ctx.outputs[0]->data<float>();
    if (M == 0) {
      std::fill(out, out + P * Q * B, 0.f);
      return Status::Ok();
    }
    std::vector<float> xs(static_cast<size_t>(H * M * 2 * Q)), gs(static_cast<size_t>(H * M * 2 * P));
    RowSpectra(x.data<float>(), M, a_.k, B, Q, ctx.num_threads, xs.data());
    RowSpectra(dy.data<float>(), M, a_.n, B, P, ctx.num_threads, gs.data());
    using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    static std::once_flag eigen_once;  // Eigen's blocking parameters, before concurrent use
    std::call_once(eigen_once, [] { Eigen::initParallel(); });
    ScopedOmpThreads omp(ctx.num_threads);  // a product outside a parallel region uses at most these
    // spec[(p * Q + q) * H + f]: the blocks' gradient spectra, the layout the c2r plan reads.
    fftwf_complex* spec = static_cast<fftwf_complex*>(fftwf_malloc(sizeof(fftwf_complex) * P * Q * H));
    ParallelFor(H, ctx.num_threads, [&](int64_t f) {
      const bool real = RealBin(f, B);
      const int64_t wp = real ? P : 2 * P, wq = real ? Q : 2 * Q;
      Eigen::Map<const RowMat> G(gs.data() + f * M * 2 * P, M, wp), X(xs.data() + f * M * 2 * Q, M, wq);
      RowMat D(wp, wq);
      D.noalias() = G.transpose() * X;
      for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < Q; ++q) {
          fftwf_complex& s = spec[(p * Q + q) * H + f];
          s[0] = real ? D(p, q) : D(p, q) + D(P + p, Q + q);
          s[1] = real ? 0.f : D(P + p, q) - D(p, Q + q);
        }
    });
    // Into FFTW-allocated memory: the new-array execute needs the planning arrays' alignment.
    float* r = fftwf_alloc_real(static_cast<size_t>(P * Q * B));
    fftwf_execute_dft_c2r(PlansFor(B, P * Q).c2r, spec, r);
    const float inv = 1.f / static_cast<float>(B);
    for (int64_t i = 0; i < P * Q * B; ++i) out[i] = r[i] * inv;
    fftwf_free(r);
    fftwf_free(spec);
    return Status::Ok();
  }

 private:
  CirculantAttrs a_;
};

KernelOr Make(const CirculantAttrs& a, const KernelInit& init) {
  const SimdIsa isa = ActiveSimdIsa();
  if (isa == SimdIsa::kScalar) return KernelOr(nullptr);
  const Tensor* blocks = init.const_inputs.size() > 1 ? init.const_inputs[1] : nullptr;
  return std::unique_ptr<OpKernel>(new CirculantKernel(a, blocks, isa));
}

KernelOr MakeGradWeight(const CirculantAttrs& a, const KernelInit&) {
  return std::unique_ptr<OpKernel>(new CirculantGradWeightKernel(a));
}

}  // namespace
const CirculantFns kCirculantFns{Make, MakeGradWeight};
}  // namespace cpu
}  // namespace whittle
