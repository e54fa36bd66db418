// Dense linear algebra the SVD pass needs, with no Eigen in the interface: a row-major float
// matrix, its (full or randomized, top-k) SVD, and the balanced split of a truncated SVD into
// two factors A = U_r·sqrt(S_r), B = sqrt(S_r)·V_r^T so that W ≈ A·B. The numerics live in
// linalg_eigen.h; results are deterministic for a given seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace whittle {

// Row-major float matrix.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.f) {}
  float& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return data[static_cast<size_t>(r * cols + c)]; }
};

// W ≈ u · diag(s) · vt with k = s.size() singular triplets, s descending.
struct SvdResult {
  Matrix u;                // [m, k]
  std::vector<float> s;    // [k]
  Matrix vt;               // [k, n]
  double total_energy = 0; // ||W||_F^2 = sum of all squared singular values (exact, even when k < min(m, n))
  bool complete = false;   // s holds the whole spectrum (k == min(m, n), computed exactly)
  int64_t rank() const { return static_cast<int64_t>(s.size()); }
};

double FrobeniusSq(const Matrix& w);
// Exact thin SVD (k = min(m, n)).
SvdResult FullSvd(const Matrix& w);
// Top-k by a randomized range finder (oversampled, with power iterations).
SvdResult RandomizedSvd(const Matrix& w, int64_t k, int64_t oversample, int power_iters, uint64_t seed);

// Factors of the rank-r truncation (r <= svd.rank()): a [m, r], b [r, n], singular values
// split as sqrt on both sides so the two factors have comparable scales.
void SplitFactors(const SvdResult& svd, int64_t r, Matrix* a, Matrix* b);
Matrix MatMul(const Matrix& a, const Matrix& b);
// Keeps the leading r triplets (all of them when r >= svd.rank()); total_energy and complete stay
// those of the SVD as computed.
void TruncateSvd(SvdResult* svd, int64_t r);

// Smallest r with sum_{i<r} s_i^2 >= energy * total (r = s.size() when the known values fall
// short, and at least 1).
int64_t RankForEnergy(const SvdResult& svd, double energy);
// Whether the known values already reach the energy fraction.
bool ReachesEnergy(const SvdResult& svd, double energy);

}  // namespace whittle
