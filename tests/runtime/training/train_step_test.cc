// The training engine (runtime/training): one distillation step of the bundled MLP, CNN and
// transformer against PyTorch (loss and every parameter gradient, reference written by
// tests/tools/torch_train_step_reference.py), each gradient rule against finite differences of the
// loss, the optimizer against hand-computed updates, and the errors a user can run into.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "lib/data/npy.h"
#include "lib/ir/binary_format.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/binarize/binarize_pass.h"
#include "passes/circulant/circulant_pass.h"
#include "passes/cluster/cluster_pass.h"
#include "runtime/training/autodiff.h"
#include "runtime/training/trainer.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle::training {
namespace {

using ::whittle::testing::GraphBuilder;
using ::whittle::testing::RandomFloat;

std::string Src(const std::string& rel) { return std::string(WHITTLE_SOURCE_DIR) + "/" + rel; }

Graph Load(const std::string& rel) {
  auto g = LoadModel(Src(rel));
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : Graph();
}

// Max |a - b| over max |b| (0 when b is all zeros and a equals it).
double RelDiff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.dims(), b.dims());
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < b.numel() && i < a.numel(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(b.data<float>()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The transformer's reference gradients are stored sampled (every stride-th element of the
// flattened gradient, stride = ceil(numel / 512)) with their L2 norms (grad_norm_<param>.npy).
Tensor Sampled(const Tensor& g, int64_t count) {
  const int64_t stride = (g.numel() + 511) / 512;
  Tensor s(DType::kFloat32, {count});
  for (int64_t i = 0; i < count; ++i) s.data<float>()[i] = i * stride < g.numel() ? g.data<float>()[i * stride] : NAN;
  return s;
}

double Norm(const Tensor& g) {
  double s = 0;
  for (int64_t i = 0; i < g.numel(); ++i) s += static_cast<double>(g.data<float>()[i]) * g.data<float>()[i];
  return std::sqrt(s);
}

TEST(TrainStep, BundledModelsMatchPyTorch) {
  RegisterAllOps();
  for (const auto& [student, teacher] : std::vector<std::pair<std::string, std::string>>{
           {"mlp", "cnn"}, {"cnn", "mlp"}, {"transformer", "mlp"}}) {
    SCOPED_TRACE(student);
    const std::string dir = Src("tests/data/train_step/" + student + "/");
    auto x = ReadNpy(dir + "x.npy");
    auto labels = ReadNpy(dir + "labels.npy");
    auto loss = ReadNpy(dir + "loss.npy");
    ASSERT_TRUE(x.ok() && labels.ok() && loss.ok());
    TrainOptions o;
    o.alpha = 0.5f;
    o.temperature = 4.f;
    const Graph t = Load("models/" + teacher + ".onnx");
    auto tr = Trainer::Create(Load("models/" + student + ".onnx"), &t, o);
    ASSERT_TRUE(tr.ok()) << tr.status().message();
    std::vector<Tensor> grads;
    auto r = (*tr)->Gradients(*x, *labels, &grads);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const double want = loss->data<double>()[0];
    EXPECT_NEAR(r->loss, want, 1e-4 * std::fabs(want));
    ASSERT_EQ(grads.size(), (*tr)->params().size());
    ASSERT_GE(grads.size(), 6u);  // every weight and bias of the model
    for (size_t k = 0; k < grads.size(); ++k) {
      SCOPED_TRACE((*tr)->params()[k]);
      auto ref = ReadNpy(dir + "grad_" + (*tr)->params()[k] + ".npy");
      ASSERT_TRUE(ref.ok()) << ref.status().message();
      auto norm = ReadNpy(dir + "grad_norm_" + (*tr)->params()[k] + ".npy");
      if (norm.ok()) {  // sampled
        EXPECT_LT(RelDiff(Sampled(grads[k], ref->numel()), *ref), 1e-4);
        EXPECT_NEAR(Norm(grads[k]), norm->data<double>()[0], 1e-4 * norm->data<double>()[0]);
      } else {
        EXPECT_LT(RelDiff(grads[k], *ref), 1e-4);
      }
    }
    if (student == "transformer") {
      EXPECT_EQ(grads.size(), 31u);  // every initializer of the model
    }
  }
}

// The exported transformer (Shape/Gather/Concat/Reshape plumbing, LayerNormalization, attention,
// erf-GELU, ReduceMean) trains: a few optimizer steps on one batch lower its loss.
TEST(TrainStep, TransformerTakesOptimizerSteps) {
  RegisterAllOps();
  const std::string dir = Src("tests/data/train_step/transformer/");
  auto x = ReadNpy(dir + "x.npy");
  auto labels = ReadNpy(dir + "labels.npy");
  ASSERT_TRUE(x.ok() && labels.ok());
  TrainOptions o;
  o.alpha = 0;
  o.optimizer = OptimizerKind::kAdamW;
  o.lr = 1e-3f;
  o.scale_lr = false;
  o.cosine = false;
  o.warmup_fraction = 0;
  auto tr = Trainer::Create(Load("models/transformer.onnx"), nullptr, o);
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  double first = 0, last = 0;
  for (int step = 0; step < 4; ++step) {
    auto r = (*tr)->Step(*x, *labels, step, 4);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_TRUE(std::isfinite(r->loss));
    if (step == 0) first = r->loss;
    last = r->loss;
  }
  EXPECT_LT(last, first);
}

// Central finite differences of the loss (double accumulation of float32 logits) for a few
// elements of every param, against the training graph's gradients.
void ExpectGradientsMatchFiniteDifferences(const Graph& model, const Tensor& x, const Tensor& labels,
                                           const Graph* teacher = nullptr, float alpha = 0.f,
                                           const TrainOptions& base = TrainOptions()) {
  TrainOptions o = base;
  o.alpha = alpha;
  auto tr = Trainer::Create(model, teacher, o);
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  Trainer& t = **tr;
  std::vector<Tensor> grads;
  auto first = t.Gradients(x, labels, &grads);
  ASSERT_TRUE(first.ok()) << first.status().message();
  for (size_t k = 0; k < grads.size(); ++k) {
    SCOPED_TRACE(t.params()[k]);
    Tensor& p = t.param_values()[k];
    const int64_t n = p.numel();
    for (int64_t i : {int64_t{0}, n / 3, n / 2, n - 1}) {
      const float keep = p.data<float>()[i];
      // Small enough that no Relu or max-pool choice flips between keep - h and keep + h here.
      const float h = 1e-3f * std::max(1.f, std::fabs(keep));
      std::vector<Tensor> unused;
      p.data<float>()[i] = keep + h;
      auto up = t.Gradients(x, labels, &unused);
      p.data<float>()[i] = keep - h;
      auto down = t.Gradients(x, labels, &unused);
      p.data<float>()[i] = keep;
      ASSERT_TRUE(up.ok() && down.ok());
      const double fd = (up->loss - down->loss) / (2.0 * h);
      const double g = grads[k].data<float>()[i];
      EXPECT_NEAR(g, fd, 2e-3 + 2e-2 * std::fabs(fd)) << "element " << i;
    }
  }
}

Tensor Labels(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); }

AttributeMap Attrs(std::initializer_list<std::pair<std::string, Attribute>> l) {
  AttributeMap a;
  for (const auto& [k, v] : l) a.Set(k, v);
  return a;
}

TEST(TrainStep, GemmRulesEveryTransposeAndBiasShape) {
  RegisterAllOps();
  for (int ta : {0, 1})
    for (int tb : {0, 1})
      for (int bias : {0, 1, 2}) {  // [N], [1, N], [B, N]
        SCOPED_TRACE("transA " + std::to_string(ta) + " transB " + std::to_string(tb) + " bias " + std::to_string(bias));
        const int64_t B = 3, K = 5, N = 4;
        // A = x + a0 (a param, so A has a gradient), transposed when transA.
        const Dims ad{B, K};
        GraphBuilder gb(13);
        gb.Input("x", DType::kFloat32, ToSymShape(ad))
            .Init("a0", RandomFloat({1, K}, 1))
            .Op("Add", {"x", "a0"}, {"h0"})
            .Init("w", RandomFloat(tb ? Dims{N, K} : Dims{K, N}, 2));
        if (ta) gb.Op("Transpose", {"h0"}, {"h"}, Attrs({{"perm", Attribute::Ints({1, 0})}}));
        else gb.Op("Identity", {"h0"}, {"h"});
        const Dims bd = bias == 0 ? Dims{N} : bias == 1 ? Dims{1, N} : Dims{B, N};
        gb.Init("b", RandomFloat(bd, 3));
        gb.Op("Gemm", {"h", "w", "b"}, {"z"},
              Attrs({{"transA", Attribute::Int(ta)}, {"transB", Attribute::Int(tb)}, {"alpha", Attribute::Float(0.7f)},
                     {"beta", Attribute::Float(1.3f)}}));
        gb.Output("z");
        Graph g = gb.Build();
        ExpectGradientsMatchFiniteDifferences(g, RandomFloat(ad, 4), Labels({0, 3, 1}));
      }
}

TEST(TrainStep, ConvPoolFlattenAddRulesAndDistillation) {
  RegisterAllOps();
  // Conv (stride 1, pad 1, bias) -> Relu -> MaxPool 2x2 -> Flatten -> MatMul -> Add(bias) -> Sub(const)
  // -> logits, trained against a teacher with alpha 0.5.
  auto build = [](uint32_t seed) {
    return GraphBuilder(13)
        .Input("image", DType::kFloat32, {Dim::Symbol("batch"), 2, 6, 6})
        .Init("cw", RandomFloat({3, 2, 3, 3}, seed))
        .Init("cb", RandomFloat({3}, seed + 1))
        .Init("fw", RandomFloat({27, 5}, seed + 2))
        .Init("fb", RandomFloat({5}, seed + 3))
        .Init("shift", RandomFloat({1, 5}, seed + 4))
        .Op("Conv", {"image", "cw", "cb"}, {"c"}, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
        .Op("Relu", {"c"}, {"r"})
        .Op("MaxPool", {"r"}, {"p"}, Attrs({{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}}))
        .Op("Flatten", {"p"}, {"f"})
        .Op("MatMul", {"f", "fw"}, {"m"})
        .Op("Add", {"m", "fb"}, {"a"})
        .Op("Sub", {"a", "shift"}, {"logits"})
        .Output("logits")
        .Build();
  };
  const Graph student = build(10), teacher = build(20);
  ExpectGradientsMatchFiniteDifferences(student, RandomFloat({4, 2, 6, 6}, 5, 0.f, 1.f), Labels({1, 4, 0, 2}), &teacher,
                                        0.5f);
}

TEST(TrainStep, ActivationNormPoolAndElementwiseRules) {
  RegisterAllOps();
  // Conv -> BatchNormalization (frozen statistics; scale and bias train) -> HardSwish -> Conv ->
  // LeakyRelu -> GlobalAveragePool -> Flatten -> Gemm -> Sigmoid -> Mul(scale [5]) -> Tanh ->
  // Div(const) -> Clip(-0.9, 0.9) -> logits, distilled from a teacher.
  auto build = [](uint32_t seed) {
    return GraphBuilder(13)
        .Input("image", DType::kFloat32, {Dim::Symbol("batch"), 2, 5, 5})
        .Init("w1", RandomFloat({4, 2, 3, 3}, seed))
        .Init("bn_scale", RandomFloat({4}, seed + 1, 0.5f, 1.5f))
        .Init("bn_bias", RandomFloat({4}, seed + 2))
        .Init("bn_mean", RandomFloat({4}, seed + 3, -0.2f, 0.2f))
        .Init("bn_var", RandomFloat({4}, seed + 4, 0.5f, 2.f))
        .Init("w2", RandomFloat({6, 4, 3, 3}, seed + 5))
        .Init("fw", RandomFloat({5, 6}, seed + 6))
        .Init("fb", RandomFloat({5}, seed + 7))
        .Init("gamma", RandomFloat({5}, seed + 8, 0.5f, 2.f))
        .Init("div", Tensor::Scalar<float>(1.5f))
        .Init("lo", Tensor::Scalar<float>(-0.9f))
        .Init("hi", Tensor::Scalar<float>(0.9f))
        .Op("Conv", {"image", "w1"}, {"c1"}, Attrs({{"pads", Attribute::Ints({1, 1, 1, 1})}}))
        .Op("BatchNormalization", {"c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"bn"},
            Attrs({{"epsilon", Attribute::Float(1e-3f)}}))
        .Op("HardSwish", {"bn"}, {"hs"})
        .Op("Conv", {"hs", "w2"}, {"c2"}, Attrs({{"strides", Attribute::Ints({2, 2})}}))
        .Op("LeakyRelu", {"c2"}, {"lr"}, Attrs({{"alpha", Attribute::Float(0.1f)}}))
        .Op("GlobalAveragePool", {"lr"}, {"gap"})
        .Op("Flatten", {"gap"}, {"f"})
        .Op("Gemm", {"f", "fw", "fb"}, {"g"}, Attrs({{"transB", Attribute::Int(1)}}))
        .Op("Sigmoid", {"g"}, {"s"})
        .Op("Mul", {"s", "gamma"}, {"m"})
        .Op("Tanh", {"m"}, {"t"})
        .Op("Div", {"t", "div"}, {"d"})
        .Op("Clip", {"d", "lo", "hi"}, {"logits"})
        .Output("logits")
        .Build();
  };
  const Graph student = build(30), teacher = build(40);
  ExpectGradientsMatchFiniteDifferences(student, RandomFloat({3, 2, 5, 5}, 6, -2.f, 2.f), Labels({1, 4, 0}), &teacher,
                                        0.3f);
}

// A QDQ student (int8 per-channel weight, int32 bias, as --int8 writes them) trains its float
// latent copies behind fake quantization: at the start the gradients equal those of the float
// model with the dequantized weights, the straight-through gradient is 0 where the quantization
// saturates, and the exported model stores int8/int32 again with the same scales.
TEST(TrainStep, QuantizedWeightsTrainBehindFakeQuantization) {
  RegisterAllOps();
  const int64_t K = 6, N = 4;
  Tensor wq(DType::kInt8, {K, N});
  for (int64_t i = 0; i < wq.numel(); ++i) wq.data<int8_t>()[i] = static_cast<int8_t>((i * 37) % 120 - 60);
  const Tensor ws = Tensor::FromVector<float>({N}, {0.01f, 0.02f, 0.015f, 0.03f});
  const Tensor bq = Tensor::FromVector<int32_t>({N}, {100, -50, 7, 0});
  const Tensor bs = Tensor::FromVector<float>({N}, {0.001f, 0.002f, 0.0015f, 0.003f});
  Graph qdq = GraphBuilder(13)
                  .Input("x", DType::kFloat32, {Dim::Symbol("batch"), K})
                  .Init("wq", wq).Init("ws", ws).Init("wz", Tensor(DType::kInt8, {N}))
                  .Init("bq", bq).Init("bs", bs).Init("bz", Tensor(DType::kInt32, {N}))
                  .Op("DequantizeLinear", {"wq", "ws", "wz"}, {"w"}, Attrs({{"axis", Attribute::Int(1)}}))
                  .Op("DequantizeLinear", {"bq", "bs", "bz"}, {"b"}, Attrs({{"axis", Attribute::Int(0)}}))
                  .Op("MatMul", {"x", "w"}, {"m"})
                  .Op("Add", {"m", "b"}, {"z"})
                  .Output("z")
                  .Build();
  std::memset(qdq.value(qdq.FindValue("wz")).initializer->raw_data(), 0, N);
  std::memset(qdq.value(qdq.FindValue("bz")).initializer->raw_data(), 0, 4 * N);
  // The float twin: the dequantized values as float weights.
  Tensor wf(DType::kFloat32, {K, N}), bf(DType::kFloat32, {N});
  for (int64_t i = 0; i < wf.numel(); ++i) wf.data<float>()[i] = wq.data<int8_t>()[i] * ws.data<float>()[i % N];
  for (int64_t i = 0; i < N; ++i) bf.data<float>()[i] = static_cast<float>(bq.data<int32_t>()[i]) * bs.data<float>()[i];
  Graph fl = GraphBuilder(13)
                 .Input("x", DType::kFloat32, {Dim::Symbol("batch"), K})
                 .Init("w", wf).Init("b", bf)
                 .Op("MatMul", {"x", "w"}, {"m"})
                 .Op("Add", {"m", "b"}, {"z"})
                 .Output("z")
                 .Build();
  TrainOptions o;
  o.alpha = 0;
  o.refresh_weight_scales = false;  // the model's scales, fixed (the live ones: below)
  auto tq = Trainer::Create(qdq, nullptr, o);
  auto tf = Trainer::Create(fl, nullptr, o);
  ASSERT_TRUE(tq.ok()) << tq.status().message();
  ASSERT_TRUE(tf.ok()) << tf.status().message();
  ASSERT_EQ((*tq)->params().size(), 2u);
  const Tensor x = RandomFloat({5, K}, 9);
  const Tensor y = Labels({0, 1, 2, 3, 1});
  std::vector<Tensor> gq, gf;
  auto rq = (*tq)->Gradients(x, y, &gq);
  auto rf = (*tf)->Gradients(x, y, &gf);
  ASSERT_TRUE(rq.ok() && rf.ok());
  EXPECT_NEAR(rq->loss, rf->loss, 1e-6);
  // Params in the same order (weight, bias) in both; compare by shape.
  for (const Tensor& g : gq) {
    const Tensor& twin = g.dims() == gf[0].dims() ? gf[0] : gf[1];
    EXPECT_LT(RelDiff(g, twin), 1e-6);
  }
  // Saturation: a latent weight pushed past the int8 range gets no gradient.
  const size_t wk = (*tq)->param_values()[0].rank() == 2 ? 0 : 1;
  (*tq)->param_values()[wk].data<float>()[0] = 200.f * ws.data<float>()[0];
  ASSERT_TRUE((*tq)->Gradients(x, y, &gq).ok());
  EXPECT_EQ(gq[wk].data<float>()[0], 0.f);
  EXPECT_NE(gq[wk].data<float>()[1], 0.f);
  // Export: int8 and int32 again, the same ops, the saturated weight at 127.
  const Graph out = (*tq)->CurrentModel();
  ASSERT_EQ(out.nodes().size(), qdq.nodes().size());
  for (size_t i = 0; i < out.nodes().size(); ++i) EXPECT_EQ(out.nodes()[i].op_type, qdq.nodes()[i].op_type);
  const Tensor& wout = *out.value(out.FindValue("wq")).initializer;
  ASSERT_EQ(wout.dtype(), DType::kInt8);
  EXPECT_EQ(wout.data<int8_t>()[0], 127);
  for (int64_t i = 1; i < wout.numel(); ++i) EXPECT_EQ(wout.data<int8_t>()[i], wq.data<int8_t>()[i]) << i;
  const Tensor& bout = *out.value(out.FindValue("bq")).initializer;
  ASSERT_EQ(bout.dtype(), DType::kInt32);
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(bout.data<int32_t>()[i], bq.data<int32_t>()[i]);

  // Live scales (the default): re-estimated from the latent weights every step. At the start
  // they are the model's (the largest |q| of each channel maps back to itself), so the
  // gradients are the float twin's again; a weight pushed to 200 s widens its channel's scale
  // instead of saturating, and the export re-quantizes that channel and its bias with it.
  o.refresh_weight_scales = true;
  auto tl = Trainer::Create(qdq, nullptr, o);
  ASSERT_TRUE(tl.ok()) << tl.status().message();
  std::vector<Tensor> gl;
  auto rl = (*tl)->Gradients(x, y, &gl);
  ASSERT_TRUE(rl.ok()) << rl.status().message();
  EXPECT_NEAR(rl->loss, rf->loss, 1e-6);
  for (const Tensor& g : gl) EXPECT_LT(RelDiff(g, g.dims() == gf[0].dims() ? gf[0] : gf[1]), 1e-6);
  const size_t lk = (*tl)->param_values()[0].rank() == 2 ? 0 : 1;
  (*tl)->param_values()[lk].data<float>()[0] = 200.f * ws.data<float>()[0];
  ASSERT_TRUE((*tl)->Gradients(x, y, &gl).ok());
  EXPECT_NE(gl[lk].data<float>()[0], 0.f);  // inside the widened range: no saturation
  const Graph lo = (*tl)->CurrentModel();
  int8_t level0 = 0;  // the largest |q| of channel 0 (column 0 of wq [K, N], axis 1)
  for (int64_t k = 0; k < K; ++k) level0 = std::max<int8_t>(level0, static_cast<int8_t>(std::abs(wq.data<int8_t>()[k * N])));
  const float s0 = 200.f * ws.data<float>()[0] / level0;
  const Tensor& ws_out = *lo.value(lo.FindValue("ws")).initializer;
  const Tensor& bs_out = *lo.value(lo.FindValue("bs")).initializer;
  EXPECT_NEAR(ws_out.data<float>()[0], s0, 1e-7);
  EXPECT_NEAR(bs_out.data<float>()[0], bs.data<float>()[0] * s0 / ws.data<float>()[0], 1e-9);
  const Tensor& wl = *lo.value(lo.FindValue("wq")).initializer;
  EXPECT_EQ(wl.data<int8_t>()[0], level0);
  for (int64_t k = 1; k < K; ++k)  // channel 0's other weights on the wider grid
    EXPECT_EQ(wl.data<int8_t>()[k * N], static_cast<int8_t>(std::nearbyint(wq.data<int8_t>()[k * N] * ws.data<float>()[0] / s0)));
  for (int64_t c = 1; c < N; ++c) {  // the other channels as they were
    EXPECT_FLOAT_EQ(ws_out.data<float>()[c], ws.data<float>()[c]);
    EXPECT_FLOAT_EQ(bs_out.data<float>()[c], bs.data<float>()[c]);
    for (int64_t k = 0; k < K; ++k) EXPECT_EQ(wl.data<int8_t>()[k * N + c], wq.data<int8_t>()[k * N + c]);
  }
  const Tensor& bl = *lo.value(lo.FindValue("bq")).initializer;
  EXPECT_EQ(bl.data<int32_t>()[0], static_cast<int32_t>(std::nearbyint(bq.data<int32_t>()[0] * ws.data<float>()[0] / s0)));
}

// The feature (hint) loss: weight * mean((s - t)^2) between a student and a teacher tensor, its
// gradient against finite differences of the whole loss, and its errors.
TEST(TrainStep, HintLossGradientsAndErrors) {
  RegisterAllOps();
  auto mlp = [](uint32_t seed) {
    return GraphBuilder(13)
        .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 6})
        .Init("w1", RandomFloat({6, 5}, seed))
        .Init("w2", RandomFloat({5, 3}, seed + 1))
        .Op("MatMul", {"x", "w1"}, {"h"})
        .Op("Relu", {"h"}, {"r"})
        .Op("MatMul", {"r", "w2"}, {"z"})
        .Output("z")
        .Build();
  };
  const Graph student = mlp(31), teacher = mlp(41);
  const Tensor x = RandomFloat({4, 6}, 12);
  const Tensor y = Labels({0, 2, 1, 2});
  TrainOptions o;
  o.hints = {{"h", "h"}, {"r", "r"}};
  o.hint_weight = 0.7f;
  ExpectGradientsMatchFiniteDifferences(student, x, y, &teacher, 0.5f, o);
  // The hint term is in the loss: the same step without hints has a smaller one.
  TrainOptions plain;
  plain.alpha = 0.5f;
  o.alpha = 0.5f;
  auto with = Trainer::Create(student, &teacher, o);
  auto without = Trainer::Create(student, &teacher, plain);
  ASSERT_TRUE(with.ok() && without.ok());
  std::vector<Tensor> g1, g2;
  auto r1 = (*with)->Gradients(x, y, &g1);
  auto r2 = (*without)->Gradients(x, y, &g2);
  ASSERT_TRUE(r1.ok() && r2.ok()) << r1.status().message();
  EXPECT_GT(r1->loss, r2->loss + 1e-3);
  // Errors: unknown tensors on either side, a tensor off the path, shapes that differ.
  TrainOptions bad = o;
  bad.hints = {{"nope", "h"}};
  EXPECT_NE(Trainer::Create(student, &teacher, bad).status().message().find("no tensor 'nope'"), std::string::npos);
  bad.hints = {{"h", "nope"}};
  EXPECT_NE(Trainer::Create(student, &teacher, bad).status().message().find("teacher has no tensor"), std::string::npos);
  bad.hints = {{"x", "x"}};
  EXPECT_NE(Trainer::Create(student, &teacher, bad).status().message().find("between the trainable weights"),
            std::string::npos);
  bad.hints = {{"h", "z"}};  // [4, 5] against [4, 3]
  auto mismatch = Trainer::Create(student, &teacher, bad);
  ASSERT_TRUE(mismatch.ok()) << mismatch.status().message();
  auto r = (*mismatch)->Gradients(x, y, &g1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("differ"), std::string::npos) << "msg: " << r.status().message();
}

// x [batch, in] -> Gemm (hidden, bias) -> Tanh -> MatMul (4 outputs): the two-layer student the
// compressed-layer tests compress (weights from seeds seed, seed + 1, seed + 2).
Graph GemmTanhMatMul(int64_t in, int64_t hidden, uint32_t seed) {
  return GraphBuilder(13)
      .Input("x", DType::kFloat32, {Dim::Symbol("batch"), in})
      .Init("w1", RandomFloat({hidden, in}, seed))
      .Init("b1", RandomFloat({hidden}, seed + 1))
      .Init("w2", RandomFloat({hidden, 4}, seed + 2))
      .Op("Gemm", {"x", "w1", "b1"}, {"h"}, Attrs({{"transB", Attribute::Int(1)}}))
      .Op("Tanh", {"h"}, {"t"})
      .Op("MatMul", {"t", "w2"}, {"z"})
      .Output("z")
      .Build();
}

// Weight-shared layers (--cluster) train their codebooks and biases, the assignment fixed: the
// gradients against finite differences, and the export is the same CodebookMatMul graph.
TEST(TrainStep, CodebookLayersTrainTheirCodebooks) {
  RegisterAllOps();
  Graph g = GemmTanhMatMul(7, 9, 51);
  const Graph teacher = g;
  auto pass = MakeClusterPass(*PassOptions::Parse("cluster", "k=5"));
  ASSERT_TRUE(pass.ok());
  PassContext ctx;
  ASSERT_TRUE((*pass)->Run(g, ctx).ok());
  ASSERT_EQ(::whittle::testing::CountOps(g, "CodebookMatMul"), 2);
  ExpectGradientsMatchFiniteDifferences(g, RandomFloat({5, 7}, 54), Labels({0, 3, 1, 2, 3}), &teacher, 0.5f);
  TrainOptions o;
  o.alpha = 0;
  auto tr = Trainer::Create(g, nullptr, o);
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  EXPECT_EQ((*tr)->params().size(), 3u);  // two codebooks and the bias
  for (const Tensor& p : (*tr)->param_values()) EXPECT_LE(p.numel(), 9);
  ASSERT_TRUE((*tr)->Step(RandomFloat({5, 7}, 54), Labels({0, 3, 1, 2, 3}), 0, 10).ok());
  const Graph out = (*tr)->CurrentModel();
  EXPECT_EQ(::whittle::testing::CountOps(out, "CodebookMatMul"), 2);
  bool changed = false;
  for (const Node& n : out.nodes())
    if (n.op_type == "CodebookMatMul") {
      const Tensor* after = out.ConstInput(n, 1);
      const int bv = g.FindValue(out.value(n.inputs[1]).name);
      ASSERT_GE(bv, 0);
      const Tensor* before = g.value(bv).initializer ? &*g.value(bv).initializer : nullptr;
      ASSERT_TRUE(before && after);
      for (int64_t i = 0; i < after->numel(); ++i) changed = changed || after->data<float>()[i] != before->data<float>()[i];
    }
  EXPECT_TRUE(changed);
}

// Binarized layers (--binarize, float activations) train as latent weights behind a
// straight-through sign times a trained alpha: at step 0 the loss is the binarized model's, the
// latent's gradient is the effective weight's times alpha, alpha's is the sum of the effective
// weight's gradient times the signs, and the export packs the latent's signs into the bits.
TEST(TrainStep, BinaryLayersTrainLatentWeightsThroughTheSign) {
  RegisterAllOps();
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 2, 5, 5})
                .Init("wc", RandomFloat({4, 2, 3, 3}, 61))
                .Init("bc", RandomFloat({4}, 62))
                .Init("w1", RandomFloat({6, 36}, 63))
                .Init("b1", RandomFloat({6}, 64))
                .Init("w2", RandomFloat({6, 3}, 65))
                .Op("Conv", {"x", "wc", "bc"}, {"c"}, Attrs({{"kernel_shape", Attribute::Ints({3, 3})}}))
                .Op("Relu", {"c"}, {"r"})
                .Op("Flatten", {"r"}, {"f"})
                .Op("Gemm", {"f", "w1", "b1"}, {"h"}, Attrs({{"transB", Attribute::Int(1)}}))
                .Op("Tanh", {"h"}, {"t"})
                .Op("MatMul", {"t", "w2"}, {"z"})
                .Output("z")
                .Build();
  g.nodes()[0].name = "conv";
  g.nodes()[3].name = "fc";
  auto pass = MakeBinarizePass(*PassOptions::Parse("binarize", "include=conv"));
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  Graph b = g;
  PassContext ctx;
  ASSERT_TRUE((*pass)->Run(b, ctx).ok());
  ASSERT_EQ(::whittle::testing::CountOps(b, "BinaryConv"), 1);
  ASSERT_EQ(::whittle::testing::CountOps(b, "BinaryMatMul"), 1);
  // The float twin: the same layers with sign * alpha as float weights.
  Graph twin = g;
  for (const Node& n : b.nodes()) {
    if (n.domain != kWhittleDomain) continue;
    const Tensor& bits = *b.ConstInput(n, 1);
    const Tensor& alpha = *b.ConstInput(n, 2);
    const std::string wname = n.op_type == "BinaryConv" ? "wc" : "w1";
    Tensor w = twin.value(twin.FindValue(wname)).initializer->Clone();
    const int64_t rows = w.dim(0), k = w.numel() / rows, words = BinaryWords(k);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < k; ++i)
        w.data<float>()[r * k + i] = (BinaryBit(bits.data<uint64_t>() + r * words, i) ? 1.f : -1.f) * alpha.data<float>()[r];
    twin.value(twin.FindValue(wname)).initializer = w;
  }
  const Tensor x = RandomFloat({3, 2, 5, 5}, 66);
  const Tensor y = Labels({0, 2, 1});
  TrainOptions o;
  o.alpha = 0;
  auto tb = Trainer::Create(b, nullptr, o);
  auto tt = Trainer::Create(twin, nullptr, o);
  ASSERT_TRUE(tb.ok()) << tb.status().message();
  ASSERT_TRUE(tt.ok()) << tt.status().message();
  std::vector<Tensor> gb, gt;
  auto rb = (*tb)->Gradients(x, y, &gb);
  auto rt = (*tt)->Gradients(x, y, &gt);
  ASSERT_TRUE(rb.ok() && rt.ok()) << rb.status().message();
  EXPECT_NEAR(rb->loss, rt->loss, 1e-6);
  auto grad_of = [](Trainer& t, std::vector<Tensor>& gs, const std::string& name) -> const Tensor* {
    for (size_t i = 0; i < t.params().size(); ++i)
      if (t.params()[i] == name) return &gs[i];
    return nullptr;
  };
  for (const Node& n : b.nodes()) {
    if (n.domain != kWhittleDomain) continue;
    const bool conv = n.op_type == "BinaryConv";
    SCOPED_TRACE(n.op_type);
    const std::string bits_name = b.value(n.inputs[1]).name;
    const Tensor& alpha = *b.ConstInput(n, 2);
    const Tensor* dw = grad_of(**tt, gt, conv ? "wc" : "w1");  // [rows, k]
    ASSERT_NE(dw, nullptr);
    const Tensor* dl = nullptr;
    const Tensor* da = nullptr;
    for (size_t i = 0; i < (*tb)->params().size(); ++i) {
      const std::string& p = (*tb)->params()[i];
      if (p.rfind(bits_name + "_latent", 0) == 0) dl = &gb[i];
      if (p.rfind(b.value(n.inputs[2]).name, 0) == 0) da = &gb[i];
    }
    ASSERT_TRUE(dl && da);
    const int64_t rows = dw->dim(0), k = dw->numel() / rows;
    const Tensor& bits = *b.ConstInput(n, 1);
    for (int64_t r = 0; r < rows; ++r) {
      double want_a = 0;
      for (int64_t i = 0; i < k; ++i) {
        const float s = BinaryBit(bits.data<uint64_t>() + r * BinaryWords(k), i) ? 1.f : -1.f;
        const float g = dw->data<float>()[r * k + i];
        want_a += static_cast<double>(g) * s;
        const float got = dl->data<float>()[conv ? r * k + i : i * rows + r];  // the MatMul latent is W^T
        EXPECT_NEAR(got, g * alpha.data<float>()[r], 1e-5 + 1e-4 * std::fabs(g)) << r << "," << i;
      }
      EXPECT_NEAR(da->data<float>()[r], want_a, 1e-4 + 1e-4 * std::fabs(want_a)) << "alpha " << r;
    }
  }
  // Export: flip one latent weight's sign and scale alpha; the bits and alpha follow.
  for (size_t i = 0; i < (*tb)->params().size(); ++i) {
    const std::string& p = (*tb)->params()[i];
    Tensor& v = (*tb)->param_values()[i];
    if (p.find("_latent") != std::string::npos && v.rank() == 4) v.data<float>()[0] = -v.data<float>()[0];
    if (p.find("_4d") != std::string::npos) v.data<float>()[1] *= 2.f;
  }
  const Graph out = (*tb)->CurrentModel();
  for (const Node& n : out.nodes()) {
    if (n.op_type != "BinaryConv") continue;
    const Tensor& before = *b.ConstInput(b.nodes()[0], 1);
    const Tensor& after = *out.ConstInput(n, 1);
    EXPECT_NE(BinaryBit(after.data<uint64_t>(), 0), BinaryBit(before.data<uint64_t>(), 0));
    for (int64_t i = 1; i < 18; ++i) EXPECT_EQ(BinaryBit(after.data<uint64_t>(), i), BinaryBit(before.data<uint64_t>(), i));
    EXPECT_FLOAT_EQ(out.ConstInput(n, 2)->data<float>()[1], 2.f * b.ConstInput(b.nodes()[0], 2)->data<float>()[1]);
  }
}

