// The two-layer graph the weight-only quantization tests (--int4, --int8 mode=weight-only) run on:
// x [batch, 64] -> Gemm(W1 [48, 64], transB, bias) named fc1 -> Relu -> MatMul(W2 [48, 20]) named
// fc2 -> y, seeded random weights.
#pragma once

#include "lib/ir/graph.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle::testing {

inline Graph WeightOnlyTwoLayers() {
  GraphBuilder b(17);
  AttributeMap tb;
  tb.Set("transB", Attribute::Int(1));
  b.Input("x", DType::kFloat32, {Dim::Symbol("batch"), 64})
      .Init("w1", RandomFloat({48, 64}, 1))
      .Init("b1", RandomFloat({48}, 2))
      .Init("w2", RandomFloat({48, 20}, 3));
  b.Op("Gemm", {"x", "w1", "b1"}, {"h"}, tb).Op("Relu", {"h"}, {"r"}).Op("MatMul", {"r", "w2"}, {"y"}).Output("y");
  Graph g = b.Build();
  g.nodes()[0].name = "fc1";
  g.nodes()[2].name = "fc2";
  return g;
}

}  // namespace whittle::testing
