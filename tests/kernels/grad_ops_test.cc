// The ai.whittle gradient ops ConvGradInput, ConvGradWeight and MaxPoolGrad against central finite
// differences of sum(forward(X, W) * dY), the forward being the reference Conv / MaxPool kernel,
// over strides, asymmetric pads, dilations, groups, depthwise, 1x1, 1-D, 3-D and auto_pad, on
// every built backend; MaxPool's tie and padding rules by hand; the CPU MaxPoolGrad's 1-D/2-D direct
// loop bit for bit against its generic N-D path and the reference; the CPU kernels (threaded, Eigen
// products, AVX2 rows) against the plain reference ones on larger random inputs at several thread
// counts; ReluGrad by hand and against its definition;
// AveragePoolGrad (count_include_pad, ceil_mode, auto_pad) and GatherGrad (repeated and negative
// indices, any axis) against finite differences of AveragePool / Gather; dtype, shape and
// attribute errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/reference/grad.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;

constexpr const char* kDomain = "ai.whittle";
constexpr int kOpset = 1;

AttributeMap Attrs(std::vector<std::pair<std::string, Attribute>> kv) {
  AttributeMap m;
  for (auto& [k, v] : kv) m.Set(k, v);
  return m;
}

Tensor RunOne(const Node& node, const std::vector<Tensor>& inputs) {
  auto r = RunNode(node, 17, inputs, Backend::kReference);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? (*r)[0] : Tensor();
}

// sum(forward(inputs) * dy) accumulated in double.
double Objective(const Node& forward, const std::vector<Tensor>& inputs, const Tensor& dy) {
  const Tensor y = RunOne(forward, inputs);
  if (!y.defined() || y.numel() != dy.numel()) return 0.0;
  double s = 0.0;
  for (int64_t i = 0; i < y.numel(); ++i)
    s += static_cast<double>(y.data<float>()[i]) * static_cast<double>(dy.data<float>()[i]);
  return s;
}

// Central differences of Objective with respect to every element of inputs[which].
Tensor FiniteDifference(const Node& forward, std::vector<Tensor> inputs, size_t which, const Tensor& dy, float eps) {
  Tensor& t = inputs[which];
  t = t.Clone();
  Tensor grad(DType::kFloat32, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.data<float>()[i];
    t.data<float>()[i] = v + eps;
    const double up = Objective(forward, inputs, dy);
    t.data<float>()[i] = v - eps;
    const double down = Objective(forward, inputs, dy);
    t.data<float>()[i] = v;
    grad.data<float>()[i] = static_cast<float>((up - down) / (2.0 * static_cast<double>(eps)));
  }
  return grad;
}

void ExpectClose(const Tensor& got, const Tensor& want, float tol, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  float worst = 0.f;
  int64_t at = -1;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.data<float>()[i], w = want.data<float>()[i];
    const float err = std::fabs(g - w) / (1.f + std::fabs(w));
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  EXPECT_LE(worst, tol) << what << ": element " << at << " is " << got.data<float>()[at] << ", finite differences "
                        << want.data<float>()[at];
}

struct ConvCase {
  std::string name;
  Dims x, w;
  std::vector<std::pair<std::string, Attribute>> attrs;  // besides kernel_shape (taken from W)
};

