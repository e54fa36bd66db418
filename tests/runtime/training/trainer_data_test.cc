// The trainer's data path: image augmentation (random crop with zero padding, horizontal flip)
// and the per-sample cache of the teacher's logits that epochs after the first reuse.
#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "runtime/training/trainer.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle::training {
namespace {

using ::whittle::testing::RandomFloat;

Graph LoadBundled(const std::string& name) {
  auto g = LoadModel(std::string(WHITTLE_SOURCE_DIR) + "/models/" + name + ".onnx");
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? *g : Graph();
}

// The (dy, dx, flip) that turns image src (H x W) into dst under AugmentImages' definition
// (dst(y, x) = src(y + dy, x' + dx), x' = W-1-x when flipped, zero outside), or none.
std::vector<std::tuple<int, int, bool>> Explanations(const float* src, const float* dst, int H, int W, int pad) {
  std::vector<std::tuple<int, int, bool>> out;
  for (int flip = 0; flip < 2; ++flip)
    for (int dy = -pad; dy <= pad; ++dy)
      for (int dx = -pad; dx <= pad; ++dx) {
        bool same = true;
        for (int y = 0; y < H && same; ++y)
          for (int x = 0; x < W && same; ++x) {
            const int sy = y + dy, sx = (flip ? W - 1 - x : x) + dx;
            const float want = sy >= 0 && sy < H && sx >= 0 && sx < W ? src[sy * W + sx] : 0.f;
            same = dst[y * W + x] == want;
          }
        if (same) out.emplace_back(dy, dx, flip != 0);
      }
  return out;
}

TEST(TrainerData, AugmentationShiftsWithinThePaddingAndFlips) {
  const int B = 64, C = 2, H = 7, W = 9, pad = 2;
  const Tensor x = RandomFloat({B, C, H, W}, 11, 0.5f, 1.f);  // no zeros: the padding is visible
  Tensor a = x.Clone();
  AugmentImages(&a, pad, /*hflip=*/true, /*seed=*/3, /*epoch=*/1, /*step=*/5);
  std::set<std::tuple<int, int, bool>> seen;
  for (int b = 0; b < B; ++b) {
    // Every channel of a sample moves the same way, by one of the allowed shifts.
    std::vector<std::tuple<int, int, bool>> common;
    for (int c = 0; c < C; ++c) {
      const float* s = x.data<float>() + (b * C + c) * H * W;
      const float* d = a.data<float>() + (b * C + c) * H * W;
      auto e = Explanations(s, d, H, W, pad);
      ASSERT_FALSE(e.empty()) << "sample " << b << " channel " << c << " is no crop/flip of its image";
      if (c == 0) {
        common = e;
      } else {
        std::vector<std::tuple<int, int, bool>> both;
        for (auto& t : e)
          if (std::find(common.begin(), common.end(), t) != common.end()) both.push_back(t);
        common = both;
      }
    }
    ASSERT_FALSE(common.empty()) << "the channels of sample " << b << " moved differently";
    seen.insert(common.front());
  }
  EXPECT_GE(seen.size(), 12u) << "64 samples drew too few distinct (shift, flip) pairs of 50";
  int flips = 0;
  for (auto& t : seen) flips += std::get<2>(t);
  EXPECT_GT(flips, 0);
  EXPECT_LT(flips, static_cast<int>(seen.size()));

  // Deterministic in (seed, epoch, step); another step draws differently.
  Tensor again = x.Clone(), other = x.Clone();
  AugmentImages(&again, pad, true, 3, 1, 5);
  AugmentImages(&other, pad, true, 3, 1, 6);
  EXPECT_EQ(std::memcmp(a.raw_data(), again.raw_data(), a.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.raw_data(), other.raw_data(), a.nbytes()), 0);

  // Flip only: each sample is itself or its mirror image.
  Tensor f = x.Clone();
  AugmentImages(&f, 0, true, 3, 0, 0);
  int mirrored = 0;
  for (int b = 0; b < B; ++b) {
    const float* s = x.data<float>() + b * C * H * W;
    const float* d = f.data<float>() + b * C * H * W;
    auto e = Explanations(s, d, H, W, 0);
    ASSERT_FALSE(e.empty());
    mirrored += std::get<2>(e.front());
  }
  EXPECT_GT(mirrored, 16);
  EXPECT_LT(mirrored, 48);
}

// Two epochs with and without the teacher cache: the same weights (the cached logits are the
// teacher's, row by row), the first epoch fills the cache and the second is served from it.
TEST(TrainerData, TeacherLogitsCachedAfterTheFirstEpochGiveTheSameTraining) {
  RegisterAllOps();
  const int64_t n = 200;
  Tensor x = RandomFloat({n, 1, 28, 28}, 21, 0.f, 1.f);
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = (i * 7) % 10;
  auto data = MakeDataset(x, Tensor::FromVector<int64_t>({n}, y), "random");
  ASSERT_TRUE(data.ok()) << data.status().message();
  const Graph student = LoadBundled("mlp"), teacher = LoadBundled("cnn");
  std::vector<std::vector<Tensor>> weights;
  for (bool cache : {true, false}) {
    TrainOptions o;
    o.epochs = 2;
    o.batch = 32;
    o.lr = 0.05f;
    o.seed = 9;
    o.cache_teacher = cache;
    auto tr = Trainer::Create(student, &teacher, o);
    ASSERT_TRUE(tr.ok()) << tr.status().message();
    for (int e = 0; e < 2; ++e) {
      auto st = (*tr)->TrainEpoch(*data, e, nullptr);
      ASSERT_TRUE(st.ok()) << st.status().message();
      EXPECT_EQ(st->teacher_cached, cache && e == 1 ? n : 0) << "epoch " << e;
    }
    std::vector<Tensor> w;
    for (const Tensor& p : (*tr)->param_values()) w.push_back(p.Clone());
    weights.push_back(std::move(w));
  }
  ASSERT_EQ(weights[0].size(), weights[1].size());
  for (size_t k = 0; k < weights[0].size(); ++k)
    for (int64_t i = 0; i < weights[0][k].numel(); ++i)
      ASSERT_NEAR(weights[0][k].data<float>()[i], weights[1][k].data<float>()[i], 1e-5) << "param " << k << " [" << i << "]";
}

TEST(TrainerData, AugmentationNeedsImages) {
  RegisterAllOps();
  const Graph student = LoadBundled("mlp");
  TrainOptions o;
  o.alpha = 0;
  o.hflip = true;
  auto tr = Trainer::Create(student, nullptr, o);
  ASSERT_TRUE(tr.ok()) << tr.status().message();
  auto flat = MakeDataset(RandomFloat({8, 784}, 1), Tensor::FromVector<int64_t>({8}, {0, 1, 2, 3, 4, 5, 6, 7}), "flat");
  ASSERT_TRUE(flat.ok()) << flat.status().message();
  auto st = (*tr)->TrainEpoch(*flat, 0, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("augmentation needs float32 images"), std::string::npos) << st.status().message();
  o.crop_padding = -1;
  EXPECT_FALSE(Trainer::Create(student, nullptr, o).ok());
}


// With bn_training the running statistics follow the batches (ONNX's training_mode update,
// biased batch variance) after each optimizer step, never after a bare Gradients() call, and
// CurrentModel() carries them; without it they stay as the model has them.
TEST(TrainerData, BatchNormRunningStatisticsFollowTheSteps) {
  RegisterAllOps();
  const int64_t C = 3;
  AttributeMap bn;
  bn.Set("momentum", Attribute::Float(0.75f));
  Graph g = ::whittle::testing::GraphBuilder(15)
                .Input("x", DType::kFloat32, {Dim::Symbol("batch"), C, 4, 4})
                .Init("scale", RandomFloat({C}, 1, 0.5f, 1.5f))
                .Init("bias", RandomFloat({C}, 2))
                .Init("mean", RandomFloat({C}, 3))
                .Init("var", RandomFloat({C}, 4, 0.5f, 2.f))
                .Init("w", RandomFloat({C, 5}, 5))
                .Op("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, bn)
                .Op("GlobalAveragePool", {"y"}, {"p"})
                .Op("Flatten", {"p"}, {"f"})
                .Op("MatMul", {"f", "w"}, {"z"})
                .Output("z")
                .Build();
  const Tensor x = RandomFloat({6, C, 4, 4}, 6, -2.f, 3.f);
  const Tensor y = Tensor::FromVector<int64_t>({6}, {0, 1, 2, 3, 4, 0});
  const Tensor mean0 = *g.value(g.FindValue("mean")).initializer, var0 = *g.value(g.FindValue("var")).initializer;
  for (bool train : {true, false}) {
    SCOPED_TRACE(train ? "bn_training" : "frozen");
    TrainOptions o;
    o.alpha = 0;
    o.bn_training = train;
    auto tr = Trainer::Create(g, nullptr, o);
    ASSERT_TRUE(tr.ok()) << tr.status().message();
    EXPECT_EQ((*tr)->state_names().size(), train ? 2u : 0u);
    std::vector<Tensor> grads;
    ASSERT_TRUE((*tr)->Gradients(x, y, &grads).ok());
    ASSERT_TRUE((*tr)->Step(x, y, 0, 4).ok());
    const Graph m = (*tr)->CurrentModel();
    const Tensor& mean1 = *m.value(m.FindValue("mean")).initializer;
    const Tensor& var1 = *m.value(m.FindValue("var")).initializer;
    for (int64_t c = 0; c < C; ++c) {
      double s = 0, s2 = 0;
      const int64_t n = 6 * 16;
      for (int64_t b = 0; b < 6; ++b)
        for (int64_t i = 0; i < 16; ++i) {
          const double v = x.data<float>()[(b * C + c) * 16 + i];
          s += v;
          s2 += v * v;
        }
      const double bm = s / n, bv = s2 / n - bm * bm;
      const double want_m = train ? mean0.data<float>()[c] * 0.75 + bm * 0.25 : mean0.data<float>()[c];
      const double want_v = train ? var0.data<float>()[c] * 0.75 + bv * 0.25 : var0.data<float>()[c];
      EXPECT_NEAR(mean1.data<float>()[c], want_m, 1e-5) << "channel " << c;
      EXPECT_NEAR(var1.data<float>()[c], want_v, 1e-4) << "channel " << c;
    }
  }
}

}  // namespace
}  // namespace whittle::training
