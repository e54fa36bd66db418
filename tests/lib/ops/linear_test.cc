// Gemm and MatMul OpDefs: shape inference (transposes, C broadcast, numpy matmul with 1-D
// promotion and symbolic batch broadcast) and its errors.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::MakeNode;

struct Inferred {
  Status status;
  std::optional<SymShape> shape;
  DType dtype = DType::kUndefined;
};

Inferred Infer(const Node& node, const std::vector<std::optional<SymShape>>& shapes, int opset = 17,
               DType dt = DType::kFloat32) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  EXPECT_NE(def, nullptr);
  InferContext ctx(node, opset);
  for (size_t i = 0; i < node.inputs.size(); ++i)
    ctx.AddInput(node.inputs[i] >= 0, dt, i < shapes.size() ? shapes[i] : std::nullopt, nullptr);
  for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
  Inferred r;
  r.status = InferNode(*def, ctx);
  if (r.status.ok()) {
    r.shape = ctx.OutputShape(0);
    r.dtype = ctx.OutputDType(0);
  }
  return r;
}

std::string S(const SymShape& s) { return SymShapeToString(s); }

Node Gemm(int ta, int tb, int inputs = 2) {
  AttributeMap m;
  m.Set("transA", Attribute::Int(ta));
  m.Set("transB", Attribute::Int(tb));
  return MakeNode("Gemm", inputs, 1, m);
}

const Dim kB = Dim::Symbol("batch");

TEST(GemmOp, InfersShapesWithTransposes) {
  Inferred r = Infer(Gemm(0, 0), {SymShape{kB, 784}, SymShape{784, 256}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(S(*r.shape), S({kB, 256}));
  r = Infer(Gemm(0, 1, 3), {SymShape{kB, 784}, SymShape{256, 784}, SymShape{256}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(S(*r.shape), S({kB, 256}));
  r = Infer(Gemm(1, 1, 3), {SymShape{4, 3}, SymShape{5, 4}, SymShape{1, 5}});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(S(*r.shape), S({3, 5}));
  r = Infer(Gemm(1, 0, 3), {SymShape{4, 3}, SymShape{4, 5}, SymShape{}});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(S(*r.shape), S({3, 5}));
  // opset 6 models carry `broadcast`; it is accepted.
  AttributeMap old;
  old.Set("broadcast", Attribute::Int(1));
  RegisterAllOps();
  EXPECT_TRUE(ValidateNode(MakeNode("Gemm", 3, 1, old), 6).ok());
}

TEST(GemmOp, Errors) {
  EXPECT_FALSE(Infer(Gemm(0, 0), {SymShape{2, 3}, SymShape{4, 5}}).status.ok());       // K mismatch
  EXPECT_FALSE(Infer(Gemm(1, 0), {SymShape{2, 3}, SymShape{3, 5}}).status.ok());       // K mismatch after transA
  EXPECT_FALSE(Infer(Gemm(0, 0), {SymShape{2, 3, 1}, SymShape{3, 5}}).status.ok());    // rank 3 A
  EXPECT_FALSE(Infer(Gemm(0, 0), {SymShape{2, 3}, SymShape{3}}).status.ok());          // rank 1 B
  EXPECT_FALSE(Infer(Gemm(0, 0, 3), {SymShape{2, 3}, SymShape{3, 5}, SymShape{4}}).status.ok());     // C [4]
  EXPECT_FALSE(Infer(Gemm(0, 0, 3), {SymShape{2, 3}, SymShape{3, 5}, SymShape{3, 5}}).status.ok());  // C rows
  EXPECT_FALSE(Infer(Gemm(0, 0, 3), {SymShape{2, 3}, SymShape{3, 5}, SymShape{1, 2, 5}}).status.ok());
  RegisterAllOps();
  EXPECT_FALSE(ValidateNode(MakeNode("Gemm", 1, 1), 17).ok());
  AttributeMap bad;
  bad.Set("alpha", Attribute::Int(1));
  EXPECT_FALSE(ValidateNode(MakeNode("Gemm", 2, 1, bad), 17).ok());
}

TEST(MatMulOp, NumpySemantics) {
  const Node n = MakeNode("MatMul", 2, 1);
  const std::vector<std::pair<std::vector<SymShape>, SymShape>> cases = {
      {{{3, 4}, {4, 5}}, {3, 5}},
      {{{4}, {4, 5}}, {5}},
      {{{3, 4}, {4}}, {3}},
      {{{4}, {4}}, {}},
      {{{kB, 3, 4}, {4, 5}}, {kB, 3, 5}},
      {{{2, 1, 3, 4}, {7, 4, 5}}, {2, 7, 3, 5}},
      {{{kB, 1, 3, 4}, {1, 6, 4, 2}}, {kB, 6, 3, 2}},
      {{{4}, {2, 4, 5}}, {2, 5}},
  };
  for (const auto& [in, want] : cases) {
    Inferred r = Infer(n, {in[0], in[1]});
    ASSERT_TRUE(r.status.ok()) << r.status.message();
    EXPECT_EQ(S(*r.shape), S(want)) << S(in[0]) << " x " << S(in[1]);
  }
  Inferred r = Infer(n, {SymShape{2, 3}, std::nullopt});
  EXPECT_TRUE(r.status.ok());
  EXPECT_FALSE(r.shape.has_value());
}

TEST(MatMulOp, Errors) {
  const Node n = MakeNode("MatMul", 2, 1);
  EXPECT_FALSE(Infer(n, {SymShape{3, 4}, SymShape{5, 6}}).status.ok());        // K mismatch
  EXPECT_FALSE(Infer(n, {SymShape{4}, SymShape{3}}).status.ok());              // K mismatch, vectors
  EXPECT_FALSE(Infer(n, {SymShape{}, SymShape{3, 4}}).status.ok());            // scalar
  EXPECT_FALSE(Infer(n, {SymShape{2, 3, 4}, SymShape{3, 4, 5}}).status.ok());  // batch 2 vs 3
  RegisterAllOps();
  EXPECT_FALSE(ValidateNode(MakeNode("MatMul", 3, 1), 17).ok());
  AttributeMap a;
  a.Set("transA", Attribute::Int(1));
  EXPECT_FALSE(ValidateNode(MakeNode("MatMul", 2, 1, a), 17).ok());
}

}  // namespace
}  // namespace whittle
