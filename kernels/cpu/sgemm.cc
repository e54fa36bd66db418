#include "kernels/cpu/sgemm.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <oneapi/dnnl/dnnl.h>

#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/parallel.h"
#include "lib/ir/status.h"

namespace whittle {
namespace {

// Chosen by tests/bench/gemm_bench.cc on the 2-core AVX2 (Zen 3) build machine: oneDNN is
// 1.3-3x faster on the batched MLP, im2col and square shapes, Eigen's GEMV 1.5-2.5x faster on
// single-threaded M=1 / N=1 shapes, hence the per-call policy.
constexpr GemmBackend kBuiltInDefault = GemmBackend::kAuto;

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutMap = Eigen::Map<RowMat, Eigen::Unaligned, Eigen::OuterStride<>>;

// Eigen's static blocking/cache parameters must be initialised before concurrent use.
void InitEigenOnce() {
  static std::once_flag once;
  std::call_once(once, [] { Eigen::initParallel(); });
}

template <class OpA, class OpB>
void EigenProduct(const OpA& a, const OpB& b, float alpha, float beta, MutMap& c) {
  if (beta == 0.f) {
    c.noalias() = alpha * a * b;
  } else {
    if (beta != 1.f) c *= beta;
    c.noalias() += alpha * a * b;
  }
}

void EigenSgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  InitEigenOnce();
  ConstMap a(A, trans_a ? K : M, trans_a ? M : K, Eigen::OuterStride<>(lda));
  ConstMap b(B, trans_b ? N : K, trans_b ? K : N, Eigen::OuterStride<>(ldb));
  MutMap c(C, M, N, Eigen::OuterStride<>(ldc));
  if (!trans_a && !trans_b) EigenProduct(a, b, alpha, beta, c);
  else if (!trans_a && trans_b) EigenProduct(a, b.transpose(), alpha, beta, c);
  else if (trans_a && !trans_b) EigenProduct(a.transpose(), b, alpha, beta, c);
  else EigenProduct(a.transpose(), b.transpose(), alpha, beta, c);
}

void OneDnnSgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  (void)cpu::CpuFeatures();  // WHITTLE_ISA's cap on oneDNN first
  const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb,
                                      beta, C, ldc);
  // Arguments are validated by the callers; a failure here is a broken invariant.
  WH_CHECK(st == dnnl_success);
}

// C = beta * C without reading C when beta == 0 (C may hold garbage, even NaN).
void ScaleC(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* row = C + i * ldc;
    if (beta == 0.f) std::memset(row, 0, static_cast<size_t>(N) * sizeof(float));
    else if (beta != 1.f) for (int64_t j = 0; j < N; ++j) row[j] *= beta;
  }
}

GemmBackend ReadDefault() {
  const char* env = std::getenv("WHITTLE_GEMM");
  if (env) {
    if (std::strcmp(env, "eigen") == 0) return GemmBackend::kEigen;
    if (std::strcmp(env, "onednn") == 0) return GemmBackend::kOneDnn;
    if (std::strcmp(env, "auto") == 0 || std::strcmp(env, "packed") == 0) return GemmBackend::kAuto;
    std::fprintf(stderr, "whittle: ignoring WHITTLE_GEMM=%s (expected eigen, onednn, packed or auto)\n", env);
  }
  return kBuiltInDefault;
}

}  // namespace

const char* GemmBackendName(GemmBackend b) {
  return b == GemmBackend::kEigen ? "eigen" : b == GemmBackend::kOneDnn ? "onednn" : "auto";
}

GemmBackend AutoGemmBackend(int64_t M, int64_t N, int num_threads) {
  return (M == 1 || N == 1) && num_threads <= 1 ? GemmBackend::kEigen : GemmBackend::kOneDnn;
}

GemmBackend DefaultGemmBackend() {
  static const GemmBackend b = ReadDefault();
  return b;
}

void SgemmWith(GemmBackend backend, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               int num_threads) {
  WH_CHECK(M >= 0 && N >= 0 && K >= 0);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == 0.f) {
    ScaleC(M, N, beta, C, ldc);
    return;
  }
  WH_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N);
  if (backend == GemmBackend::kAuto) backend = AutoGemmBackend(M, N, num_threads);
  ScopedOmpThreads threads(num_threads);
  if (backend == GemmBackend::kEigen) EigenSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else OneDnnSgemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void Sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int num_threads) {
  SgemmWith(DefaultGemmBackend(), trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, num_threads);
}

}  // namespace whittle
