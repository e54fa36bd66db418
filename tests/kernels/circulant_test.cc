// ai.whittle BlockCirculantMatMul: the CPU kernel (FFTW r2c, packed GEMM per frequency bin, c2r)
// against the O(B^2) reference on awkward shapes, the reference against the expanded dense weight
// (the convention W[pB+i, qB+j] = c[(i-j) mod B]), the least-squares fit, and hostile inputs
// refused at load with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "lib/ir/circulant_format.h"
#include "lib/ops/op_def.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::GraphBuilder;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;

AttributeMap Attrs(int64_t block, int64_t n, int64_t k) {
  AttributeMap a;
  a.Set("block", Attribute::Int(block));
  a.Set("out_features", Attribute::Int(n));
  a.Set("in_features", Attribute::Int(k));
  return a;
}

TEST(BlockCirculantMatMul, CpuMatchesReference) {
  RegisterAllOps();
  struct Case {
    int64_t m, n, k, block;
    bool bias;
  };
  const Case cases[] = {{1, 1, 1, 1, false},    {64, 7, 5, 1, true},    {1, 4, 6, 2, true},   {64, 9, 11, 2, false},
                        {1, 10, 7, 3, true},    {64, 12, 9, 3, true},   {5, 3, 2, 3, false},  {1, 16, 16, 8, false},
                        {64, 37, 61, 8, true},  {3, 100, 45, 8, true},  {1, 48, 33, 16, true}, {64, 70, 129, 16, false},
                        {64, 10, 128, 8, true}, {2, 256, 784, 8, true}, {64, 40, 40, 5, true}};
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE("m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) + " block " +
                   std::to_string(c.block) + " threads " + std::to_string(threads));
      const CirculantAttrs a{c.block, c.n, c.k};
      std::vector<Tensor> in{RandomFloat({c.m, c.k}, seed++), RandomFloat({a.p(), a.q(), c.block}, seed++)};
      if (c.bias) in.push_back(RandomFloat({c.n}, seed++));
      const Node node = MakeNode("BlockCirculantMatMul", static_cast<int>(in.size()), 1, Attrs(c.block, c.n, c.k),
                                 kWhittleDomain);
      // Constant blocks: the FFT kernel; computed blocks: the reference with per-call checks.
      for (bool consts : {true, false}) ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, threads, consts);
    }
}

TEST(BlockCirculantMatMul, ThreeDimensionalInput) {
  RegisterAllOps();
  std::vector<Tensor> in{RandomFloat({2, 3, 20}, 1), RandomFloat({2, 5, 4}, 2), RandomFloat({6}, 3)};
  const Node node = MakeNode("BlockCirculantMatMul", 3, 1, Attrs(4, 6, 20), kWhittleDomain);
  ExpectBackendsMatchReference(node, in, 1e-4f, 1e-4f, 17, 2, true);
}

// The reference kernel computes A W^T + bias with W the expansion of the block vectors, and the
// expansion follows the documented convention.
TEST(BlockCirculantMatMul, ReferenceIsTheExpandedDenseProduct) {
  RegisterAllOps();
  const CirculantAttrs a{3, 5, 7};  // P = 2, Q = 3
  const Tensor blocks = RandomFloat({2, 3, 3}, 5);
  std::vector<float> w(35);
  ExpandCirculant(a, blocks.data<float>(), w.data());
  // W[1*3 + 1, 2*3 + 0] = blocks[1, 2, (1 - 0) mod 3]; W[0, 2] = blocks[0, 0, (0 - 2) mod 3].
  EXPECT_EQ(w[4 * 7 + 6], blocks.data<float>()[(1 * 3 + 2) * 3 + 1]);
  EXPECT_EQ(w[0 * 7 + 2], blocks.data<float>()[(0 * 3 + 0) * 3 + 1]);
  const Tensor x = RandomFloat({4, 7}, 6), bias = RandomFloat({5}, 7);
  const Node node = MakeNode("BlockCirculantMatMul", 3, 1, Attrs(3, 5, 7), kWhittleDomain);
  const std::vector<Tensor> y = ExpectBackendsMatchReference(node, {x, blocks, bias}, 1e-4f, 1e-4f, 17, 1, true);
  ASSERT_EQ(y.size(), 1u);
  for (int64_t m = 0; m < 4; ++m)
    for (int64_t n = 0; n < 5; ++n) {
      double s = bias.data<float>()[n];
      for (int64_t k = 0; k < 7; ++k) s += static_cast<double>(x.data<float>()[m * 7 + k]) * w[static_cast<size_t>(n * 7 + k)];
      EXPECT_NEAR(y[0].data<float>()[m * 5 + n], s, 1e-5) << m << "," << n;
    }
}

