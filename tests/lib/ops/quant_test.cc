// QuantizeLinear / DequantizeLinear inference: output types and every class of bad quantization
// parameter, both on a single node and through InferShapes on a graph whose initializers are
// broken (the load-time path).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::GraphBuilder;
using ::whittle::testing::MakeNode;

struct In {
  DType dt = DType::kFloat32;
  std::optional<SymShape> shape;
  const Tensor* value = nullptr;
  bool present = true;
};
In Sh(SymShape s, DType dt = DType::kFloat32) { return In{dt, std::move(s), nullptr, true}; }
In Val(const Tensor& t) { return In{t.dtype(), ToSymShape(t.dims()), &t, true}; }

struct Inferred {
  Status status;
  DType dtype = DType::kUndefined;
};

Inferred Infer(const Node& node, int opset, const std::vector<In>& ins) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  InferContext ctx(node, opset);
  for (const In& i : ins) ctx.AddInput(i.present, i.dt, i.shape, i.value);
  for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
  Inferred r;
  r.status = InferNode(*def, ctx);
  r.dtype = ctx.OutputDType(0);
  return r;
}

AttributeMap Axis(int64_t a) {
  AttributeMap m;
  m.Set("axis", Attribute::Int(a));
  return m;
}

::testing::AssertionResult FailsWith(const Status& st, const std::string& part) {
  if (st.ok()) return ::testing::AssertionFailure() << "expected an error containing '" << part << "'";
  if (st.message().find(part) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << st.message() << "' lacks '" << part << "'";
  if (st.message().find("node 'test_") == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << st.message() << "' does not name the node";
  return ::testing::AssertionSuccess();
}

const Node kQ = MakeNode("QuantizeLinear", 3, 1);
const Node kDq = MakeNode("DequantizeLinear", 3, 1);

TEST(QuantOpsTest, OutputTypes) {
  Tensor s = Tensor::Scalar<float>(0.5f);
  Tensor zi8 = Tensor::Scalar<int8_t>(1);
  Inferred r = Infer(MakeNode("QuantizeLinear", 2, 1), 13, {Sh({2, 3}), Val(s)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.dtype, DType::kUInt8);
  r = Infer(kQ, 13, {Sh({2, 3}), Val(s), Val(zi8)});
  EXPECT_EQ(r.dtype, DType::kInt8);
  r = Infer(kDq, 13, {Sh({2, 3}, DType::kInt8), Val(s), Val(zi8)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.dtype, DType::kFloat32);
  Tensor zi32 = Tensor::Scalar<int32_t>(0);
  EXPECT_TRUE(Infer(kDq, 13, {Sh({4}, DType::kInt32), Val(s), Val(zi32)}).status.ok());
  // Per-axis parameters whose values are not known yet still get shape checks.
  EXPECT_TRUE(Infer(kQ, 13, {Sh({2, 3}), Sh({3}), Sh({3}, DType::kUInt8)}).status.ok());
}

TEST(QuantOpsTest, RejectsBadScaleValues) {
  for (float bad : {0.f, -1.f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    Tensor s = Tensor::FromVector<float>({3}, {1.f, bad, 1.f});
    Tensor z = Tensor::FromVector<uint8_t>({3}, {0, 0, 0});
    EXPECT_TRUE(FailsWith(Infer(kQ, 13, {Sh({2, 3}), Val(s), Val(z)}).status, "scale[1]")) << bad;
    EXPECT_TRUE(FailsWith(Infer(kDq, 13, {Sh({2, 3}, DType::kUInt8), Val(s), Val(z)}).status, "positive and finite"));
  }
}

TEST(QuantOpsTest, RejectsPerAxisLengthMismatch) {
  Tensor s = Tensor::FromVector<float>({4}, {1, 1, 1, 1});
  Tensor z = Tensor::FromVector<uint8_t>({4}, {0, 0, 0, 0});
  EXPECT_TRUE(FailsWith(Infer(kQ, 13, {Sh({2, 3}), Val(s), Val(z)}).status, "4 entries but x has 3 along axis 1"));
  Node q0 = MakeNode("QuantizeLinear", 3, 1, Axis(0));
  EXPECT_TRUE(FailsWith(Infer(q0, 13, {Sh({2, 4}), Val(s), Val(z)}).status, "along axis 0"));
  EXPECT_TRUE(Infer(q0, 13, {Sh({4, 2}), Val(s), Val(z)}).status.ok());
}

TEST(QuantOpsTest, RejectsShapeMismatchBetweenScaleAndZeroPoint) {
  Tensor s = Tensor::FromVector<float>({3}, {1, 1, 1});
  Tensor z = Tensor::Scalar<uint8_t>(0);
  EXPECT_TRUE(FailsWith(Infer(kQ, 13, {Sh({2, 3}), Val(s), Val(z)}).status, "differ"));
  EXPECT_TRUE(FailsWith(Infer(kDq, 13, {Sh({2, 3}, DType::kUInt8), Val(s), Val(z)}).status, "differ"));
  // A scalar and a one-element vector are both per-tensor.
  Tensor s1 = Tensor::FromVector<float>({1}, {0.1f});
  EXPECT_TRUE(Infer(kQ, 13, {Sh({2, 3}), Val(s1), Val(z)}).status.ok());
  Tensor s2 = Tensor::FromVector<float>({1, 3}, {1, 1, 1});
  EXPECT_TRUE(FailsWith(Infer(kQ, 13, {Sh({2, 3}), Val(s2)}).status, "scalar or 1-D"));
}

TEST(QuantOpsTest, RejectsBadZeroPointTypes) {
  Tensor s = Tensor::Scalar<float>(1.f);
  Tensor z32 = Tensor::Scalar<int32_t>(0);
  Tensor z16 = Tensor::Scalar<int16_t>(0);
  Tensor z8 = Tensor::Scalar<int8_t>(0);
  EXPECT_TRUE(FailsWith(Infer(kQ, 13, {Sh({2}), Val(s), Val(z32)}).status, "int8 or uint8"));
  EXPECT_TRUE(FailsWith(Infer(kQ, 13, {Sh({2}), Val(s), Val(z16)}).status, "int8 or uint8"));
  EXPECT_TRUE(FailsWith(Infer(kDq, 13, {Sh({2}, DType::kUInt8), Val(s), Val(z8)}).status, "x's type uint8"));
  EXPECT_TRUE(FailsWith(Infer(kDq, 13, {Sh({2}, DType::kInt16), Val(s), Val(z16)}).status,
                        "int8, uint8, int32, int4 or uint4"));
  // 4-bit data exists from opset 21.
  EXPECT_TRUE(FailsWith(Infer(kDq, 13, {Sh({2}, DType::kInt4), Val(s)}).status, "needs opset 21"));
  Tensor sd = Tensor::Scalar<double>(1.0);
  EXPECT_TRUE(FailsWith(Infer(kQ, 13, {Sh({2}), Val(sd), Val(z8)}).status, "scale must be float32"));
}

TEST(QuantOpsTest, RejectsBadAxis) {
  Tensor s = Tensor::FromVector<float>({2}, {1, 1});
  Tensor z = Tensor::FromVector<int8_t>({2}, {0, 0});
  for (int64_t axis : {2, -3}) {
    Node q = MakeNode("QuantizeLinear", 3, 1, Axis(axis));
    EXPECT_TRUE(FailsWith(Infer(q, 13, {Sh({2, 2}), Val(s), Val(z)}).status, "out of range"));
    Node dq = MakeNode("DequantizeLinear", 3, 1, Axis(axis));
    EXPECT_TRUE(FailsWith(Infer(dq, 13, {Sh({2, 2}, DType::kInt8), Val(s), Val(z)}).status, "out of range"));
  }
  // Opset 10 has neither the attribute nor per-axis parameters.
  RegisterAllOps();
  EXPECT_FALSE(ValidateNode(MakeNode("QuantizeLinear", 3, 1, Axis(0)), 10).ok());
  EXPECT_TRUE(FailsWith(Infer(kQ, 10, {Sh({2, 2}), Val(s), Val(z)}).status, "opset 13"));
}

TEST(QuantOpsTest, BadInitializersFailAtLoad) {
  GraphBuilder b(13);
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3})
      .Init("scale", Tensor::FromVector<float>({3}, {0.1f, 0.f, 0.2f}))
      .Init("zp", Tensor::FromVector<uint8_t>({3}, {128, 128, 128}))
      .Op("QuantizeLinear", {"x", "scale", "zp"}, {"q"})
      .Output("q");
  Graph g = b.Build();
  RegisterAllOps();
  Status st = InferShapes(g);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("QuantizeLinear_0"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("scale[1]"), std::string::npos) << st.message();

  GraphBuilder ok(13);
  ok.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 3})
      .Init("scale", Tensor::FromVector<float>({3}, {0.1f, 0.3f, 0.2f}))
      .Init("zp", Tensor::FromVector<uint8_t>({3}, {128, 128, 128}))
      .Op("QuantizeLinear", {"x", "scale", "zp"}, {"q"})
      .Output("q");
  Graph good = ok.Build();
  ASSERT_TRUE(InferShapes(good).ok());
  const Value& q = good.value(good.FindValue("q"));
  EXPECT_EQ(q.dtype, DType::kUInt8);
  EXPECT_EQ(*q.shape, (SymShape{Dim::Symbol("batch"), 3}));
}

}  // namespace
}  // namespace whittle
