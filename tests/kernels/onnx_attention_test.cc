// ai.onnx Attention, RotaryEmbedding and RMSNormalization (opset 23): their values are checked by
// the ONNX backend node cases (ctest onnx_conformance_onnx_package: 16 RotaryEmbedding, 38
// RMSNormalization and every float32 opset-23 Attention case pass). Here: one grouped-query case
// with a cache worked out by hand, and hostile operands refused with an error naming them.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::MakeNode;

AttributeMap Attrs(std::initializer_list<std::pair<const char*, int64_t>> ints) {
  AttributeMap a;
  for (const auto& [k, v] : ints) a.Set(k, Attribute::Int(v));
  return a;
}

// Two query heads share one key/value head; the past holds one position, this call adds one.
// Query head 0 is (1, 0), head 1 is (0, 1); keys (past, new) are (1, 0) and (0, 1); values 10 and
// 20. With scale 1: head 0 scores (1, 0), head 1 (0, 1): softmax weights e/(1+e) on the matching
// key, so y0 = (10 e + 20) / (1 + e), y1 = (10 + 20 e) / (1 + e). Causal changes nothing here (the
// one query sits after the past). present = past then new.
TEST(OnnxAttention, GroupedQueryHeadsReadTheSharedCache) {
  RegisterAllOps();
  AttributeMap a = Attrs({{"is_causal", 1}});
  a.Set("scale", Attribute::Float(1.f));
  const Node node = MakeNode("Attention", 6, 3, a);
  const Tensor q = Tensor::FromVector<float>({1, 2, 1, 2}, {1, 0, 0, 1});
  const Tensor k = Tensor::FromVector<float>({1, 1, 1, 2}, {0, 1});
  const Tensor v = Tensor::FromVector<float>({1, 1, 1, 1}, {20});
  const Tensor pk = Tensor::FromVector<float>({1, 1, 1, 2}, {1, 0});
  const Tensor pv = Tensor::FromVector<float>({1, 1, 1, 1}, {10});
  for (Backend be : {Backend::kReference, Backend::kCpu}) {
    auto out = RunNode(node, 23, {q, k, v, Tensor(), pk, pv}, be, 2);
    ASSERT_TRUE(out.ok()) << out.status().message();
    const float e = std::exp(1.f);
    ASSERT_EQ((*out)[0].dims(), (Dims{1, 2, 1, 1}));
    EXPECT_NEAR((*out)[0].data<float>()[0], (10 * e + 20) / (1 + e), 1e-5);
    EXPECT_NEAR((*out)[0].data<float>()[1], (10 + 20 * e) / (1 + e), 1e-5);
    ASSERT_EQ((*out)[1].dims(), (Dims{1, 1, 2, 2}));
    EXPECT_EQ((*out)[1].data<float>()[0], 1.f);
    EXPECT_EQ((*out)[1].data<float>()[3], 1.f);
    EXPECT_EQ((*out)[2].data<float>()[1], 20.f);
  }
}

void ExpectRefused(const Node& node, const std::vector<Tensor>& in, const std::string& words) {
  auto out = RunNode(node, 23, in, Backend::kCpu, 1);
  ASSERT_FALSE(out.ok()) << node.op_type << ": expected an error about " << words;
  EXPECT_NE(out.status().message().find(words), std::string::npos) << out.status().message();
}

TEST(OnnxAttention, HostileOperandsAreRefused) {
  RegisterAllOps();
  const Tensor q = ::whittle::testing::RandomFloat({1, 3, 2, 4}, 1);
  const Tensor k = ::whittle::testing::RandomFloat({1, 2, 2, 4}, 2);  // 3 query heads, 2 kv heads
  const Tensor v = ::whittle::testing::RandomFloat({1, 2, 2, 4}, 3);
  ExpectRefused(MakeNode("Attention", 3, 1), {q, k, v}, "not a multiple");
  const Tensor q2 = ::whittle::testing::RandomFloat({1, 2, 2, 4}, 4);
  // A mask longer than the keys, and one whose heads do not broadcast.
  ExpectRefused(MakeNode("Attention", 4, 1), {q2, k, v, Tensor(DType::kFloat32, {1, 1, 2, 5})}, "attn_mask");
  ExpectRefused(MakeNode("Attention", 4, 1), {q2, k, v, Tensor(DType::kFloat32, {1, 3, 2, 2})}, "attn_mask");
  // A past whose head size is not the keys'.
  ExpectRefused(MakeNode("Attention", 6, 3),
                {q2, k, v, Tensor(), Tensor(DType::kFloat32, {1, 2, 3, 5}), Tensor(DType::kFloat32, {1, 2, 3, 4})},
                "past");
  // 3-D inputs without the head counts.
  const Tensor q3 = ::whittle::testing::RandomFloat({1, 2, 8}, 5);
  ExpectRefused(MakeNode("Attention", 3, 1), {q3, q3, q3}, "q_num_heads");
}

TEST(OnnxRotaryEmbedding, HostileOperandsAreRefused) {
  RegisterAllOps();
  const Tensor x = ::whittle::testing::RandomFloat({1, 2, 3, 8}, 6);
  const Tensor cache = ::whittle::testing::RandomFloat({4, 4}, 7);
  const Node node = MakeNode("RotaryEmbedding", 4, 1);
  // A position past the cache, and a negative one.
  ExpectRefused(node, {x, cache, cache, Tensor::FromVector<int64_t>({1, 3}, {0, 1, 4})}, "position id 4");
  ExpectRefused(node, {x, cache, cache, Tensor::FromVector<int64_t>({1, 3}, {0, -1, 2})}, "position id -1");
  // A cache whose width is not half the rotary dim.
  const Tensor narrow = ::whittle::testing::RandomFloat({4, 3}, 8);
  ExpectRefused(node, {x, narrow, narrow, Tensor::FromVector<int64_t>({1, 3}, {0, 1, 2})}, "cos_cache");
  // An odd rotary dim.
  ExpectRefused(MakeNode("RotaryEmbedding", 4, 1, Attrs({{"rotary_embedding_dim", 5}})),
                {x, cache, cache, Tensor::FromVector<int64_t>({1, 3}, {0, 1, 2})}, "even");
}

TEST(OnnxRmsNormalization, FollowsTheDefinitionAndRefusesABadScale) {
  RegisterAllOps();
  const Node node = MakeNode("RMSNormalization", 2, 1);
  // Row (3, 4): mean square 12.5, y = x / sqrt(12.5 + 1e-5) * (1, 2).
  const Tensor x = Tensor::FromVector<float>({1, 2}, {3, 4});
  auto y = RunNode(node, 23, {x, Tensor::FromVector<float>({2}, {1, 2})}, Backend::kCpu, 1);
  ASSERT_TRUE(y.ok()) << y.status().message();
  const float r = 1.f / std::sqrt(12.5f + 1e-5f);
  EXPECT_NEAR((*y)[0].data<float>()[0], 3 * r, 1e-6);
  EXPECT_NEAR((*y)[0].data<float>()[1], 8 * r, 1e-6);
  ExpectRefused(node, {x, Tensor::FromVector<float>({3}, {1, 2, 3})}, "scale");
}

}  // namespace
}  // namespace whittle