// BlockCirculantMatMulGradWeight: the product is linear in the blocks, so entry i of d/dblocks
// sum(Y * dY) is sum(Y(e_i) * dY) with Y(e_i) the reference forward of the i-th unit vector — an
// exact check of the reference that shares nothing with it; then the CPU kernel (FFTs, one
// product per bin) against the reference on awkward shapes, odd and even blocks, rank 3.
TEST(BlockCirculantMatMulGradWeight, ReferenceIsTheDerivativeOfTheForward) {
  RegisterAllOps();
  // block 3, out 5, in 7: P = 2, Q = 3, padded rows and columns
  const Tensor x = RandomFloat({4, 7}, 21), dy = RandomFloat({4, 5}, 22);
  const Node grad = MakeNode("BlockCirculantMatMulGradWeight", 2, 1, Attrs(3, 5, 7), kWhittleDomain);
  const std::vector<Tensor> g = ExpectBackendsMatchReference(grad, {dy, x}, 1e-4f, 1e-4f, 17, 1, false);
  ASSERT_EQ(g.size(), 1u);
  ASSERT_EQ(g[0].dims(), (Dims{2, 3, 3}));
  const Node fwd = MakeNode("BlockCirculantMatMul", 2, 1, Attrs(3, 5, 7), kWhittleDomain);
  for (int64_t i = 0; i < 18; ++i) {
    Tensor e(DType::kFloat32, {2, 3, 3});
    std::fill(e.data<float>(), e.data<float>() + 18, 0.f);
    e.data<float>()[i] = 1.f;
    const std::vector<Tensor> y = ExpectBackendsMatchReference(fwd, {x, e}, 1e-4f, 1e-4f, 17, 1, false);
    double s = 0;
    for (int64_t j = 0; j < 20; ++j) s += static_cast<double>(y[0].data<float>()[j]) * dy.data<float>()[j];
    EXPECT_NEAR(g[0].data<float>()[i], s, 1e-5) << "entry " << i;
  }
}

TEST(BlockCirculantMatMulGradWeight, CpuMatchesReference) {
  RegisterAllOps();
  struct Case {
    Dims lead;
    int64_t n, k, block;
  };
  const Case cases[] = {{{1}, 1, 1, 1},     {{64}, 7, 5, 1},   {{1}, 4, 6, 2},    {{9}, 9, 11, 2},
                        {{5}, 10, 7, 3},    {{2, 3}, 12, 9, 3}, {{64}, 37, 61, 8}, {{3}, 100, 45, 8},
                        {{1}, 48, 33, 16},  {{64}, 70, 129, 16}, {{17}, 40, 40, 5}, {{0}, 6, 6, 3}};
  uint32_t seed = 40;
  for (const Case& c : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE("lead " + DimsToString(c.lead) + " n " + std::to_string(c.n) + " k " + std::to_string(c.k) +
                   " block " + std::to_string(c.block) + " threads " + std::to_string(threads));
      Dims xd = c.lead, yd = c.lead;
      xd.push_back(c.k);
      yd.push_back(c.n);
      const Node node = MakeNode("BlockCirculantMatMulGradWeight", 2, 1, Attrs(c.block, c.n, c.k), kWhittleDomain);
      ExpectBackendsMatchReference(node, {RandomFloat(yd, seed++), RandomFloat(xd, seed++)}, 1e-4f, 1e-4f, 17, threads);
    }
}

