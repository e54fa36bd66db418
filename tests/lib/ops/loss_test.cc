// Inference and validation of the loss ops (lib/ops/loss.cc).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::MakeNode;

struct In {
  DType dt = DType::kFloat32;
  std::optional<SymShape> shape;
  const Tensor* value = nullptr;
  bool present = true;
};
In Sh(SymShape s, DType dt = DType::kFloat32) { return In{dt, std::move(s), nullptr, true}; }

struct Inferred {
  Status status;
  std::vector<DType> dtypes;
  std::vector<std::optional<SymShape>> shapes;
};

Inferred Infer(const Node& node, int opset, const std::vector<In>& ins) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  EXPECT_NE(def, nullptr) << node.op_type;
  InferContext ctx(node, opset);
  for (const In& i : ins) ctx.AddInput(i.present, i.dt, i.shape, i.value);
  for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
  Inferred r;
  r.status = InferNode(*def, ctx);
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    r.dtypes.push_back(ctx.OutputDType(i));
    r.shapes.push_back(ctx.OutputShape(i));
  }
  return r;
}

Status Validate(const Node& node, int opset) {
  RegisterAllOps();
  return ValidateNode(node, opset);
}

AttributeMap Attrs(std::initializer_list<std::pair<const std::string, Attribute>> kv) {
  AttributeMap a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

const Dim kBatch = Dim::Symbol("batch");

::testing::AssertionResult ShapeIs(const Inferred& r, const SymShape& want, int out = 0) {
  if (!r.status.ok()) return ::testing::AssertionFailure() << r.status.message();
  if (!r.shapes[static_cast<size_t>(out)]) return ::testing::AssertionFailure() << "no shape inferred";
  if (*r.shapes[static_cast<size_t>(out)] != want)
    return ::testing::AssertionFailure() << SymShapeToString(*r.shapes[static_cast<size_t>(out)]) << " vs "
                                         << SymShapeToString(want);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult FailsWith(const Status& st, const std::string& part) {
  if (st.ok()) return ::testing::AssertionFailure() << "expected an error containing '" << part << "'";
  if (st.message().find(part) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << st.message() << "' lacks '" << part << "'";
  return ::testing::AssertionSuccess();
}

TEST(LossOpsTest, NllShapes) {
  Node none = MakeNode("NegativeLogLikelihoodLoss", 2, 1, Attrs({{"reduction", Attribute::String("none")}}));
  EXPECT_TRUE(ShapeIs(Infer(none, 13, {Sh({kBatch, 5, 3}), Sh({kBatch, 3}, DType::kInt64)}), {kBatch, 3}));
  Node mean = MakeNode("NegativeLogLikelihoodLoss", 3, 1);
  EXPECT_TRUE(ShapeIs(Infer(mean, 13, {Sh({2, 5}), Sh({2}, DType::kInt64), Sh({5})}), {}));
  EXPECT_TRUE(FailsWith(Infer(mean, 13, {Sh({2, 5}), Sh({2, 1}, DType::kInt64), Sh({5})}).status, "rank"));
  EXPECT_TRUE(FailsWith(Infer(none, 13, {Sh({2, 5, 3}), Sh({2, 4}, DType::kInt64)}).status, "does not match"));
  EXPECT_TRUE(FailsWith(Infer(none, 13, {Sh({2, 5}), Sh({2})}).status, "int32 or int64"));
  Node bad = MakeNode("NegativeLogLikelihoodLoss", 2, 1, Attrs({{"reduction", Attribute::String("avg")}}));
  EXPECT_TRUE(FailsWith(Validate(bad, 13), "none, sum or mean"));
}

TEST(LossOpsTest, SoftmaxCrossEntropyLogProbOutput) {
  Node n = MakeNode("SoftmaxCrossEntropyLoss", 2, 2, Attrs({{"ignore_index", Attribute::Int(-1)}}));
  Inferred r = Infer(n, 13, {Sh({kBatch, 4, 2}), Sh({kBatch, 2}, DType::kInt64)});
  EXPECT_TRUE(ShapeIs(r, {}, 0));
  EXPECT_TRUE(ShapeIs(r, {kBatch, 4, 2}, 1));
  EXPECT_TRUE(FailsWith(Infer(n, 13, {Sh({4}), Sh({4}, DType::kInt64)}).status, "[N, C, ...]"));
}

}  // namespace
}  // namespace whittle