// Block-circulant layers (--circulant) train their block vectors through FFTs: gradients against finite
// differences (sizes not multiples of the block, with and without bias), and the export keeps the
// BlockCirculantMatMul nodes with the trained vectors.
TEST(TrainStep, CirculantLayersTrainTheirBlockVectors) {
  RegisterAllOps();
  Graph g = GemmTanhMatMul(10, 7, 71);
  const Graph teacher = g;
  auto pass = MakeCirculantPass(*PassOptions::Parse("circulant", "block=3"));
  ASSERT_TRUE(pass.ok()) << pass.status().message();
  PassContext ctx;
  ASSERT_TRUE((*pass)->Run(g, ctx).ok());
  ASSERT_EQ(::whittle::testing::CountOps(g, "BlockCirculantMatMul"), 2);
  const Tensor x = RandomFloat({5, 10}, 74);
  const Tensor y = Labels({0, 3, 1, 2, 3});
  ExpectGradientsMatchFiniteDifferences(g, x, y, &teacher, 0.5f);
  // The gradients run through the FFT ops, never a dense weight: two forward layers, the second's
  // input gradient (the first's input is data), and each layer's blocks' gradient.
  auto tg = BuildTrainingGraph(g, 1.f);
  ASSERT_TRUE(tg.ok()) << tg.status().message();
  EXPECT_EQ(::whittle::testing::CountOps(tg->graph, "BlockCirculantMatMul"), 3);
  EXPECT_EQ(::whittle::testing::CountOps(tg->graph, "BlockCirculantMatMulGradWeight"), 2);
  EXPECT_EQ(::whittle::testing::CountOps(tg->graph, "MatMul") + ::whittle::testing::CountOps(tg->graph, "Gemm"), 0);
  TrainOptions o;
  o.alpha = 0;
  auto tr = Trainer::Create(g, nullptr, o);
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  EXPECT_EQ((*tr)->params().size(), 3u);  // two block tensors and the bias
  // The training graph computes what the op computes: the same loss as the pass's own dense
  // lowering (checked against ONNX Runtime by ort_portable_check).
  Graph dense = g;
  ASSERT_TRUE(LowerCirculant(dense).ok());
  auto td = Trainer::Create(dense, nullptr, o);
  ASSERT_TRUE(td.ok()) << td.status().message();
  std::vector<Tensor> g1, g2;
  auto l1 = (*tr)->Gradients(x, y, &g1);
  auto l2 = (*td)->Gradients(x, y, &g2);
  ASSERT_TRUE(l1.ok() && l2.ok());
  EXPECT_NEAR(l1->loss, l2->loss, 1e-6);
  ASSERT_TRUE((*tr)->Step(x, y, 0, 10).ok());
  const Graph out = (*tr)->CurrentModel();
  EXPECT_EQ(::whittle::testing::CountOps(out, "BlockCirculantMatMul"), 2);
  // The exported model computes what the trainer's params say: its loss is the trainer's next one.
  std::vector<Tensor> unused;
  auto now = (*tr)->Gradients(x, y, &unused);
  auto fresh = Trainer::Create(out, nullptr, o);
  ASSERT_TRUE(now.ok() && fresh.ok());
  auto again = (*fresh)->Gradients(x, y, &unused);
  ASSERT_TRUE(again.ok());
  EXPECT_NEAR(now->loss, again->loss, 1e-6);
}