TEST(BlockCirculantMatMulGradWeight, MismatchedShapesAreRefused) {
  RegisterAllOps();
  Graph g = GraphBuilder(17)
                .Input("dy", DType::kFloat32, {4, 6})
                .Input("x", DType::kFloat32, {4, 7})
                .Op("BlockCirculantMatMulGradWeight", {"dy", "x"}, {"g"}, Attrs(3, 5, 7))
                .Output("g")
                .Build();
  g.nodes()[0].domain = kWhittleDomain;
  g.opset_imports[kWhittleDomain] = 1;
  const Status s = InferShapes(g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("must end in 5"), std::string::npos) << s.message();
}

TEST(CirculantFit, ExactOnBlockCirculantAndLeastSquaresOtherwise) {
  for (const CirculantAttrs a : {CirculantAttrs{4, 8, 12}, CirculantAttrs{3, 7, 5}, CirculantAttrs{8, 10, 20},
                                 CirculantAttrs{1, 3, 4}}) {
    SCOPED_TRACE("block " + std::to_string(a.block) + " " + std::to_string(a.n) + "x" + std::to_string(a.k));
    const size_t nb = static_cast<size_t>(a.p() * a.q() * a.block), nw = static_cast<size_t>(a.n * a.k);
    // Already block-circulant (from vectors every entry of which a real weight sees): exact.
    const Tensor c0 = RandomFloat({static_cast<int64_t>(nb)}, 11);
    std::vector<float> w(nw), c(nb), w2(nw);
    ExpandCirculant(a, c0.data<float>(), w.data());
    FitCirculant(a, w.data(), c.data());
    ExpandCirculant(a, c.data(), w2.data());
    for (size_t e = 0; e < nw; ++e) ASSERT_FLOAT_EQ(w2[e], w[e]) << e;
    // A random matrix: the residual is orthogonal to every basis matrix of the (masked)
    // block-circulant subspace, i.e. sums to zero over each wrapped diagonal of each block...
    const Tensor r = RandomFloat({a.n, a.k}, 12);
    FitCirculant(a, r.data<float>(), c.data());
    ExpandCirculant(a, c.data(), w2.data());
    const int64_t B = a.block, Q = a.q();
    std::vector<double> dot(nb, 0.0);
    double fit_err = 0;
    for (int64_t i = 0; i < a.n; ++i)
      for (int64_t j = 0; j < a.k; ++j) {
        const double res = r.data<float>()[i * a.k + j] - w2[static_cast<size_t>(i * a.k + j)];
        dot[static_cast<size_t>(((i / B) * Q + j / B) * B + (i % B - j % B + B) % B)] += res;
        fit_err += res * res;
      }
    for (size_t e = 0; e < nb; ++e) EXPECT_NEAR(dot[e], 0.0, 1e-5) << "diagonal " << e;
    // ...so no perturbation of one vector entry does better.
    for (size_t e = 0; e < nb; e += 3)
      for (float d : {-1e-2f, 1e-2f}) {
        std::vector<float> cp = c, wp(nw);
        cp[e] += d;
        ExpandCirculant(a, cp.data(), wp.data());
        double err = 0;
        for (size_t k = 0; k < nw; ++k) err += (r.data<float>()[k] - wp[k]) * static_cast<double>(r.data<float>()[k] - wp[k]);
        EXPECT_GE(err, fit_err - 1e-9) << "entry " << e;
      }
    if (a.block == 1) {  // B = 1: every weight its own block, the fit is the matrix itself
      for (size_t e = 0; e < nw; ++e) EXPECT_EQ(w2[e], r.data<float>()[e]);
    }
  }
}