std::vector<ConvCase> ConvCases() {
  using A = Attribute;
  return {
      {"stride2_asymmetric_pads", {2, 3, 6, 5}, {4, 3, 3, 3},
       {{"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 0, 2, 1})}}},
      {"dilation2", {1, 2, 7, 6}, {3, 2, 3, 2}, {{"dilations", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"group2", {2, 4, 5, 5}, {6, 2, 3, 3}, {{"group", A::Int(2)}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"depthwise", {2, 3, 5, 6}, {3, 1, 3, 3},
       {{"group", A::Int(3)}, {"strides", A::Ints({2, 1})}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"depthwise_multiplier2", {1, 2, 5, 5}, {4, 1, 3, 3}, {{"group", A::Int(2)}, {"pads", A::Ints({0, 1, 1, 0})}}},
      {"pointwise_1x1", {2, 3, 4, 4}, {5, 3, 1, 1}, {}},
      {"pointwise_1x1_group2", {3, 4, 3, 5}, {6, 2, 1, 1}, {{"group", A::Int(2)}}},
      {"1x1_stride2_not_pointwise", {2, 3, 5, 4}, {4, 3, 1, 1}, {{"strides", A::Ints({2, 2})}}},
      {"1x1_pads_not_pointwise", {1, 2, 3, 4}, {3, 2, 1, 1}, {{"pads", A::Ints({1, 0, 0, 1})}}},
      {"1d", {3, 3, 9}, {4, 3, 3}, {{"strides", A::Ints({2})}, {"pads", A::Ints({1, 2})}}},
      {"3d", {1, 2, 4, 5, 4}, {3, 2, 2, 3, 2},
       {{"strides", A::Ints({1, 2, 1})}, {"pads", A::Ints({0, 1, 1, 1, 0, 0})}, {"dilations", A::Ints({2, 1, 1})}}},
      {"same_upper_stride2", {1, 2, 5, 6}, {2, 2, 3, 3},
       {{"auto_pad", A::String("SAME_UPPER")}, {"strides", A::Ints({2, 2})}}},
  };
}

AttributeMap ConvAttrs(const ConvCase& c) {
  AttributeMap a = Attrs(c.attrs);
  a.Set("kernel_shape", Attribute::Ints(std::vector<int64_t>(c.w.begin() + 2, c.w.end())));
  return a;
}

// Conv is linear in X and in W, so the central difference is exact for any step: a large one keeps
// the forward's float rounding out of the comparison.
constexpr float kConvStep = 0.5f;
constexpr float kConvTol = 1e-4f;

TEST(ConvGradInput, MatchesFiniteDifferencesOnEveryBackend) {
  uint32_t seed = 1;
  for (const ConvCase& c : ConvCases()) {
    const AttributeMap attrs = ConvAttrs(c);
    const Node conv = MakeNode("Conv", 2, 1, attrs);
    const Tensor x = RandomFloat(c.x, seed++), w = RandomFloat(c.w, seed++);
    const Tensor y = RunOne(conv, {x, w});
    const Tensor dy = RandomFloat(y.dims(), seed++);
    const Tensor want = FiniteDifference(conv, {x, w}, 0, dy, kConvStep);
    const Node grad = MakeNode("ConvGradInput", 3, 1, attrs, kDomain);
    // X's values must not matter: the kernel reads only its dims.
    const Tensor x_noise = RandomFloat(c.x, seed++, -100.f, 100.f);
    const std::vector<Tensor> got = ExpectBackendsMatchReference(grad, {dy, w, x_noise}, 1e-5f, 1e-5f, kOpset);
    ASSERT_EQ(got.size(), 1u) << c.name;
    ExpectClose(got[0], want, kConvTol, c.name);
  }
}

TEST(ConvGradWeight, MatchesFiniteDifferencesOnEveryBackend) {
  uint32_t seed = 100;
  for (const ConvCase& c : ConvCases()) {
    const AttributeMap attrs = ConvAttrs(c);
    const Node conv = MakeNode("Conv", 2, 1, attrs);
    const Tensor x = RandomFloat(c.x, seed++), w = RandomFloat(c.w, seed++);
    const Tensor y = RunOne(conv, {x, w});
    const Tensor dy = RandomFloat(y.dims(), seed++);
    const Tensor want = FiniteDifference(conv, {x, w}, 1, dy, kConvStep);
    const Node grad = MakeNode("ConvGradWeight", 2, 1, attrs, kDomain);
    const std::vector<Tensor> got = ExpectBackendsMatchReference(grad, {x, dy}, 1e-5f, 1e-5f, kOpset);
    ASSERT_EQ(got.size(), 1u) << c.name;
    ExpectClose(got[0], want, kConvTol, c.name);
  }
}

TEST(ConvGrad, CpuThreadCountDoesNotChangeTheResult) {
  // More images than threads and fewer: the per-chunk partial sums of dW, the image split of dX;
  // 3x3 windows (im2col) and 1x1 ones (X is the column matrix).
  for (const ConvCase& c : std::vector<ConvCase>{
           {"batch5", {5, 4, 6, 6}, {4, 2, 3, 3},
            {{"group", Attribute::Int(2)}, {"pads", Attribute::Ints({1, 1, 1, 1})}}},
           {"batch5_pointwise", {5, 4, 6, 6}, {4, 2, 1, 1}, {{"group", Attribute::Int(2)}}}}) {
    const AttributeMap attrs = ConvAttrs(c);
    const Tensor x = RandomFloat(c.x, 7), w = RandomFloat(c.w, 8), dy = RandomFloat({5, 4, 6, 6}, 9);
    const Node gi = MakeNode("ConvGradInput", 3, 1, attrs, kDomain);
    const Node gw = MakeNode("ConvGradWeight", 2, 1, attrs, kDomain);
    auto dx1 = RunNode(gi, kOpset, {dy, w, x}, Backend::kCpu, 1);
    auto dw1 = RunNode(gw, kOpset, {x, dy}, Backend::kCpu, 1);
    ASSERT_TRUE(dx1.ok() && dw1.ok()) << c.name;
    for (int threads : {2, 3, 8}) {
      auto dx = RunNode(gi, kOpset, {dy, w, x}, Backend::kCpu, threads);
      auto dw = RunNode(gw, kOpset, {x, dy}, Backend::kCpu, threads);
      ASSERT_TRUE(dx.ok() && dw.ok()) << c.name << " " << threads;
      EXPECT_TRUE(::whittle::testing::TensorsClose((*dx)[0], (*dx1)[0])) << c.name << " " << threads;
      EXPECT_TRUE(::whittle::testing::TensorsClose((*dw)[0], (*dw1)[0], 1e-5f, 1e-5f)) << c.name << " " << threads;
    }
  }
}

// Distinct multiples of 1/8 in a random order: no ties, and steps of 1/64 neither reorder a window
// nor round (every value, sum and product is exact).
Tensor DistinctValues(const Dims& dims, uint32_t seed) {
  Tensor t(DType::kFloat32, dims);
  std::vector<int> order(static_cast<size_t>(t.numel()));
  std::iota(order.begin(), order.end(), -static_cast<int>(order.size() / 2));
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(order[static_cast<size_t>(i)]) / 8.f;
  return t;
}

struct PoolCase {
  std::string name;
  Dims x;
  std::vector<std::pair<std::string, Attribute>> attrs;
};

TEST(MaxPoolGrad, MatchesFiniteDifferencesOnEveryBackend) {
  using A = Attribute;
  const std::vector<PoolCase> cases = {
      {"3x3_stride2_overlapping", {2, 3, 7, 6},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"dilation_ceil_asymmetric_pads", {1, 2, 6, 7},
       {{"kernel_shape", A::Ints({2, 3})}, {"strides", A::Ints({1, 2})}, {"dilations", A::Ints({2, 1})},
        {"ceil_mode", A::Int(1)}, {"pads", A::Ints({0, 1, 1, 0})}}},
      {"1d_ceil", {2, 2, 9},
       {{"kernel_shape", A::Ints({3})}, {"strides", A::Ints({2})}, {"pads", A::Ints({1, 1})},
        {"ceil_mode", A::Int(1)}}},
      {"3d", {1, 2, 4, 5, 4},
       {{"kernel_shape", A::Ints({2, 2, 3})}, {"strides", A::Ints({2, 1, 2})}, {"pads", A::Ints({1, 0, 1, 0, 1, 1})}}},
      {"same_lower_stride2", {1, 1, 5, 6},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"auto_pad", A::String("SAME_LOWER")}}},
  };
  uint32_t seed = 200;
  for (const PoolCase& c : cases) {
    const AttributeMap attrs = Attrs(c.attrs);
    const Node pool = MakeNode("MaxPool", 1, 1, attrs);
    const Tensor x = DistinctValues(c.x, seed++);
    const Tensor y = RunOne(pool, {x});
    const Tensor dy = RandomFloat(y.dims(), seed++);
    const Tensor want = FiniteDifference(pool, {x}, 0, dy, 1.f / 64.f);
    const Node grad = MakeNode("MaxPoolGrad", 2, 1, attrs, kDomain);
    const std::vector<Tensor> got = ExpectBackendsMatchReference(grad, {x, dy}, 1e-6f, 1e-6f, kOpset);
    ASSERT_EQ(got.size(), 1u) << c.name;
    ExpectClose(got[0], want, 1e-5f, c.name);
  }
}

TEST(MaxPoolGrad, FirstMaximumWinsAndOverlapsAccumulate) {
  // 2x2 windows, stride 1, over
  //   1 3 3
  //   3 2 0
  //   1 3 1
  // Window (0,0) ties 3 at (0,1) and (1,0): the first in row-major order, (0,1), gets dY 1; window
  // (0,1) ties at (0,1) and (0,2) and adds its 2 to (0,1) as well; (1,0) ties at (1,0) and (2,1):
  // (1,0) gets 4; (1,1) has its maximum at (2,1): 8.
  const Tensor x = Tensor::FromVector<float>({1, 1, 3, 3}, {1, 3, 3, 3, 2, 0, 1, 3, 1});
  const Tensor dy = Tensor::FromVector<float>({1, 1, 2, 2}, {1, 2, 4, 8});
  const Node grad = MakeNode("MaxPoolGrad", 2, 1, Attrs({{"kernel_shape", Attribute::Ints({2, 2})}}), kDomain);
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(grad, kOpset, {x, dy}, b, 2);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Tensor& dx = (*r)[0];
    EXPECT_EQ(std::vector<float>(dx.data<float>(), dx.data<float>() + dx.numel()),
              (std::vector<float>{0, 3, 0, 4, 0, 0, 0, 8, 0}))
        << BackendName(b);
  }
}

TEST(MaxPoolGrad, PaddingNeverWins) {
  // All of X is negative and every 2x2 window (pads 1) reaches into the padding: each dY element
  // still goes to a position of X. Window (1,1) covers all of X: its maximum -3 is at (0,1).
  const Tensor x = Tensor::FromVector<float>({1, 1, 2, 2}, {-5, -3, -4, -6});
  const Tensor dy = Tensor::FromVector<float>({1, 1, 3, 3}, {1, 2, 4, 8, 16, 32, 64, 128, 256});
  const AttributeMap attrs =
      Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  const Node grad = MakeNode("MaxPoolGrad", 2, 1, attrs, kDomain);
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(grad, kOpset, {x, dy}, b);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Tensor& dx = (*r)[0];
    EXPECT_EQ(std::vector<float>(dx.data<float>(), dx.data<float>() + dx.numel()),
              (std::vector<float>{1, 2 + 4 + 16 + 32, 8 + 64 + 128, 256}))
        << BackendName(b);
  }
}

// The same pooling as a rank-higher one: `extra` leading spatial dims of size 1, with kernel 1,
// stride 1, dilation 1 and no padding there. On the CPU, 1-D and 2-D windows take MaxPoolGrad's
// direct loop, 3-D ones the generic N-D tap loop, so a lifted case runs the generic path on the
// same numbers.
Dims Lifted(Dims d, int extra) {
  d.insert(d.begin() + 2, static_cast<size_t>(extra), 1);
  return d;
}
PoolCase Lifted(const PoolCase& c, int extra) {
  PoolCase l{c.name + "_lifted", Lifted(c.x, extra), {}};
  auto prepend = [&](std::vector<int64_t> v, int64_t fill) {
    v.insert(v.begin(), static_cast<size_t>(extra), fill);
    return v;
  };
  for (const auto& [k, v] : c.attrs) {
    if (k == "kernel_shape" || k == "strides" || k == "dilations") {
      l.attrs.push_back({k, Attribute::Ints(prepend(v.ints, 1))});
    } else if (k == "pads") {
      const size_t half = v.ints.size() / 2;
      std::vector<int64_t> begin(v.ints.begin(), v.ints.begin() + static_cast<std::ptrdiff_t>(half));
      std::vector<int64_t> end(v.ints.begin() + static_cast<std::ptrdiff_t>(half), v.ints.end());
      begin = prepend(begin, 0);
      end = prepend(end, 0);
      begin.insert(begin.end(), end.begin(), end.end());
      l.attrs.push_back({k, Attribute::Ints(begin)});
    } else {
      l.attrs.push_back({k, v});
    }
  }
  return l;
}

// Values from {-2, ..., 2} (many ties), a few NaNs and -infinities (a NaN first in a window stays
// its maximum; later ones never replace it).
Tensor TiedValues(const Dims& dims, uint32_t seed) {
  Tensor t(DType::kFloat32, dims);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> v(-2, 2), special(0, 40);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int s = special(rng);
    t.data<float>()[i] = s == 0 ? std::nanf("") : s == 1 ? -INFINITY : static_cast<float>(v(rng));
  }
  return t;
}

TEST(MaxPoolGrad, CpuDirectLoopIsBitIdenticalToTheGenericPathAndTheReference) {
  using A = Attribute;
  const std::vector<PoolCase> cases = {
      {"2x2_stride2", {3, 4, 8, 8}, {{"kernel_shape", A::Ints({2, 2})}, {"strides", A::Ints({2, 2})}}},
      {"2x2_stride2_odd_ceil", {2, 3, 7, 9},
       {{"kernel_shape", A::Ints({2, 2})}, {"strides", A::Ints({2, 2})}, {"ceil_mode", A::Int(1)}}},
      {"3x3_stride1_pad1_overlapping", {2, 3, 6, 7},
       {{"kernel_shape", A::Ints({3, 3})}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"3x3_stride2_pad1", {2, 2, 9, 8},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"dilation_ceil_asymmetric_pads", {2, 2, 9, 11},
       {{"kernel_shape", A::Ints({2, 3})}, {"strides", A::Ints({1, 2})}, {"dilations", A::Ints({2, 3})},
        {"ceil_mode", A::Int(1)}, {"pads", A::Ints({0, 2, 1, 0})}}},
      {"stride3_kernel4_ceil_pads", {1, 3, 10, 13},
       {{"kernel_shape", A::Ints({4, 3})}, {"strides", A::Ints({3, 3})}, {"ceil_mode", A::Int(1)},
        {"pads", A::Ints({2, 1, 3, 2})}}},
      {"2x2_stride2_wide", {2, 3, 6, 38}, {{"kernel_shape", A::Ints({2, 2})}, {"strides", A::Ints({2, 2})}}},
      {"2x2_stride2_wide_pads_ceil", {1, 2, 7, 35},
       {{"kernel_shape", A::Ints({2, 2})}, {"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 0, 1})},
        {"ceil_mode", A::Int(1)}}},
      {"2x2_stride2_same_upper", {1, 2, 5, 33},
       {{"kernel_shape", A::Ints({2, 2})}, {"strides", A::Ints({2, 2})}, {"auto_pad", A::String("SAME_UPPER")}}},
      {"2x2_stride1_overlapping", {1, 2, 5, 20}, {{"kernel_shape", A::Ints({2, 2})}}},
      {"1x1_stride2", {2, 2, 5, 6}, {{"kernel_shape", A::Ints({1, 1})}, {"strides", A::Ints({2, 2})}}},
      {"window_wider_than_x", {1, 2, 3, 2}, {{"kernel_shape", A::Ints({3, 4})}, {"pads", A::Ints({1, 2, 1, 2})}}},
      {"same_upper_stride2", {2, 2, 7, 6},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"auto_pad", A::String("SAME_UPPER")}}},
      {"same_lower_dilation2", {1, 2, 6, 7},
       {{"kernel_shape", A::Ints({2, 3})}, {"dilations", A::Ints({2, 2})}, {"auto_pad", A::String("SAME_LOWER")}}},
      {"1d_dilation_ceil", {2, 3, 17},
       {{"kernel_shape", A::Ints({3})}, {"strides", A::Ints({2})}, {"dilations", A::Ints({2})},
        {"pads", A::Ints({2, 1})}, {"ceil_mode", A::Int(1)}}},
  };
  uint32_t seed = 300;
  for (const PoolCase& c : cases) {
    const int extra = 3 - static_cast<int>(c.x.size() - 2);
    const PoolCase l = Lifted(c, extra);
    const Node grad = MakeNode("MaxPoolGrad", 2, 1, Attrs(c.attrs), kDomain);
    const Node lifted = MakeNode("MaxPoolGrad", 2, 1, Attrs(l.attrs), kDomain);
    const Tensor x = TiedValues(c.x, seed++);
    const Tensor y = RunOne(MakeNode("MaxPool", 1, 1, Attrs(c.attrs)), {x});
    ASSERT_TRUE(y.defined()) << c.name;
    // dY with -0 (the direct loops must give +0 as the adds into zeros do) and NaN.
    Tensor dy = RandomFloat(y.dims(), seed++);
    for (int64_t i = 0; i < dy.numel(); i += 7) dy.data<float>()[i] = -0.f;
    for (int64_t i = 3; i < dy.numel(); i += 13) dy.data<float>()[i] = std::nanf("");
    auto reference = RunNode(grad, kOpset, {x, dy}, Backend::kReference);
    ASSERT_TRUE(reference.ok()) << c.name << ": " << reference.status().message();
    for (int threads : {1, 3}) {
      auto direct = RunNode(grad, kOpset, {x, dy}, Backend::kCpu, threads);
      auto generic =
          RunNode(lifted, kOpset, {x.Reshaped(l.x), dy.Reshaped(Lifted(y.dims(), extra))}, Backend::kCpu, threads);
      ASSERT_TRUE(direct.ok()) << c.name << ": " << direct.status().message();
      ASSERT_TRUE(generic.ok()) << c.name << ": " << generic.status().message();
      EXPECT_TRUE((*direct)[0].BitwiseEquals((*generic)[0].Reshaped(c.x))) << c.name << " threads " << threads;
      EXPECT_TRUE((*direct)[0].BitwiseEquals((*reference)[0])) << c.name << " threads " << threads;
    }
  }
}

// The CPU kernel's output against the reference's (one thread) at 1, 3 and 8 threads: bit for bit
// where both add the same floats in the same order, else within tol (relative to 1 + |want|).
void ExpectCpuMatchesReference(const Node& node, const std::vector<Tensor>& inputs, bool bitwise, float tol,
                               const std::string& what) {
  auto want = RunNode(node, kOpset, inputs, Backend::kReference, 1);
  ASSERT_TRUE(want.ok()) << what << ": " << want.status().message();
  for (int threads : {1, 3, 8}) {
    auto got = RunNode(node, kOpset, inputs, Backend::kCpu, threads);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().message();
    if (bitwise)
      EXPECT_TRUE((*got)[0].BitwiseEquals((*want)[0])) << what << " threads " << threads;
    else
      ExpectClose((*got)[0], (*want)[0], tol, what + " threads " + std::to_string(threads));
  }
}

TEST(GradOps, CpuMatchesTheReferenceOnLargerRandomInputs) {
  using A = Attribute;
  // The Conv grads: Eigen products over im2col columns (or X itself) against the reference's
  // products added one by one in double; more images than threads and fewer.
  const std::vector<ConvCase> convs = {
      {"3x3_pad1_group2_batch5", {5, 4, 12, 10}, {6, 2, 3, 3},
       {{"group", A::Int(2)}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"5x5_stride2_dilation", {2, 3, 17, 15}, {8, 3, 3, 2},
       {{"strides", A::Ints({2, 2})}, {"dilations", A::Ints({2, 1})}, {"pads", A::Ints({2, 0, 1, 1})}}},
      {"pointwise_batch9", {9, 8, 6, 7}, {5, 8, 1, 1}, {}},
      {"depthwise", {3, 6, 11, 9}, {6, 1, 3, 3}, {{"group", A::Int(6)}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"1d", {4, 3, 40}, {5, 3, 5}, {{"strides", A::Ints({3})}, {"pads", A::Ints({2, 1})}}},
      {"3d", {2, 2, 5, 6, 5}, {3, 2, 2, 3, 2}, {{"pads", A::Ints({1, 0, 1, 0, 1, 1})}}},
  };
  uint32_t seed = 500;
  for (const ConvCase& c : convs) {
    const AttributeMap attrs = ConvAttrs(c);
    const Tensor x = RandomFloat(c.x, seed++), w = RandomFloat(c.w, seed++);
    const Tensor y = RunOne(MakeNode("Conv", 2, 1, attrs), {x, w});
    ASSERT_TRUE(y.defined()) << c.name;
    const Tensor dy = RandomFloat(y.dims(), seed++);
    ExpectCpuMatchesReference(MakeNode("ConvGradInput", 3, 1, attrs, kDomain), {dy, w, x}, false, 1e-5f,
                              "ConvGradInput " + c.name);
    ExpectCpuMatchesReference(MakeNode("ConvGradWeight", 2, 1, attrs, kDomain), {x, dy}, false, 1e-5f,
                              "ConvGradWeight " + c.name);
  }
  // The pools: the CPU's direct and AVX2 loops, planes over threads, add the reference's floats in
  // its order (every output position of a plane in row-major order): bit for bit.
  const std::vector<PoolCase> pools = {
      {"2x2_stride2_wide", {4, 8, 16, 34}, {{"kernel_shape", A::Ints({2, 2})}, {"strides", A::Ints({2, 2})}}},
      {"3x3_stride2_pad1", {3, 5, 15, 14},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"1d_ceil", {3, 4, 31},
       {{"kernel_shape", A::Ints({3})}, {"strides", A::Ints({2})}, {"ceil_mode", A::Int(1)}}},
      {"3d", {2, 3, 6, 7, 5},
       {{"kernel_shape", A::Ints({2, 3, 2})}, {"strides", A::Ints({2, 1, 2})}, {"pads", A::Ints({1, 1, 0, 0, 1, 1})},
        {"count_include_pad", A::Int(1)}}},
  };
  for (const PoolCase& c : pools) {
    const AttributeMap attrs = Attrs(c.attrs);
    const Tensor x = TiedValues(c.x, seed++);
    for (const char* op : {"MaxPool", "AveragePool"}) {
      AttributeMap fwd = attrs;
      if (std::string(op) == "MaxPool") fwd.Erase("count_include_pad");
      const Tensor y = RunOne(MakeNode(op, 1, 1, fwd), {x});
      ASSERT_TRUE(y.defined()) << op << " " << c.name;
      const Tensor dy = RandomFloat(y.dims(), seed++);
      ExpectCpuMatchesReference(MakeNode(std::string(op) + "Grad", 2, 1, fwd, kDomain), {x, dy}, true, 0.f,
                                std::string(op) + "Grad " + c.name);
    }
  }
  // GatherGrad (repeated indices: the adds into one row in index order) and ReluGrad over 64K.
  const Tensor table = RandomFloat({6, 40, 9}, seed++);
  const Tensor idx = Tensor::FromVector<int64_t>({2, 5}, {3, 39, -1, 0, 3, 3, 7, 12, 39, 20});
  const Tensor gdy = RandomFloat({6, 2, 5, 9}, seed++);
  ExpectCpuMatchesReference(MakeNode("GatherGrad", 3, 1, Attrs({{"axis", A::Int(1)}}), kDomain), {table, idx, gdy},
                            true, 0.f, "GatherGrad");
  const Tensor ry = RandomFloat({5, 128, 130}, seed++), rdy = RandomFloat({5, 128, 130}, seed++);
  ExpectCpuMatchesReference(MakeNode("ReluGrad", 2, 1, {}, kDomain), {ry, rdy}, true, 0.f, "ReluGrad");
}

Tensor Float64(const Tensor& t) {
  Tensor d(DType::kFloat64, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) d.data<double>()[i] = static_cast<double>(t.data<float>()[i]);
  return d;
}

TEST(GradOps, RejectNonFloat32NamingTheNode) {
  const AttributeMap conv_attrs = Attrs({{"kernel_shape", Attribute::Ints({3, 3})}});
  const Tensor x = RandomFloat({1, 2, 5, 5}, 1), w = RandomFloat({3, 2, 3, 3}, 2), dy = RandomFloat({1, 3, 3, 3}, 3);
  const Tensor pdy = RandomFloat({1, 2, 3, 3}, 4);
  struct Bad {
    Node node;
    std::vector<Tensor> inputs;
  };
  std::vector<Bad> bad = {
      {MakeNode("ConvGradInput", 3, 1, conv_attrs, kDomain), {Float64(dy), w, x}},
      {MakeNode("ConvGradInput", 3, 1, conv_attrs, kDomain), {dy, w, Float64(x)}},
      {MakeNode("ConvGradWeight", 2, 1, conv_attrs, kDomain), {Float64(x), Float64(dy)}},
      {MakeNode("MaxPoolGrad", 2, 1, conv_attrs, kDomain), {x, Float64(pdy)}},
      {MakeNode("ReluGrad", 2, 1, {}, kDomain), {Float64(pdy), pdy}},
      {MakeNode("ReluGrad", 2, 1, {}, kDomain), {pdy, Float64(pdy)}},
  };
  for (Bad& b : bad) {
    b.node.name = "grad_node_7";
    for (Backend be : ::whittle::testing::TestedBackends()) {
      auto r = RunNode(b.node, kOpset, b.inputs, be);
      ASSERT_FALSE(r.ok()) << b.node.op_type;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
      EXPECT_NE(r.status().message().find("grad_node_7"), std::string::npos) << r.status().message();
      EXPECT_NE(r.status().message().find("float32"), std::string::npos) << r.status().message();
    }
    // Shape inference (the load-time path) says the same.
    const OpDef* def = OpRegistry::Global().Find(kDomain, b.node.op_type);
    ASSERT_NE(def, nullptr);
    std::vector<const Tensor*> in;
    for (const Tensor& t : b.inputs) in.push_back(&t);
    std::vector<DType> odt;
    std::vector<Dims> odims;
    const Status s = InferConcrete(*def, b.node, kOpset, in, &odt, &odims);
    ASSERT_FALSE(s.ok()) << b.node.op_type;
    EXPECT_NE(s.message().find("grad_node_7"), std::string::npos) << s.message();
  }
}

TEST(GradOps, ConvGradWeightRequiresKernelShape) {
  RegisterAllOps();
  Node n = MakeNode("ConvGradWeight", 2, 1, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}), kDomain);
  n.name = "dw_node";
  const Status s = ValidateNode(n, kOpset);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kernel_shape"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("dw_node"), std::string::npos) << s.message();
  // With it, the node validates.
  n.attrs.Set("kernel_shape", Attribute::Ints({3, 3}));
  EXPECT_TRUE(ValidateNode(n, kOpset).ok());
}

TEST(GradOps, RejectDyOfTheWrongShape) {
  const AttributeMap attrs = Attrs({{"kernel_shape", Attribute::Ints({3, 3})}, {"strides", Attribute::Ints({2, 2})}});
  const Tensor x = RandomFloat({1, 2, 7, 7}, 1), w = RandomFloat({3, 2, 3, 3}, 2);
  const Tensor wrong = RandomFloat({1, 3, 4, 3}, 3);  // Conv gives [1, 3, 3, 3]
  for (const auto& [node, inputs] :
       std::vector<std::pair<Node, std::vector<Tensor>>>{
           {MakeNode("ConvGradInput", 3, 1, attrs, kDomain), {wrong, w, x}},
           {MakeNode("ConvGradWeight", 2, 1, attrs, kDomain), {x, wrong}},
           {MakeNode("MaxPoolGrad", 2, 1, attrs, kDomain), {x, RandomFloat({1, 2, 3, 4}, 4)}}}) {
    auto r = RunNode(node, kOpset, inputs, Backend::kReference);
    ASSERT_FALSE(r.ok()) << node.op_type;
    EXPECT_NE(r.status().message().find("dY"), std::string::npos) << r.status().message();
  }
}

TEST(ReluGrad, HandComputedOnEveryBackend) {
  // dY passes where Y > 0 only: not at 0, -0, negatives, -inf or NaN (Where(Greater(Y, 0), dY, 0)).
  const float nan = std::nanf("");
  const Tensor y = Tensor::FromVector<float>({3, 4}, {2, 0, -1, 0.5f, -0.f, nan, 1e-30f, -INFINITY, INFINITY, -1e-30f,
                                                      3, 0});
  const Tensor dy = Tensor::FromVector<float>({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, nan, 12});
  const Node grad = MakeNode("ReluGrad", 2, 1, {}, kDomain);
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(grad, kOpset, {y, dy}, b, 2);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const Tensor& dx = (*r)[0];
    ASSERT_EQ(dx.dims(), dy.dims());
    const std::vector<float> want = {1, 0, 0, 4, 0, 0, 7, 0, 9, 0, nan, 0};
    for (size_t i = 0; i < want.size(); ++i) {
      const float got = dx.data<float>()[i];
      if (std::isnan(want[i]))
        EXPECT_TRUE(std::isnan(got)) << BackendName(b) << " element " << i;
      else
        EXPECT_EQ(got, want[i]) << BackendName(b) << " element " << i;
    }
  }
}

TEST(ReluGrad, LargeTensorsMatchTheDefinitionAtAnyThreadCount) {
  // Over 64K elements (split over threads), not a multiple of any vector or block width; a quarter
  // of Y exactly zero.
  const Dims dims{3, 7, 61, 67};
  Tensor y = RandomFloat(dims, 11);
  for (int64_t i = 0; i < y.numel(); i += 4) y.data<float>()[i] = 0.f;
  const Tensor dy = RandomFloat(dims, 12);
  Tensor want(DType::kFloat32, dims);
  for (int64_t i = 0; i < y.numel(); ++i) want.data<float>()[i] = y.data<float>()[i] > 0.f ? dy.data<float>()[i] : 0.f;
  const Node grad = MakeNode("ReluGrad", 2, 1, {}, kDomain);
  for (Backend b : {Backend::kReference, Backend::kCpu})
    for (int threads : {1, 2, 5}) {
      auto r = RunNode(grad, kOpset, {y, dy}, b, threads);
      ASSERT_TRUE(r.ok()) << r.status().message();
      EXPECT_TRUE((*r)[0].BitwiseEquals(want)) << BackendName(b) << " " << threads;
    }
  ExpectBackendsMatchReference(grad, {y, dy}, 0.f, 0.f, kOpset, 3);
  // Small and odd-sized, scalar included.
  for (const Dims& d : std::vector<Dims>{{}, {1}, {13}, {2, 17, 3}}) {
    const Tensor ys = RandomFloat(d, 13), dys = RandomFloat(d, 14);
    ExpectBackendsMatchReference(grad, {ys, dys}, 0.f, 0.f, kOpset);
  }
}

TEST(ReluGrad, RejectsShapesThatDifferNamingTheNode) {
  RegisterAllOps();
  Node grad = MakeNode("ReluGrad", 2, 1, {}, kDomain);
  grad.name = "relu_grad_3";
  const OpDef* def = OpRegistry::Global().Find(kDomain, "ReluGrad");
  ASSERT_NE(def, nullptr);
  // No broadcasting: [1, 3] against [2, 3] is refused as well.
  for (const auto& [yd, dyd] : std::vector<std::pair<Dims, Dims>>{{{2, 3}, {3, 2}}, {{6}, {2, 3}}, {{1, 3}, {2, 3}}}) {
    const Tensor y = RandomFloat(yd, 1), dy = RandomFloat(dyd, 2);
    for (Backend b : ::whittle::testing::TestedBackends()) {
      auto r = RunNode(grad, kOpset, {y, dy}, b);
      ASSERT_FALSE(r.ok()) << DimsToString(yd) << " " << DimsToString(dyd);
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().message();
      EXPECT_NE(r.status().message().find("relu_grad_3"), std::string::npos) << r.status().message();
    }
    std::vector<DType> odt;
    std::vector<Dims> odims;
    const Status s = InferConcrete(*def, grad, kOpset, {&y, &dy}, &odt, &odims);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find("relu_grad_3"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("same shape"), std::string::npos) << s.message();
  }
  // The kernel checks too (it runs after inference in a session; called directly here).
  Tensor dx(DType::kFloat32, {2, 3});
  const Status k = ReluGradReference(RandomFloat({3, 2}, 1), RandomFloat({2, 3}, 2), &dx, 1);
  EXPECT_EQ(k.code(), StatusCode::kInvalidArgument) << k.message();
}

TEST(AveragePoolGrad, MatchesFiniteDifferencesOnEveryBackend) {
  using A = Attribute;
  const std::vector<PoolCase> cases = {
      {"3x3_stride2_pads_exclude", {2, 3, 7, 6},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 1, 1})}}},
      {"3x3_stride2_pads_include", {2, 3, 7, 6},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"pads", A::Ints({1, 1, 1, 1})},
        {"count_include_pad", A::Int(1)}}},
      {"ceil_asymmetric_pads_include", {1, 2, 6, 7},
       {{"kernel_shape", A::Ints({2, 3})}, {"strides", A::Ints({2, 2})}, {"ceil_mode", A::Int(1)},
        {"pads", A::Ints({0, 1, 1, 0})}, {"count_include_pad", A::Int(1)}}},
      {"1d_ceil", {2, 2, 9},
       {{"kernel_shape", A::Ints({3})}, {"strides", A::Ints({2})}, {"pads", A::Ints({1, 1})}, {"ceil_mode", A::Int(1)}}},
      {"3d", {1, 2, 4, 5, 4},
       {{"kernel_shape", A::Ints({2, 2, 3})}, {"strides", A::Ints({2, 1, 2})}, {"pads", A::Ints({1, 0, 1, 0, 1, 1})}}},
      {"same_upper", {1, 1, 5, 6},
       {{"kernel_shape", A::Ints({3, 3})}, {"strides", A::Ints({2, 2})}, {"auto_pad", A::String("SAME_UPPER")}}},
  };
  uint32_t seed = 300;
  for (const PoolCase& c : cases) {
    const AttributeMap attrs = Attrs(c.attrs);
    const Node pool = MakeNode("AveragePool", 1, 1, attrs);
    const Tensor x = RandomFloat(c.x, seed++);
    const Tensor y = RunOne(pool, {x});
    const Tensor dy = RandomFloat(y.dims(), seed++);
    // AveragePool is linear: the differences are exact up to rounding.
    const Tensor want = FiniteDifference(pool, {x}, 0, dy, 1.f / 16.f);
    const Node grad = MakeNode("AveragePoolGrad", 2, 1, attrs, kDomain);
    const std::vector<Tensor> got = ExpectBackendsMatchReference(grad, {x, dy}, 1e-6f, 1e-6f, kOpset);
    ASSERT_EQ(got.size(), 1u) << c.name;
    ExpectClose(got[0], want, 1e-5f, c.name);
  }
}