TEST(TrainStep, SgdAndAdamWUpdatesByHand) {
  RegisterAllOps();
  // logits = x W (W 1x2, no bias), one sample x = 1, label 0: CE gradient dW = softmax(W) - [1, 0].
  Graph g = GraphBuilder(13)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), 1})
                .Init("w", Tensor::FromVector<float>({1, 2}, {0.f, 0.f}))
                .Op("MatMul", {"x", "w"}, {"z"})
                .Output("z")
                .Build();
  const Tensor x = Tensor::FromVector<float>({1, 1}, {1.f});
  const Tensor y = Labels({0});
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdamW}) {
    TrainOptions o;
    o.alpha = 0;
    o.optimizer = kind;
    o.lr = 0.1f;
    o.scale_lr = false;
    o.cosine = false;
    o.warmup_fraction = 0;
    o.weight_decay = 0;
    o.clip_norm = 0;
    auto tr = Trainer::Create(g, nullptr, o);
    ASSERT_TRUE(tr.ok()) << tr.status().message();
    ASSERT_TRUE((*tr)->Step(x, y, 0, 10).ok());
    ASSERT_TRUE((*tr)->Step(x, y, 1, 10).ok());
    const float* w = (*tr)->param_values()[0].data<float>();
    if (kind == OptimizerKind::kSgd) {
      // Step 1: g = [-0.5, 0.5], buf = g, w = -0.1 g = [0.05, -0.05]. Step 2: g = softmax(w) - e0,
      // buf = 0.9 buf + g, w -= 0.1 buf.
      const double s0 = 1.0 / (1.0 + std::exp(-0.1));
      const double g0 = s0 - 1.0, buf0 = 0.9 * -0.5 + g0;
      EXPECT_NEAR(w[0], 0.05 - 0.1 * buf0, 1e-6);
      EXPECT_NEAR(w[1], -w[0], 1e-6);
    } else {
      // Step 1: m/sqrt(v) = sign(g) after bias correction, w = [0.1, -0.1]. Step 2 by the formula.
      const double g1 = -0.5, g2 = 1.0 / (1.0 + std::exp(-0.2)) - 1.0;
      const double m = 0.9 * 0.1 * g1 + 0.1 * g2, v = 0.999 * 0.001 * g1 * g1 + 0.001 * g2 * g2;
      const double want = 0.1 - 0.1 * (m / (1 - 0.81)) / (std::sqrt(v / (1 - 0.998001)) + 1e-8);
      EXPECT_NEAR(w[0], want, 1e-6);
      EXPECT_NEAR(w[1], -want, 1e-6);
    }
  }
}