// A model with one BlockCirculantMatMul whose blocks/bias are the given tensors.
StatusOr<std::unique_ptr<Session>> LoadOne(int64_t block, int64_t n, int64_t k, Tensor blocks, Tensor bias,
                                           Backend backend) {
  return ::whittle::testing::LoadWhittleOp("BlockCirculantMatMul", k, {blocks, bias}, Attrs(block, n, k), backend);
}

TEST(BlockCirculantMatMul, HostileTensorsAreRefusedAtLoad) {
  RegisterAllOps();
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    SCOPED_TRACE(BackendName(be));
    auto expect_error = [&](StatusOr<std::unique_ptr<Session>> s, const std::string& what) {
      ASSERT_FALSE(s.ok()) << "loaded: " << what;
      EXPECT_NE(s.status().message().find(what), std::string::npos) << s.status().message();
    };
    // 10 x 7 at block 4: [3, 2, 4].
    ASSERT_TRUE(LoadOne(4, 10, 7, RandomFloat({3, 2, 4}, 1), RandomFloat({10}, 2), be).ok());
    expect_error(LoadOne(4, 10, 7, RandomFloat({3, 2, 3}, 1), Tensor(), be), "block vectors");
    expect_error(LoadOne(4, 10, 7, RandomFloat({2, 2, 4}, 1), Tensor(), be), "block vectors");
    expect_error(LoadOne(4, 10, 7, RandomFloat({3, 8}, 1), Tensor(), be), "block vectors");
    expect_error(LoadOne(4, 10, 7, RandomFloat({24}, 1), Tensor(), be), "block vectors");
    expect_error(LoadOne(0, 10, 7, RandomFloat({3, 2, 4}, 1), Tensor(), be), "block must be >= 1");
    expect_error(LoadOne(-4, 10, 7, RandomFloat({3, 2, 4}, 1), Tensor(), be), "block must be >= 1");
    expect_error(LoadOne(4, 0, 7, RandomFloat({3, 2, 4}, 1), Tensor(), be), "out_features");
    expect_error(LoadOne(4, 10, 7, RandomFloat({3, 2, 4}, 1), RandomFloat({9}, 2), be), "bias");
    expect_error(LoadOne(4, 10, 7, RandomFloat({3, 2, 4}, 1), RandomFloat({2, 5}, 2), be), "bias");
    expect_error(LoadOne(int64_t{1} << 40, 10, 7, RandomFloat({1, 1, 4}, 1), Tensor(), be), "too large");
  }
  // The kernels' own check (what the factory runs at load, whatever shape inference saw).
  const CirculantAttrs a{4, 10, 7};
  const Tensor ok = RandomFloat({3, 2, 4}, 1), bias = RandomFloat({10}, 2);
  EXPECT_TRUE(CheckCirculantTensors(a, ok, &bias).ok());
  EXPECT_FALSE(CheckCirculantTensors(a, RandomFloat({3, 2, 5}, 1), nullptr).ok());
  EXPECT_FALSE(CheckCirculantTensors(a, RandomFloat({3, 3, 4}, 1), nullptr).ok());
  EXPECT_FALSE(CheckCirculantTensors(a, RandomFloat({4, 2, 4}, 1), nullptr).ok());
  EXPECT_FALSE(CheckCirculantTensors(a, Tensor(DType::kInt32, {3, 2, 4}), nullptr).ok());
  const Tensor short_bias = RandomFloat({9}, 2), long_bias = RandomFloat({11}, 2);
  EXPECT_FALSE(CheckCirculantTensors(a, ok, &short_bias).ok());
  EXPECT_FALSE(CheckCirculantTensors(a, ok, &long_bias).ok());
  EXPECT_FALSE(CheckCirculantTensors(CirculantAttrs{0, 10, 7}, ok, nullptr).ok());
  EXPECT_FALSE(CheckCirculantTensors(CirculantAttrs{4, 10, 0}, ok, nullptr).ok());
}

}  // namespace
}  // namespace whittle
