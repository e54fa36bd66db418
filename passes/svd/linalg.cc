#include "passes/svd/linalg.h"

#include <cmath>

#include "lib/ir/status.h"
#include "passes/svd/linalg_eigen.h"

namespace whittle {
namespace {

using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

svd_eigen::MatrixF ToEigen(const Matrix& w) {
  return Eigen::Map<const RowMajorF>(w.data.data(), w.rows, w.cols);
}

Matrix FromEigen(const svd_eigen::MatrixF& m) {
  Matrix out(m.rows(), m.cols());
  Eigen::Map<RowMajorF>(out.data.data(), m.rows(), m.cols()) = m;
  return out;
}

SvdResult FromEigenSvd(const svd_eigen::EigenSvd& e, double total, bool complete) {
  SvdResult r;
  r.u = FromEigen(e.u);
  r.vt = FromEigen(e.v.transpose());
  r.s.assign(e.s.data(), e.s.data() + e.s.size());
  r.total_energy = total;
  r.complete = complete;
  return r;
}

}  // namespace

double FrobeniusSq(const Matrix& w) {
  double t = 0;
  for (float x : w.data) t += static_cast<double>(x) * x;
  return t;
}

SvdResult FullSvd(const Matrix& w) {
  WH_CHECK(w.rows > 0 && w.cols > 0);
  return FromEigenSvd(svd_eigen::FullSvd(ToEigen(w)), FrobeniusSq(w), true);
}

SvdResult RandomizedSvd(const Matrix& w, int64_t k, int64_t oversample, int power_iters, uint64_t seed) {
  WH_CHECK(w.rows > 0 && w.cols > 0 && k > 0);
  return FromEigenSvd(svd_eigen::RandomizedSvd(ToEigen(w), k, oversample, power_iters, seed), FrobeniusSq(w), false);
}

void SplitFactors(const SvdResult& svd, int64_t r, Matrix* a, Matrix* b) {
  WH_CHECK(r >= 1 && r <= svd.rank());
  const int64_t m = svd.u.rows, n = svd.vt.cols;
  *a = Matrix(m, r);
  *b = Matrix(r, n);
  for (int64_t j = 0; j < r; ++j) {
    const float root = std::sqrt(std::max(0.f, svd.s[static_cast<size_t>(j)]));
    for (int64_t i = 0; i < m; ++i) a->at(i, j) = svd.u.at(i, j) * root;
    for (int64_t i = 0; i < n; ++i) b->at(j, i) = svd.vt.at(j, i) * root;
  }
}

void TruncateSvd(SvdResult* svd, int64_t r) {
  if (r >= svd->rank()) return;
  r = std::max<int64_t>(r, 0);
  const int64_t m = svd->u.rows, n = svd->vt.cols;
  Matrix u(m, r);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < r; ++j) u.at(i, j) = svd->u.at(i, j);
  svd->u = std::move(u);
  svd->vt.data.resize(static_cast<size_t>(r * n));  // row-major: the leading rows stay in place
  svd->vt.data.shrink_to_fit();
  svd->vt.rows = r;
  svd->s.resize(static_cast<size_t>(r));
}

Matrix MatMul(const Matrix& a, const Matrix& b) {
  WH_CHECK(a.cols == b.rows);
  return FromEigen(ToEigen(a) * ToEigen(b));
}

int64_t RankForEnergy(const SvdResult& svd, double energy) {
  const double target = energy * svd.total_energy;
  double acc = 0;
  for (size_t i = 0; i < svd.s.size(); ++i) {
    acc += static_cast<double>(svd.s[i]) * svd.s[i];
    // Relative slack so energy=1 stops at the last nonzero value despite rounding.
    if (acc >= target * (1 - 1e-6)) return static_cast<int64_t>(i + 1);
  }
  return std::max<int64_t>(1, svd.rank());
}

bool ReachesEnergy(const SvdResult& svd, double energy) {
  double acc = 0;
  for (float s : svd.s) acc += static_cast<double>(s) * s;
  return acc >= energy * svd.total_energy * (1 - 1e-6);
}

}  // namespace whittle
