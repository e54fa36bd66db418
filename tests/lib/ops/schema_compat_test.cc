// Opset compatibility judged from libonnx's schema history.
#include <gtest/gtest.h>

#include <utility>

#include "lib/ops/op_def.h"
#include "lib/ops/schema_compat.h"

namespace whittle {
namespace {

TEST(SchemaCompat, UnchangedOpsPass) {
  std::string why;
  // HardSigmoid has one schema (6) over the whole range: refused before by a short allow-list.
  EXPECT_TRUE(OpUnchangedBetween("HardSigmoid", 11, 13, &why)) << why;
  // Type-only bumps (Relu 6 -> 13 added bfloat16) and compatible extensions (Gemm 11: C optional).
  EXPECT_TRUE(OpUnchangedBetween("Relu", 7, 13, &why)) << why;
  EXPECT_TRUE(OpUnchangedBetween("Gemm", 9, 13, &why)) << why;
  // Optional attribute with the old default (ArgMax 12: select_last_index).
  EXPECT_TRUE(OpUnchangedBetween("ArgMax", 11, 13, &why)) << why;
  EXPECT_TRUE(OpUnchangedBetween("Conv", 13, 13, &why)) << why;
}

// The table reaches opset 28 (the check venv's onnx): 24-28 changed no op incompatibly by the
// rules (types widened; optional inputs/attributes appended). Whittle's ops whose meaning those
// steps still extended say so with their max_opset (Mod, BitShift, SpaceToDepth 28; Range 27;
// Attention 25).
TEST(SchemaCompat, OpsetsTo28) {
  std::string why;
  for (const char* op : {"Reshape", "Transpose", "Identity", "Loop", "Scan", "If", "Cast", "Celu", "TopK", "Einsum",
                         "OneHot", "DepthToSpace", "ReduceLogSumExp", "QuantizeLinear", "DequantizeLinear", "Pad"})
    EXPECT_TRUE(OpUnchangedBetween(op, 21, 28, &why)) << why;
  EXPECT_FALSE(OpUnchangedBetween("Softmax", 11, 28, &why));
  EXPECT_EQ(why, "Softmax 11 -> 13: attribute 'axis' changed its default");
  RegisterAllOps();
  const std::pair<const char*, int> newest[] = {
      {"Mod", 28}, {"BitShift", 28}, {"SpaceToDepth", 28}, {"Range", 27}, {"Attention", 25}};
  for (const auto& [op, v] : newest) {
    const OpDef* d = OpRegistry::Global().Find("", op);
    ASSERT_NE(d, nullptr) << op;
    EXPECT_EQ(d->max_opset, v) << op;
  }
}

TEST(SchemaCompat, ChangesAreNamed) {
  std::string why;
  EXPECT_FALSE(OpUnchangedBetween("Softmax", 11, 13, &why));
  EXPECT_EQ(why, "Softmax 11 -> 13: attribute 'axis' changed its default");
  EXPECT_FALSE(OpUnchangedBetween("Squeeze", 11, 13, &why));
  EXPECT_NE(why.find("Squeeze 11 -> 13: attribute 'axes' was removed"), std::string::npos) << why;
  EXPECT_FALSE(OpUnchangedBetween("Resize", 10, 13, &why));
  EXPECT_NE(why.find("Resize 10 -> 11"), std::string::npos) << why;
  EXPECT_FALSE(OpUnchangedBetween("Upsample", 9, 13, &why));
  EXPECT_NE(why.find("deprecated"), std::string::npos) << why;
  EXPECT_FALSE(OpUnchangedBetween("NoSuchOp", 11, 13, &why));
  EXPECT_NE(why.find("no ONNX schema"), std::string::npos) << why;
}

}  // namespace
}  // namespace whittle

namespace whittle {
namespace {

// A model of a newer opset than an op's implementation loads when the op did not change since,
// and is refused naming the change when it did.
TEST(SchemaCompat, NewerOpsetsLoadOpByOp) {
  RegisterAllOps();
  Node relu;
  relu.name = "r";
  relu.op_type = "Relu";
  relu.inputs = {0};
  relu.outputs = {1};
  EXPECT_TRUE(ValidateNode(relu, 21).ok());
  // An op implemented up to 17 whose schema changed incompatibly at 20 (GridSample's mode default):
  // registered here with no kernel, only to check what loading a newer model says.
  OpDef grid;
  grid.op_type = "GridSample";
  grid.since_opset = 16;
  grid.min_inputs = grid.max_inputs = 2;
  grid.attrs = {{"mode", AttrType::kString}};
  grid.infer = [](InferContext&) { return Status::Ok(); };
  OpRegistry::Global().Register(grid);
  Node g = relu;
  g.op_type = "GridSample";
  g.inputs = {0, 1};
  EXPECT_TRUE(ValidateNode(g, 19).ok());
  const Status s = ValidateNode(g, 20);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "node 'r' (GridSample): opset 20 changed this op (GridSample 16 -> 20: attribute 'mode' changed its "
            "default); Whittle implements it up to opset 17");
  EXPECT_TRUE(ValidateNode(relu, 28).ok());
  // SpaceToDepth's mode exists from opset 28; before, it is an error in the model.
  Node s2d = relu;
  s2d.op_type = "SpaceToDepth";
  s2d.attrs.Set("blocksize", Attribute::Int(2));
  s2d.attrs.Set("mode", Attribute::String("CRD"));
  EXPECT_TRUE(ValidateNode(s2d, 28).ok());
  const Status old = ValidateNode(s2d, 27);
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.message().find("mode attribute from opset 28"), std::string::npos) << old.message();
}

}  // namespace
}  // namespace whittle