TEST(GatherGrad, MatchesFiniteDifferencesOnEveryBackend) {
  // Repeated and negative indices, 0-D and 2-D index tensors, every axis of a 3-D X.
  struct Case {
    Dims x;
    Tensor indices;
    int64_t axis;
  };
  const std::vector<Case> cases = {
      {{5, 3, 2}, Tensor::FromVector<int64_t>({2, 3}, {0, 4, -1, 2, 2, 0}), 0},
      {{2, 4, 3}, Tensor::FromVector<int64_t>({3}, {3, -4, 3}), 1},
      {{2, 3, 4}, Tensor::FromVector<int32_t>({2, 2}, {1, -1, 1, 0}), -1},
      {{4, 3}, Tensor::Scalar<int64_t>(2), 0},
  };
  uint32_t seed = 400;
  for (const Case& c : cases) {
    const AttributeMap attrs = Attrs({{"axis", Attribute::Int(c.axis)}});
    const Node gather = MakeNode("Gather", 2, 1, attrs);
    const Tensor x = RandomFloat(c.x, seed++);
    const Tensor y = RunOne(gather, {x, c.indices});
    const Tensor dy = RandomFloat(y.dims(), seed++);
    const Tensor want = FiniteDifference(gather, {x, c.indices}, 0, dy, 1.f / 16.f);
    const Node grad = MakeNode("GatherGrad", 3, 1, attrs, kDomain);
    const std::vector<Tensor> got = ExpectBackendsMatchReference(grad, {x, c.indices, dy}, 1e-6f, 1e-6f, kOpset);
    ASSERT_EQ(got.size(), 1u);
    ExpectClose(got[0], want, 1e-5f, "axis " + std::to_string(c.axis));
  }
}

