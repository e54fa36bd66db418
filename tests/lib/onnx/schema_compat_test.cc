// Opset compatibility judged from libonnx's schema history.
#include <gtest/gtest.h>

#include "lib/onnx/schema_compat.h"

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
