// Hostile quantization parameters are rejected at load with one line naming the node, the op,
// the input and the bad value: directly (ValidateQuantParams), through Session::FromGraph,
// through a saved file and Session::Load, and through the run-model CLI.
#include "runtime/quant_validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "lib/onnx/model_io.h"
#include "whittle/session.h"
#include "tests/util/graph_builder.h"
#include "tests/util/run_command.h"
#include "tests/util/scratch_dir.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using testing::GraphBuilder;

AttributeMap Axis(int64_t a) {
  AttributeMap m;
  m.Set("axis", Attribute::Int(a));
  return m;
}

// x (uint8 activations) -> DQ -> MatMul with DQ(int8 weight [4, 3], per-column scale) -> y.
// The parameters of the weight's DequantizeLinear are the test's to break.
Graph WeightGraph(Tensor w, Tensor w_scale, Tensor w_zp, int64_t axis = 1) {
  return GraphBuilder(13)
      .Input("xq", DType::kUInt8, {2, 4})
      .Init("x_scale", Tensor::Scalar<float>(0.1f))
      .Init("x_zp", Tensor::Scalar<uint8_t>(128))
      .Init("w", std::move(w))
      .Init("w_scale", std::move(w_scale))
      .Init("w_zp", std::move(w_zp))
      .Op("DequantizeLinear", {"xq", "x_scale", "x_zp"}, {"x"})
      .Op("DequantizeLinear", {"w", "w_scale", "w_zp"}, {"wf"}, Axis(axis))
      .Op("MatMul", {"x", "wf"}, {"y"})
      .Output("y")
      .Build();
}

Tensor W() { return testing::RandomInt8({4, 3}, 7); }

std::string LoadError(Graph g) {
  auto s = Session::FromGraph(std::move(g));
  return s.ok() ? std::string("(loaded)") : s.status().message();
}

TEST(QuantValidation, AcceptsWellFormedPerChannelModel) {
  Graph g = WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, 0.2f, 0.3f}),
                        Tensor::FromVector<int8_t>({3}, {0, 0, 0}));
  EXPECT_TRUE(ValidateQuantParams(g).ok()) << ValidateQuantParams(g).message();
  auto s = Session::FromGraph(std::move(g), {.optimize = false});
  ASSERT_TRUE(s.ok()) << s.status().message();
}

TEST(QuantValidation, NegativeScaleNamesNodeInputAndValue) {
  const std::string m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, 0.2f, -0.5f}),
                                              Tensor::FromVector<int8_t>({3}, {0, 0, 0})));
  EXPECT_NE(m.find("node 'DequantizeLinear_1' (DequantizeLinear)"), std::string::npos) << m;
  EXPECT_NE(m.find("x_scale ('w_scale')[2] = -0.5"), std::string::npos) << m;
  EXPECT_NE(m.find("finite and > 0"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

TEST(QuantValidation, NanZeroAndInfScalesRejected) {
  for (float bad : {std::nanf(""), 0.f, std::numeric_limits<float>::infinity()}) {
    const std::string m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({3}, {bad, 0.2f, 0.3f}),
                                                Tensor::FromVector<int8_t>({3}, {0, 0, 0})));
    EXPECT_NE(m.find("x_scale ('w_scale')[0] = "), std::string::npos) << m;
    EXPECT_NE(m.find("a scale must be finite and > 0"), std::string::npos) << m;
  }
}

TEST(QuantValidation, ActivationQuantizeScaleRejected) {
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 4})
                .Init("s", Tensor::Scalar<float>(-1.f))
                .Init("z", Tensor::Scalar<uint8_t>(0))
                .Op("QuantizeLinear", {"x", "s", "z"}, {"q"})
                .Output("q")
                .Build();
  const std::string m = LoadError(std::move(g));
  EXPECT_NE(m.find("(QuantizeLinear): y_scale ('s') = -1; a scale must be finite and > 0"), std::string::npos) << m;
}