TEST(GatherGrad, HandComputedRepeatsSum) {
  // X [3, 2]; indices [2, 0, 2, -1]: row 2 gets three dY rows, row 0 one, row 1 none.
  const Tensor x = RandomFloat({3, 2}, 1);
  const Tensor idx = Tensor::FromVector<int64_t>({4}, {2, 0, 2, -1});
  const Tensor dy = Tensor::FromVector<float>({4, 2}, {1, 2, 10, 20, 100, 200, 1000, 2000});
  const Tensor dx = RunOne(MakeNode("GatherGrad", 3, 1, Attrs({}), kDomain), {x, idx, dy});
  ASSERT_TRUE(dx.defined());
  const std::vector<float> want{10, 20, 0, 0, 1101, 2202};
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(dx.data<float>()[i], want[static_cast<size_t>(i)]) << i;
}

TEST(GatherGrad, RejectsBadIndicesShapesAndTypes) {
  RegisterAllOps();
  const Tensor x = RandomFloat({3, 2}, 1);
  const Node n = MakeNode("GatherGrad", 3, 1, Attrs({}), kDomain);
  auto out_of_range = RunNode(n, kOpset, {x, Tensor::FromVector<int64_t>({2}, {0, 3}), RandomFloat({2, 2}, 2)},
                              Backend::kReference);
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("out of range"), std::string::npos) << out_of_range.status().message();
  auto wrong_dy = RunNode(n, kOpset, {x, Tensor::FromVector<int64_t>({2}, {0, 1}), RandomFloat({3, 2}, 2)},
                          Backend::kReference);
  ASSERT_FALSE(wrong_dy.ok());
  EXPECT_NE(wrong_dy.status().message().find("dY"), std::string::npos) << wrong_dy.status().message();
  auto float_idx = RunNode(n, kOpset, {x, RandomFloat({2}, 3), RandomFloat({2, 2}, 2)}, Backend::kReference);
  ASSERT_FALSE(float_idx.ok());
  EXPECT_NE(float_idx.status().message().find("Indices"), std::string::npos) << float_idx.status().message();
  const Node bad_axis = MakeNode("GatherGrad", 3, 1, Attrs({{"axis", Attribute::Int(2)}}), kDomain);
  auto axis = RunNode(bad_axis, kOpset, {x, Tensor::FromVector<int64_t>({2}, {0, 1}), RandomFloat({2, 2}, 2)},
                      Backend::kReference);
  ASSERT_FALSE(axis.ok());
  EXPECT_NE(axis.status().message().find("axis"), std::string::npos) << axis.status().message();
}

TEST(AveragePoolGrad, RejectsDyOfTheWrongShapeAndMissingKernelShape) {
  RegisterAllOps();
  const AttributeMap attrs = Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}});
  auto r = RunNode(MakeNode("AveragePoolGrad", 2, 1, attrs, kDomain), kOpset,
                   {RandomFloat({1, 2, 4, 4}, 1), RandomFloat({1, 2, 3, 2}, 2)}, Backend::kReference);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("dY"), std::string::npos) << r.status().message();
  Node n = MakeNode("AveragePoolGrad", 2, 1, Attrs({}), kDomain);
  n.name = "avg_grad_node";
  const Status s = ValidateNode(n, kOpset);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kernel_shape"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace whittle
