// The SVD numerics of the low-rank pass, written against Eigen and header-only so the
// benchmark (which links Eigen but not whittle_passes) can time exactly what the pass runs.
// Full: BDCSVD on the whole matrix. Randomized: Halko, Martinsson & Tropp (2011) — a Gaussian
// range finder with oversampling and power iterations (re-orthonormalized each half-step), then
// the SVD of the small projected matrix. Both return singular values in descending order.
// Library code includes passes/svd/linalg.h (no Eigen in its API) instead.
#pragma once

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>
#include <cstdint>
#include <random>

namespace whittle::svd_eigen {

using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic>;   // column-major
using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic>;

// A thin SVD: a ≈ u * diag(s) * v^T with k columns in u and v.
struct EigenSvd {
  MatrixF u;              // [m, k]
  Eigen::VectorXf s;      // [k], descending
  MatrixF v;              // [n, k]
};

// Orthonormal basis of the columns of y (thin Q of a Householder QR).
inline MatrixF Orthonormalize(const MatrixF& y) {
  Eigen::HouseholderQR<MatrixF> qr(y);
  return qr.householderQ() * MatrixF::Identity(y.rows(), std::min(y.rows(), y.cols()));
}

// Full thin SVD. Computed in double: the pass reports the whole spectrum and energy ranks
// depend on the small singular values, which float bidiagonalization blurs.
inline EigenSvd FullSvd(const MatrixF& a) {
  MatrixD ad = a.cast<double>();
  Eigen::BDCSVD<MatrixD> svd(ad, Eigen::ComputeThinU | Eigen::ComputeThinV);
  EigenSvd r;
  r.u = svd.matrixU().cast<float>();
  r.s = svd.singularValues().cast<float>();
  r.v = svd.matrixV().cast<float>();
  return r;
}

// Top-k SVD by a randomized range finder: l = k + oversample random directions, `power_iters`
// rounds of (A A^T) to sharpen a slowly decaying spectrum, then the exact SVD of Q^T A (l x n).
// The large products run in float (Eigen's GEMM, OpenMP-parallel); the small SVD in double.
inline EigenSvd RandomizedSvd(const MatrixF& a, int64_t k, int64_t oversample, int power_iters, uint64_t seed) {
  const int64_t m = a.rows(), n = a.cols();
  const int64_t full = std::min(m, n);
  k = std::max<int64_t>(1, std::min(k, full));
  const int64_t l = std::min(full, k + std::max<int64_t>(0, oversample));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> gauss(0.f, 1.f);
  MatrixF omega(n, l);
  for (int64_t j = 0; j < l; ++j)
    for (int64_t i = 0; i < n; ++i) omega(i, j) = gauss(rng);
  MatrixF q = Orthonormalize(a * omega);
  for (int it = 0; it < power_iters; ++it) {
    MatrixF z = Orthonormalize(a.transpose() * q);
    q = Orthonormalize(a * z);
  }
  MatrixD b = (q.transpose() * a).cast<double>();  // [l, n]
  Eigen::BDCSVD<MatrixD> svd(b, Eigen::ComputeThinU | Eigen::ComputeThinV);
  EigenSvd r;
  r.u = q * svd.matrixU().leftCols(k).cast<float>();
  r.s = svd.singularValues().head(k).cast<float>();
  r.v = svd.matrixV().leftCols(k).cast<float>();
  return r;
}

}  // namespace whittle::svd_eigen