TEST(QuantValidation, ZeroPointOutOfRangeForData) {
  // An int32 zero point for int8 data: the value 300 cannot be an int8 zero point.
  const std::string m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, 0.2f, 0.3f}),
                                              Tensor::FromVector<int32_t>({3}, {0, 300, 0})));
  EXPECT_NE(m.find("x_zero_point ('w_zp')[1] = 300 is out of range for int8 data [-128, 127]"), std::string::npos)
      << m;
}

TEST(QuantValidation, ZeroPointTypeMustMatchData) {
  // In range, but still the wrong type: ONNX requires the data's type.
  std::string m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, 0.2f, 0.3f}),
                                        Tensor::FromVector<uint8_t>({3}, {0, 1, 0})));
  EXPECT_NE(m.find("x_zero_point ('w_zp') has type uint8 but x is int8"), std::string::npos) << m;
  m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, 0.2f, 0.3f}),
                            Tensor::FromVector<float>({3}, {0.f, 0.f, 0.f})));
  EXPECT_NE(m.find("x_zero_point ('w_zp') has type float32; a zero point must be an integer"), std::string::npos)
      << m;
}

TEST(QuantValidation, Int32DataNeedsZeroZeroPoint) {
  Graph g = GraphBuilder(13)
                .Init("b", Tensor::FromVector<int32_t>({2}, {5, -7}))
                .Init("s", Tensor::FromVector<float>({2}, {0.01f, 0.02f}))
                .Init("z", Tensor::FromVector<int32_t>({2}, {0, 3}))
                .Op("DequantizeLinear", {"b", "s", "z"}, {"bf"}, Axis(0))
                .Output("bf")
                .Build();
  const Status st = ValidateQuantParams(g);
  EXPECT_NE(st.message().find("x_zero_point ('z')[1] = 3; the zero point of int32 data must be 0"), std::string::npos)
      << st.message();
}

TEST(QuantValidation, PerAxisLengthAndAxisRange) {
  // 4 scales for a weight with 3 columns along axis 1.
  std::string m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({4}, {0.1f, 0.2f, 0.3f, 0.4f}),
                                        Tensor::FromVector<int8_t>({4}, {0, 0, 0, 0})));
  EXPECT_NE(m.find("x_scale has 4 entries but x has 3 along axis 1"), std::string::npos) << m;
  m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, 0.2f, 0.3f}),
                            Tensor::FromVector<int8_t>({3}, {0, 0, 0}), /*axis=*/2));
  EXPECT_NE(m.find("axis 2 is out of range for x of rank 2"), std::string::npos) << m;
  m = LoadError(WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, 0.2f, 0.3f}),
                            Tensor::FromVector<int8_t>({2}, {0, 0})));
  EXPECT_NE(m.find("x_scale has 3 entries but x_zero_point has 2"), std::string::npos) << m;
}

TEST(QuantValidation, ActivationPerAxisLengthUsesInferredShapes) {
  // The Relu output's shape is only known after inference.
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {2, 5})
                .Init("s", Tensor::FromVector<float>({3}, {0.1f, 0.1f, 0.1f}))
                .Init("z", Tensor::FromVector<uint8_t>({3}, {0, 0, 0}))
                .Op("Relu", {"x"}, {"r"})
                .Op("QuantizeLinear", {"r", "s", "z"}, {"q"}, Axis(1))
                .Output("q")
                .Build();
  EXPECT_TRUE(ValidateQuantParams(g).ok());  // shape of r unknown yet: nothing to compare
  const std::string m = LoadError(std::move(g));
  EXPECT_NE(m.find("(QuantizeLinear)"), std::string::npos) << m;
  EXPECT_NE(m.find("3 entries"), std::string::npos) << m;
}

