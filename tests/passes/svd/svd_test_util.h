// Helpers for the SVD pass suites: matrices with a prescribed spectrum (so the tests know the
// singular values without trusting the code under test), running the pass with the
// PassManager's output check, and running graphs on Whittle's runtime.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "tests/passes/pass_test_util.h"
#include "whittle/session.h"

namespace whittle::testing {

// k orthonormal columns of length n (row-major [n, k]) by Gram-Schmidt on Gaussian vectors.
inline std::vector<double> RandomOrthonormal(int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> gauss(0, 1);
  std::vector<double> q(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < k; ++j) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v) x = gauss(rng);
    for (int pass = 0; pass < 2; ++pass)  // twice for numerical orthogonality
      for (int64_t p = 0; p < j; ++p) {
        double d = 0;
        for (int64_t i = 0; i < n; ++i) d += v[static_cast<size_t>(i)] * q[static_cast<size_t>(i * k + p)];
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] -= d * q[static_cast<size_t>(i * k + p)];
      }
    double norm = 0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    for (int64_t i = 0; i < n; ++i) q[static_cast<size_t>(i * k + j)] = v[static_cast<size_t>(i)] / norm;
  }
  return q;
}

// Row-major [rows, cols] float matrix whose singular values are exactly `spectrum` (then zeros).
inline std::vector<float> MatrixWithSpectrum(int64_t rows, int64_t cols, const std::vector<double>& spectrum,
                                             uint32_t seed) {
  const int64_t k = static_cast<int64_t>(spectrum.size());
  const std::vector<double> u = RandomOrthonormal(rows, k, seed), v = RandomOrthonormal(cols, k, seed + 7919);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += u[static_cast<size_t>(i * k + p)] * spectrum[static_cast<size_t>(p)] * v[static_cast<size_t>(j * k + p)];
      w[static_cast<size_t>(i * cols + j)] = static_cast<float>(acc);
    }
  return w;
}

inline std::vector<double> GeometricSpectrum(int64_t n, double first, double decay) {
  std::vector<double> s(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) s[static_cast<size_t>(i)] = first * std::pow(decay, static_cast<double>(i));
  return s;
}

// Runs --svd with `spec` on g and the PassManager's check (Compact + InferShapes + Verify).
inline StatusOr<PassReport> RunSvd(Graph& g, const std::string& spec, const PassContext& ctx = {}) {
  return RunPass(g, "svd", spec, ctx);
}

inline StatusOr<std::vector<Tensor>> RunGraph(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  WH_ASSIGN_OR_RETURN(auto s, Session::FromGraph(g));
  return s->Run(inputs);
}

inline int CountOps(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op_type == op;
  return n;
}

inline const Node* FindNode(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes())
    if (n.name == name) return &n;
  return nullptr;
}

inline const Tensor& InitOf(const Graph& g, const Node& n, int input) {
  const Value& v = g.value(n.inputs[static_cast<size_t>(input)]);
  WH_CHECK(v.initializer.has_value());
  return *v.initializer;
}

inline const LayerReport* FindLayer(const PassReport& r, const std::string& node) {
  for (const LayerReport& l : r.layers)
    if (l.node == node) return &l;
  return nullptr;
}

}  // namespace whittle::testing
