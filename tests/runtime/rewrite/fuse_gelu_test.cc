// GELU fusion: the subgraphs exporters write for GELU (erf and tanh forms, the products in any
// order) run as one Gelu node with the same outputs; anything read outside the pattern stops it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "lib/onnx/model_io.h"
#include "runtime/session_internal.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

Tensor Scalar(float v) {
  Tensor t(DType::kFloat32, {});
  t.data<float>()[0] = v;
  return t;
}

enum class Form { kErfDivXtHalf, kErfMulHalfXt, kErfXtHalfLast, kTanhPow, kTanhMulMul };

// x [4, 37] -> GELU written out in the given form -> y; `leak` also outputs an intermediate.
Graph GeluGraph(Form f, bool leak = false) {
  GraphBuilder gb(17);
  gb.Input("x", DType::kFloat32, {4, 37})
      .Init("sqrt2", Scalar(1.41421356f))
      .Init("inv_sqrt2", Scalar(0.70710678f))
      .Init("one", Scalar(1.f))
      .Init("half", Scalar(0.5f))
      .Init("three", Scalar(3.f))
      .Init("k", Scalar(0.044715f))
      .Init("c", Scalar(0.79788456f));
  std::string t;
  if (f == Form::kTanhPow || f == Form::kTanhMulMul) {
    if (f == Form::kTanhPow) {
      gb.Op("Pow", {"x", "three"}, {"x3"});
    } else {
      gb.Op("Mul", {"x", "x"}, {"x2"}).Op("Mul", {"x", "x2"}, {"x3"});
    }
    gb.Op("Mul", {"x3", "k"}, {"kx3"}).Op("Add", {"x", "kx3"}, {"inner"}).Op("Mul", {"inner", "c"}, {"arg"});
    gb.Op("Tanh", {"arg"}, {"f"});
  } else {
    if (f == Form::kErfDivXtHalf) gb.Op("Div", {"x", "sqrt2"}, {"arg"});
    else gb.Op("Mul", {"inv_sqrt2", "x"}, {"arg"});
    gb.Op("Erf", {"arg"}, {"f"});
  }
  gb.Op("Add", {"f", "one"}, {"t"});
  switch (f) {
    case Form::kErfMulHalfXt: gb.Op("Mul", {"x", "half"}, {"hx"}).Op("Mul", {"hx", "t"}, {"y"}); break;
    case Form::kErfXtHalfLast: gb.Op("Mul", {"t", "half"}, {"ht"}).Op("Mul", {"x", "ht"}, {"y"}); break;
    default: gb.Op("Mul", {"x", "t"}, {"xt"}).Op("Mul", {"xt", "half"}, {"y"}); break;
  }
  gb.Output("y");
  if (leak) gb.Output("t");
  return gb.Build();
}

TEST(FuseGelu, EveryExportedFormBecomesOneGeluWithTheSameOutputs) {
  for (Form f : {Form::kErfDivXtHalf, Form::kErfMulHalfXt, Form::kErfXtHalfLast, Form::kTanhPow, Form::kTanhMulMul}) {
    SCOPED_TRACE(static_cast<int>(f));
    const Graph g = GeluGraph(f);
    auto fused = Session::FromGraph(g);
    auto plain = Session::FromGraph(g, {.optimize = false});
    ASSERT_TRUE(fused.ok() && plain.ok());
    EXPECT_EQ(testing::CountOps(SessionGraph(**fused), "Gelu"), 1);
    EXPECT_EQ(testing::CountOps(SessionGraph(**fused), "Mul") + testing::CountOps(SessionGraph(**fused), "Erf") + testing::CountOps(SessionGraph(**fused), "Tanh"), 0);
    const Tensor x = RandomFloat({4, 37}, 3, -6.f, 6.f);
    auto a = (*fused)->Run({{"x", x}});
    auto b = (*plain)->Run({{"x", x}});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_LE(testing::MaxAbsDiff((*a)[0], (*b)[0]), 2e-6f);
  }
}

TEST(FuseGelu, AnIntermediateReadElsewhereStopsIt) {
  auto s = Session::FromGraph(GeluGraph(Form::kErfDivXtHalf, /*leak=*/true));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(testing::CountOps(SessionGraph(**s), "Gelu"), 0);
  EXPECT_EQ(testing::CountOps(SessionGraph(**s), "Erf"), 1);
}

TEST(FuseGelu, BundledTransformerRunsBothGelusFused) {
  auto s = Session::Load(std::string(WHITTLE_SOURCE_DIR) + "/models/transformer.onnx");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(testing::CountOps(SessionGraph(**s), "Gelu"), 2);
  EXPECT_EQ(testing::CountOps(SessionGraph(**s), "Erf"), 0);
}

}  // namespace
}  // namespace whittle
