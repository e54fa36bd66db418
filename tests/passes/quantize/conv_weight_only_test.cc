// --int8 mode=weight-only on Conv layers (passes/quantize/conv_weight_only.h): the bundled CNN's
// convs read int8 weights per output channel through DequantizeLinear(axis 0), activations stay
// float, the weights take about a quarter of the bytes, and the outputs stay close to the
// original's on real images.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "runtime/evaluate.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"
#include "whittle/session.h"

namespace whittle {
namespace {

TEST(ConvWeightOnly, CnnConvsReadInt8WeightsAndStayClose) {
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/cnn.onnx");
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(InferShapes(*g).ok());
  const Graph original = *g;
  auto opts = PassOptions::Parse("int8", "mode=weight-only,exclude=/fc1/Gemm,/fc2/Gemm");
  ASSERT_TRUE(opts.ok());
  auto pass = MakePass("int8", *opts);
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  PassManager pm;
  pm.Add(std::move(*pass));
  auto reports = pm.Run(&*g, PassContext{});
  ASSERT_TRUE(reports.ok()) << reports.status().message();
  int convs = 0;
  for (const LayerReport& l : (*reports)[0].layers) convs += l.action == "int8-weights";
  EXPECT_EQ(convs, 2);
  for (const Node& n : g->nodes()) {
    if (n.op_type != "Conv") continue;
    const int w = n.inputs[1];
    ASSERT_GE(g->value(w).producer, 0) << n.name;
    const Node& dq = g->nodes()[static_cast<size_t>(g->value(w).producer)];
    EXPECT_EQ(dq.op_type, "DequantizeLinear");
    EXPECT_EQ(dq.attrs.GetInt("axis", -1), 0);
    EXPECT_EQ(g->ConstInput(dq, 0)->dtype(), DType::kInt8);
  }
  EXPECT_EQ(::whittle::testing::CountOps(*g, "QuantizeLinear"), 0);  // activations stay float
  const int64_t saved = ComputeCost(original).param_bytes - ComputeCost(*g).param_bytes;
  // ~3 of every 4 conv weight bytes, less a float scale and an int8 zero point per channel.
  EXPECT_EQ(saved, (16 * 9 + 32 * 16 * 9) * 3 - (16 + 32) * 5);

  auto data = LoadDataset("fashion-mnist:test", 200);
  ASSERT_TRUE(data.ok());
  auto a = Session::FromGraph(original);
  auto b = Session::FromGraph(*g);
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = CompareOutputs(**a, **b, *data);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_GT(c->cosine, 0.9999);
  auto pa = PredictTop1(**a, *data), pb = PredictTop1(**b, *data);
  ASSERT_TRUE(pa.ok() && pb.ok());
  auto agree = CompareTop1(*pa, *pb);
  ASSERT_TRUE(agree.ok());
  EXPECT_GE(agree->accuracy, 0.99);
}

// method=gptq chooses each Conv's codes from its input statistics: per group (depthwise: per
// channel) for grouped convolutions. On correlated inputs its layer outputs are closer to the
// float ones than round-to-nearest's at the same scales (GPTQ's objective is that error).
TEST(ConvWeightOnly, GptqBeatsRoundToNearestOnDepthwiseGroupedAndPointwiseConvs) {
  auto attrs = [](int64_t group, int64_t pad) {
    AttributeMap a;
    a.Set("group", Attribute::Int(group));
    a.Set("pads", Attribute::Ints({pad, pad, pad, pad}));
    return a;
  };
  testing::GraphBuilder b;
  b.Input("x", DType::kFloat32, {Dim::Symbol("n"), 8, 12, 12})
      .Init("w_dw", testing::RandomFloat({8, 1, 3, 3}, 21, -1.f, 1.f))
      .Init("w_g2", testing::RandomFloat({8, 4, 3, 3}, 22, -1.f, 1.f))
      .Init("w_pw", testing::RandomFloat({16, 8, 1, 1}, 23, -1.f, 1.f))
      .Op("Conv", {"x", "w_dw"}, {"a"}, attrs(8, 1))
      .Op("Conv", {"a", "w_g2"}, {"c"}, attrs(2, 1))
      .Op("Conv", {"c", "w_pw"}, {"y"}, attrs(1, 0))
      .Output("a")
      .Output("c")
      .Output("y");
  Graph g = b.Build();
  ASSERT_TRUE(InferShapes(g).ok());
  // Smooth images (a 4x4 random grid, bilinearly upsampled) with mixed channels: neighbouring taps
  // and channels are correlated, as in real feature maps.
  const int64_t N = 48;
  Tensor grid = testing::RandomFloat({N, 8, 4, 4}, 24, -1.f, 1.f);
  std::vector<float> x(static_cast<size_t>(N * 8 * 144));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < 8; ++c)
      for (int64_t i = 0; i < 12; ++i)
        for (int64_t j = 0; j < 12; ++j) {
          const double fy = i * 3.0 / 11, fx = j * 3.0 / 11;
          const int64_t y0 = std::min<int64_t>(2, static_cast<int64_t>(fy)), x0 = std::min<int64_t>(2, static_cast<int64_t>(fx));
          const double ty = fy - y0, tx = fx - x0;
          auto at = [&](int64_t ch, int64_t yy, int64_t xx) { return grid.data<float>()[((n * 8 + ch) * 4 + yy) * 4 + xx]; };
          double v = 0;
          for (int64_t ch : {c, (c + 1) % 8})
            v += (1 - ty) * (1 - tx) * at(ch, y0, x0) + (1 - ty) * tx * at(ch, y0, x0 + 1) +
                 ty * (1 - tx) * at(ch, y0 + 1, x0) + ty * tx * at(ch, y0 + 1, x0 + 1);
          x[static_cast<size_t>(((n * 8 + c) * 12 + i) * 12 + j)] = static_cast<float>(v);
        }
  Dataset d;
  d.inputs = Tensor::FromVector<float>({N, 8, 12, 12}, x);
  d.description = "smooth";
  auto quantized = [&](const std::string& spec, std::vector<std::string>* details) {
    Graph q = g;
    auto opts = PassOptions::Parse("int8", spec);
    EXPECT_TRUE(opts.ok());
    auto pass = MakePass("int8", *opts);
    EXPECT_TRUE(pass.ok()) << pass.status().message();
    PassManager pm;
    pm.Add(std::move(*pass));
    PassContext ctx;
    ctx.calibration = &d;
    auto reports = pm.Run(&q, ctx);
    EXPECT_TRUE(reports.ok()) << reports.status().message();
    if (reports.ok())
      for (const LayerReport& l : (*reports)[0].layers) details->push_back(l.detail);
    return q;
  };
  std::vector<std::string> rtn_details, gptq_details;
  const Graph rtn = quantized("mode=weight-only", &rtn_details);
  const Graph gptq = quantized("mode=weight-only,method=gptq", &gptq_details);
  ASSERT_EQ(gptq_details.size(), 3u);
  for (const std::string& s : gptq_details) EXPECT_NE(s.find("(GPTQ)"), std::string::npos) << s;
  for (const std::string& s : rtn_details) EXPECT_EQ(s.find("GPTQ"), std::string::npos) << s;
  auto run = [&](const Graph& m) {
    auto s = Session::FromGraph(m);
    EXPECT_TRUE(s.ok());
    auto out = (*s)->Run({{"x", d.inputs}});
    EXPECT_TRUE(out.ok());
    return *out;
  };
  const std::vector<Tensor> ref = run(g), r = run(rtn), q = run(gptq);
  // Each layer's own error: its float input is the same in all three models only for the first
  // Conv, so compare the first output directly and the later ones through the whole stack.
  for (size_t o = 0; o < ref.size(); ++o) {
    double er = 0, eq = 0;
    for (int64_t i = 0; i < ref[o].numel(); ++i) {
      const double a = ref[o].data<float>()[i];
      er += (r[o].data<float>()[i] - a) * (r[o].data<float>()[i] - a);
      eq += (q[o].data<float>()[i] - a) * (q[o].data<float>()[i] - a);
    }
    EXPECT_GT(er, 0) << "output " << o;
    EXPECT_LT(eq, 0.8 * er) << "output " << o << ": GPTQ squared error " << eq << ", round to nearest " << er;
  }
  // Without calibration data GPTQ is refused with the reason.
  Graph none = g;
  auto opts = PassOptions::Parse("int8", "mode=weight-only,method=gptq");
  ASSERT_TRUE(opts.ok());
  auto pass = MakePass("int8", *opts);
  ASSERT_TRUE(pass.ok());
  auto st = (*pass)->Run(none, PassContext{});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("calibration"), std::string::npos) << st.status().message();
}

}  // namespace
}  // namespace whittle
