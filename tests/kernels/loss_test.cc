// Loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss against hand-computed
// values for every reduction, class weights and ignore_index; CPU is compared to the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::TensorsClose;

AttributeMap Attrs(std::initializer_list<std::pair<const std::string, Attribute>> kv) {
  AttributeMap a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

Tensor F(const Dims& dims, std::vector<float> v) { return Tensor::FromVector<float>(dims, v); }
Tensor I64(const Dims& dims, std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(dims, v); }

std::vector<Tensor> Both(const Node& n, const std::vector<Tensor>& in) {
  return ExpectBackendsMatchReference(n, in, 1e-6f, 1e-5f, 13);
}

const Tensor kInput = F({2, 3}, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f});
const Tensor kTarget = I64({2}, {2, 0});

Node Nll(const std::string& reduction, int inputs, AttributeMap extra = {}) {
  extra.Set("reduction", Attribute::String(reduction));
  return MakeNode("NegativeLogLikelihoodLoss", inputs, 1, extra);
}

TEST(LossKernelsTest, NllReductions) {
  EXPECT_TRUE(TensorsClose(Both(Nll("none", 2), {kInput, kTarget})[0], F({2}, {-0.3f, -0.4f})));
  EXPECT_TRUE(TensorsClose(Both(Nll("sum", 2), {kInput, kTarget})[0], Tensor::Scalar<float>(-0.7f)));
  EXPECT_TRUE(TensorsClose(Both(Nll("mean", 2), {kInput, kTarget})[0], Tensor::Scalar<float>(-0.35f)));
}

TEST(LossKernelsTest, NllWeightsAndIgnoreIndex) {
  const Tensor w = F({3}, {1, 2, 3});
  EXPECT_TRUE(TensorsClose(Both(Nll("none", 3), {kInput, kTarget, w})[0], F({2}, {-0.9f, -0.4f})));
  // mean divides by the summed weights of the targets: (0.9 + 0.4) / (3 + 1).
  EXPECT_TRUE(TensorsClose(Both(Nll("mean", 3), {kInput, kTarget, w})[0], Tensor::Scalar<float>(-0.325f)));
  AttributeMap ii;
  ii.Set("ignore_index", Attribute::Int(2));
  EXPECT_TRUE(TensorsClose(Both(Nll("none", 2, ii), {kInput, kTarget})[0], F({2}, {0.f, -0.4f})));
  EXPECT_TRUE(TensorsClose(Both(Nll("mean", 2, ii), {kInput, kTarget})[0], Tensor::Scalar<float>(-0.4f)));
}

TEST(LossKernelsTest, NllSpatialTarget) {
  // input [1, 2, 2]: classes along axis 1, two positions.
  const Tensor in = F({1, 2, 2}, {1, 2, 3, 4});
  EXPECT_TRUE(TensorsClose(Both(Nll("none", 2), {in, I64({1, 2}, {1, 0})})[0], F({1, 2}, {-3, -2})));
}

TEST(LossKernelsTest, SoftmaxCrossEntropyWithLogProb) {
  const Node n = MakeNode("SoftmaxCrossEntropyLoss", 2, 2, Attrs({{"reduction", Attribute::String("mean")}}));
  auto out = Both(n, {F({1, 3}, {1, 2, 3}), I64({1}, {2})});
  ASSERT_EQ(out.size(), 2u);
  const float lse = 3.f + std::log(1.f + std::exp(-1.f) + std::exp(-2.f));
  EXPECT_TRUE(TensorsClose(out[0], Tensor::Scalar<float>(lse - 3.f)));
  EXPECT_TRUE(TensorsClose(out[1], F({1, 3}, {1 - lse, 2 - lse, 3 - lse})));
  const Node none = MakeNode("SoftmaxCrossEntropyLoss", 2, 1, Attrs({{"reduction", Attribute::String("none")}}));
  auto two = Both(none, {F({2, 2}, {0, 0, 5, 5}), I64({2}, {1, 0})});
  EXPECT_TRUE(TensorsClose(two[0], F({2}, {std::log(2.f), std::log(2.f)})));
}

TEST(LossKernelsTest, TargetOutOfRangeIsAnError) {
  RegisterAllOps();
  RegisterAllKernels();
  auto r = RunNode(Nll("mean", 2), 13, {kInput, I64({2}, {3, 0})}, Backend::kReference);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace whittle