TEST(QuantValidation, QLinearOpsChecked) {
  // Checked without a session: only the parameters matter here.
  auto conv = [](Tensor w_scale, Tensor y_zp) {
    Tensor wz(DType::kInt8, w_scale.dims());
    return GraphBuilder(13)
        .Input("x", DType::kUInt8, {1, 2, 5, 5})
        .Init("xs", Tensor::Scalar<float>(0.1f)).Init("xz", Tensor::Scalar<uint8_t>(0))
        .Init("w", testing::RandomInt8({4, 2, 3, 3}, 3))
        .Init("ws", std::move(w_scale)).Init("wz", wz)
        .Init("ys", Tensor::Scalar<float>(0.2f)).Init("yz", std::move(y_zp))
        .Op("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, {"y"})
        .Output("y")
        .Build();
  };
  EXPECT_TRUE(ValidateQuantParams(conv(Tensor::FromVector<float>({4}, {1, 1, 1, 1}), Tensor::Scalar<uint8_t>(3))).ok());
  Status st = ValidateQuantParams(conv(Tensor::FromVector<float>({4}, {1, 1, -2, 1}), Tensor::Scalar<uint8_t>(3)));
  EXPECT_NE(st.message().find("(QLinearConv): w_scale ('ws')[2] = -2"), std::string::npos) << st.message();
  st = ValidateQuantParams(conv(Tensor::FromVector<float>({3}, {1, 1, 1}), Tensor::Scalar<uint8_t>(3)));
  EXPECT_NE(st.message().find("w_scale has 3 entries but w has 4 along axis 0"), std::string::npos) << st.message();
  st = ValidateQuantParams(conv(Tensor::FromVector<float>({4}, {1, 1, 1, 1}), Tensor::Scalar<int32_t>(3)));
  EXPECT_NE(st.message().find("y_zero_point ('yz') has type int32"), std::string::npos) << st.message();

  Graph mm = GraphBuilder(13)
                 .Input("a", DType::kInt8, {2, 4})
                 .Init("as", Tensor::Scalar<float>(0.1f)).Init("az", Tensor::Scalar<int32_t>(-200))
                 .Init("b", testing::RandomInt8({4, 3}, 3))
                 .Init("bs", Tensor::Scalar<float>(0.1f)).Init("bz", Tensor::Scalar<int8_t>(0))
                 .Init("ys", Tensor::Scalar<float>(0.2f)).Init("yz", Tensor::Scalar<int8_t>(0))
                 .Op("QLinearMatMul", {"a", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"y"})
                 .Output("y")
                 .Build();
  st = ValidateQuantParams(mm);
  EXPECT_NE(st.message().find("(QLinearMatMul): a_zero_point ('az') = -200 is out of range for int8 data"),
            std::string::npos)
      << st.message();

  Graph mmi = GraphBuilder(13)
                  .Input("a", DType::kUInt8, {2, 4})
                  .Init("b", testing::RandomInt8({4, 3}, 3))
                  .Init("az", Tensor::Scalar<uint8_t>(1))
                  .Init("bz", Tensor::FromVector<int8_t>({2}, {0, 0}))
                  .Op("MatMulInteger", {"a", "b", "az", "bz"}, {"y"})
                  .Output("y")
                  .Build();
  st = ValidateQuantParams(mmi);
  EXPECT_NE(st.message().find("(MatMulInteger): b_zero_point has 2 entries but B has 3 along axis 1"),
            std::string::npos)
      << st.message();
}

TEST(QuantValidation, SavedMalformedModelFailsToLoadWithOneLine) {
  testing::ScratchDir dir;
  const std::string path = dir / "bad_scale.onnx";
  Graph g = WeightGraph(W(), Tensor::FromVector<float>({3}, {0.1f, std::nanf(""), 0.3f}),
                        Tensor::FromVector<int8_t>({3}, {0, 0, 0}));
  ASSERT_TRUE(SaveModel(g, path).ok());
  auto loaded = LoadModel(path);
  std::string m;
  if (loaded.ok()) {
    auto s = Session::Load(path);
    ASSERT_FALSE(s.ok());
    m = s.status().message();
  } else {
    m = loaded.status().message();
  }
  EXPECT_NE(m.find("(DequantizeLinear)"), std::string::npos) << m;
  EXPECT_NE(m.find("[1] = nan"), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;

  // The CLI prints exactly one line and exits non-zero.
  auto r = testing::RunCommand(std::string(WHITTLE_BINARY_DIR) + "/bin/run-model " + path + " 2>&1");
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find("(DequantizeLinear)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nan"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace whittle
