// Whitened (data-aware) SVD: at the same rank, the factorized layer's output error on the data
// is smaller than plain SVD's, because the truncation is of W·(input statistics) instead of W.
#include <gtest/gtest.h>

#include "lib/data/dataset.h"
#include "tests/passes/pass_test_util.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

using testing::GraphBuilder;
using testing::RandomFloat;

Graph Linear() {
  AttributeMap tb;
  tb.Set("transB", Attribute::Int(1));
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("N"), 32})
                .Init("w", RandomFloat({24, 32}, 5))
                .Init("b", RandomFloat({24}, 6))
                .Op("Gemm", {"x", "w", "b"}, {"y"}, tb)
                .Output("y")
                .Build();
  g.nodes()[0].name = "fc";
  WH_CHECK(InferShapes(g).ok());
  return g;
}

// Inputs x = z·M with M scaling a few directions up strongly: the weight directions that matter
// for the output are not the ones with the largest singular values of W.
Tensor Anisotropic(int64_t n, uint32_t seed) {
  Tensor z = RandomFloat({n, 32}, seed);
  Tensor m = RandomFloat({32, 32}, 99);
  for (int64_t i = 0; i < 32; ++i)
    for (int64_t j = 0; j < 32; ++j) m.data<float>()[i * 32 + j] *= (i < 4 ? 20.f : 0.3f);
  Tensor x(DType::kFloat32, {n, 32});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < 32; ++j) {
      float s = 0;
      for (int64_t k = 0; k < 32; ++k) s += z.data<float>()[r * 32 + k] * m.data<float>()[k * 32 + j];
      x.data<float>()[r * 32 + j] = s;
    }
  return x;
}


TEST(SvdWhiten, SmallerOutputErrorThanPlainSvdAtTheSameRank) {
  const Graph original = Linear();
  auto calib = MakeDataset(Anisotropic(512, 1), Tensor(), "anisotropic");
  ASSERT_TRUE(calib.ok());
  PassContext ctx;
  ctx.calibration = &*calib;
  const Tensor test = Anisotropic(256, 2);  // held-out data from the same distribution
  Graph plain = original, white = original;
  ASSERT_TRUE(testing::RunPass(plain, "svd", "rank=4,round=1,whiten=0", ctx).ok());
  auto r = testing::RunPass(white, "svd", "rank=4,round=1", ctx);  // whitening is the default with data
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->layers.size(), 1u);
  EXPECT_NE(r->layers[0].detail.find("whitened"), std::string::npos) << r->layers[0].detail;
  const double e_plain = testing::OutputMse(original, plain, "x", test), e_white = testing::OutputMse(original, white, "x", test);
  EXPECT_LT(e_white, 0.5 * e_plain) << "whitened " << e_white << " vs plain " << e_plain;
}

TEST(SvdWhiten, NeedsCalibrationData) {
  Graph g = Linear();
  auto r = testing::RunPass(g, "svd", "rank=4,whiten=1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("whiten=1"), std::string::npos) << r.status().message();
  Graph h = Linear();
  EXPECT_TRUE(testing::RunPass(h, "svd", "rank=4,whiten=0").ok());
}

}  // namespace
}  // namespace whittle
