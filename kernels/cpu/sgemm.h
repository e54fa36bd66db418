// Single-precision GEMM used by every fast CPU kernel that multiplies matrices (Conv, Gemm,
// MatMul). Row-major: C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, where op transposes
// when asked; lda/ldb/ldc are row strides of the matrices as stored. beta == 0 never reads C.
// Two backends (Eigen, oneDNN dnnl_sgemm) and an auto policy picked by tests/bench/gemm_bench.cc
// (oneDNN, except single-threaded matrix-vector shapes, where Eigen's GEMV is faster); the
// environment variable WHITTLE_GEMM=eigen|onednn|auto overrides the default (auto); `packed`
// pins Gemm/MatMul with constant weights to packed_gemm.h (Sgemm itself then stays on auto).
// Thread-safe: any number of threads may call it at once; num_threads caps its OpenMP team
// (inside an OpenMP parallel region it runs on the calling thread only).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/fused_activation.h"

namespace whittle {

enum class GemmBackend { kEigen = 0, kOneDnn = 1, kAuto = 2 };
const char* GemmBackendName(GemmBackend b);

// The backend Sgemm uses: WHITTLE_GEMM if set to a known name, else the built-in default.
GemmBackend DefaultGemmBackend();
// The concrete backend kAuto picks for one call.
GemmBackend AutoGemmBackend(int64_t M, int64_t N, int num_threads);

void Sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, int num_threads);

// Same contract with an explicit backend (benchmarks and tests).
void SgemmWith(GemmBackend backend, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
               int num_threads);

// GEMM epilogue on one output row of n values: adds `bias` (a scalar, or n values when
// bias_vec is set) and applies the fused activation in the same pass for the common cases, so
// the row is read and written once while it is still in cache.
inline void BiasActivationRow(float* row, int64_t n, float bias, const float* bias_vec, const FusedActivation& act) {
  if (act.kind == FusedActivation::kRelu) {
    if (bias_vec) {
      for (int64_t i = 0; i < n; ++i) row[i] = std::max(row[i] + bias_vec[i], 0.f);
    } else {
      for (int64_t i = 0; i < n; ++i) row[i] = std::max(row[i] + bias, 0.f);
    }
    return;
  }
  if (bias_vec) {
    for (int64_t i = 0; i < n; ++i) row[i] += bias_vec[i];
  } else if (bias != 0.f) {
    for (int64_t i = 0; i < n; ++i) row[i] += bias;
  }
  act.Apply(row, n);
}

}  // namespace whittle