TEST(TrainStep, ErrorsNameWhatIsWrong) {
  RegisterAllOps();
  const Graph mlp = Load("models/mlp.onnx");
  // No teacher for distillation.
  TrainOptions o;
  auto no_teacher = Trainer::Create(mlp, nullptr, o);
  ASSERT_FALSE(no_teacher.ok());
  EXPECT_NE(no_teacher.status().message().find("teacher"), std::string::npos);
  // A teacher whose input does not fit the student's.
  Graph other = GraphBuilder(13)
                    .Input("v", DType::kFloat32, {Dim::Symbol("batch"), 7})
                    .Init("w", RandomFloat({7, 10}, 1))
                    .Op("MatMul", {"v", "w"}, {"z"})
                    .Output("z")
                    .Build();
  auto mismatch = Trainer::Create(mlp, &other, o);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("does not match"), std::string::npos) << mismatch.status().message();
  // An op without a gradient rule on the path: named.
  Graph sig = GraphBuilder(13)
                  .Input("v", DType::kFloat32, {Dim::Symbol("batch"), 7})
                  .Init("w", RandomFloat({7, 3}, 1))
                  .Op("MatMul", {"v", "w"}, {"m"})
                  .Op("Sin", {"m"}, {"z"})
                  .Output("z")
                  .Build();
  o.alpha = 0;
  auto nogr = Trainer::Create(sig, nullptr, o);
  ASSERT_FALSE(nogr.ok());
  EXPECT_NE(nogr.status().message().find("Sin"), std::string::npos) << nogr.status().message();
  // Nothing to train.
  Graph none = GraphBuilder(13).Input("v", DType::kFloat32, {Dim::Symbol("batch"), 3}).Op("Relu", {"v"}, {"z"}).Output("z").Build();
  auto empty = Trainer::Create(none, nullptr, o);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no trainable"), std::string::npos) << empty.status().message();
}

}  // namespace
}  // namespace whittle::training
