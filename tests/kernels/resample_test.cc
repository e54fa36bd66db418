// Resampling kernels (Resize, Upsample) and NonZero: hand-computed cases for every interpolation
// mode and coordinate transform, the opset-18/19 attributes (axes, keep_aspect_ratio_policy,
// antialias, half_pixel_symmetric), integer rounding, shape inference with unknown values, and
// one-line errors for bad attributes and inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ops/op_def.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;

AttributeMap Attrs(std::initializer_list<std::pair<const std::string, Attribute>> kv) {
  AttributeMap a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

Tensor F(const Dims& dims, std::vector<float> v) { return Tensor::FromVector<float>(dims, v); }
Tensor Scales(std::vector<float> v) { return F({static_cast<int64_t>(v.size())}, v); }
Tensor Sizes(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); }
const Tensor kNone;  // an absent optional input

// Resize node with X, roi, scales, sizes (absent ones passed as kNone).
Node ResizeNode(AttributeMap attrs = {}) { return MakeNode("Resize", 4, 1, std::move(attrs)); }

std::vector<Tensor> Both(const Node& n, const std::vector<Tensor>& in, int opset = 13) {
  return ExpectBackendsMatchReference(n, in, 1e-6f, 1e-6f, opset);
}

StatusOr<std::vector<Tensor>> RunRef(const Node& node, const std::vector<Tensor>& in, int opset) {
  RegisterAllOps();
  RegisterAllKernels();
  Node n = node;
  for (size_t i = 0; i < in.size() && i < n.inputs.size(); ++i)
    if (!in[i].defined()) n.inputs[i] = -1;
  return RunNode(n, opset, in, Backend::kReference);
}

// Expects an InvalidArgument or Unimplemented error whose message contains what.
void ExpectError(const Node& n, const std::vector<Tensor>& in, int opset, const std::string& what) {
  auto r = RunRef(n, in, opset);
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << what << "'";
  EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\n'), std::string::npos) << "one line: " << r.status().message();
}

const Tensor k2x2 = F({1, 1, 2, 2}, {1, 2, 3, 4});

// ---------------------------------------------------------------- nearest

TEST(ResampleKernelsTest, NearestUpsample2x2To4x4HalfPixel) {
  // x_original = (y + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 -> round_prefer_floor 0, 0, 1, 1.
  auto out = Both(ResizeNode(), {k2x2, kNone, Scales({1, 1, 2, 2}), kNone});
  EXPECT_TRUE(TensorsClose(out[0], F({1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4})));
  // The same with sizes instead of scales.
  auto sz = Both(ResizeNode(), {k2x2, kNone, kNone, Sizes({1, 1, 4, 4})});
  EXPECT_TRUE(TensorsClose(sz[0], out[0]));
}

TEST(ResampleKernelsTest, NearestModesRoundDifferently) {
  // 1-D [10, 20, 30, 40] -> 6 with asymmetric: x = y / 1.5 = 0, 0.667, 1.333, 2, 2.667, 3.333.
  const Tensor x = F({1, 4}, {10, 20, 30, 40});
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"round_prefer_floor", {10, 20, 20, 30, 40, 40}},
      {"round_prefer_ceil", {10, 20, 20, 30, 40, 40}},
      {"floor", {10, 10, 20, 30, 30, 40}},
      {"ceil", {10, 20, 30, 30, 40, 40}},  // ceil(3.333) = 4 is clamped to 3
  };
  for (const auto& [mode, want] : cases) {
    Node n = ResizeNode(Attrs({{"coordinate_transformation_mode", Attribute::String("asymmetric")},
                               {"nearest_mode", Attribute::String(mode)}}));
    auto out = Both(n, {x, kNone, Scales({1, 1.5f}), kNone});
    EXPECT_TRUE(TensorsClose(out[0], F({1, 6}, want))) << mode;
  }
  // Ties: x = y / 2 = 0, 0.5, 1, 1.5, 2, 2.5 round to the floor or to the ceiling.
  for (const auto& [mode, want] : std::vector<std::pair<std::string, std::vector<float>>>{
           {"round_prefer_floor", {10, 10, 20, 20, 30, 30}}, {"round_prefer_ceil", {10, 20, 20, 30, 30, 30}}}) {
    Node n = ResizeNode(Attrs({{"coordinate_transformation_mode", Attribute::String("asymmetric")},
                               {"nearest_mode", Attribute::String(mode)}}));
    auto out = Both(n, {F({1, 3}, {10, 20, 30}), kNone, kNone, Sizes({1, 6})});
    EXPECT_TRUE(TensorsClose(out[0], F({1, 6}, want))) << mode;
  }
}

TEST(ResampleKernelsTest, NearestCopiesEveryDtypeExactly) {
  // Nearest is a gather: int64 values beyond 2^53 and bools survive unchanged.
  const int64_t big = (int64_t{1} << 60) + 1;
  auto i = Both(ResizeNode(), {Tensor::FromVector<int64_t>({1, 2}, {big, -big}), kNone, Scales({1, 2}), kNone});
  EXPECT_TRUE(TensorsClose(i[0], Tensor::FromVector<int64_t>({1, 4}, {big, big, -big, -big})));
  // x = -0.17, 0.5, 1.17 -> 0, 0 (a tie rounds down), 1.
  auto b = Both(ResizeNode(), {Tensor::FromVector<bool>({2}, {true, false}), kNone, Scales({1.5f}), kNone});
  EXPECT_TRUE(TensorsClose(b[0], Tensor::FromVector<bool>({3}, {true, true, false})));
}

// ---------------------------------------------------------------- linear

TEST(ResampleKernelsTest, Linear2x2To4x4HalfPixel) {
  // Along each axis: [a, b] -> [a, .75a + .25b, .25a + .75b, b] (edges clamp).
  auto out =
      Both(ResizeNode(Attrs({{"mode", Attribute::String("linear")}})), {k2x2, kNone, Scales({1, 1, 2, 2}), kNone});
  EXPECT_TRUE(TensorsClose(out[0], F({1, 1, 4, 4}, {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f,  //
                                                    2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4})));
}

TEST(ResampleKernelsTest, LinearCoordinateTransforms) {
  const Tensor x = F({1, 2}, {0, 3});
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"align_corners", {0, 1, 2, 3}},               // x = y / 3
      {"asymmetric", {0, 1.5f, 3, 3}},               // x = y / 2
      {"half_pixel", {0, 0.75f, 2.25f, 3}},          // x = (y + .5) / 2 - .5
      {"pytorch_half_pixel", {0, 0.75f, 2.25f, 3}},  // same while the output is longer than 1
  };
  for (const auto& [ctm, want] : cases) {
    Node n = ResizeNode(
        Attrs({{"mode", Attribute::String("linear")}, {"coordinate_transformation_mode", Attribute::String(ctm)}}));
    auto out = Both(n, {x, kNone, kNone, Sizes({1, 4})});
    EXPECT_TRUE(TensorsClose(out[0], F({1, 4}, want))) << ctm;
  }
  // align_corners with a scale uses length_resized = scale * length (2.4 here, as the ONNX
  // reference does): x = 1 * 3 / 1.4 for the second output.
  Node ac = ResizeNode(Attrs(
      {{"mode", Attribute::String("linear")}, {"coordinate_transformation_mode", Attribute::String("align_corners")}}));
  auto o = Both(ac, {F({1, 4}, {1, 2, 3, 4}), kNone, Scales({1, 0.6f}), kNone});
  EXPECT_TRUE(TensorsClose(o[0], F({1, 2}, {1, 1 + 3 / 1.4f})));
}

TEST(ResampleKernelsTest, IntegerOutputsRoundHalfToEven) {
  // [0, 2] -> [0, 0.5, 1.5, 2] rounds to [0, 0, 2, 2]; [0, 255] -> [0, 63.75, 191.25, 255].
  Node n = ResizeNode(Attrs({{"mode", Attribute::String("linear")}}));
  auto a = Both(n, {Tensor::FromVector<uint8_t>({2}, {0, 2}), kNone, Scales({2}), kNone});
  EXPECT_TRUE(TensorsClose(a[0], Tensor::FromVector<uint8_t>({4}, {0, 0, 2, 2})));
  auto b = Both(n, {Tensor::FromVector<uint8_t>({2}, {0, 255}), kNone, Scales({2}), kNone});
  EXPECT_TRUE(TensorsClose(b[0], Tensor::FromVector<uint8_t>({4}, {0, 64, 191, 255})));
  // Cubic overshoot saturates instead of wrapping: at x = 1.25 the float result is 290.86.
  Node c = ResizeNode(Attrs({{"mode", Attribute::String("cubic")}}));
  auto f = Both(c, {F({4}, {0, 255, 255, 0}), kNone, Scales({2}), kNone});
  EXPECT_NEAR(f[0].data<float>()[3], 255 * (0.87890625f + 0.26171875f), 1e-3f);
  auto s = Both(c, {Tensor::FromVector<uint8_t>({4}, {0, 255, 255, 0}), kNone, Scales({2}), kNone});
  EXPECT_EQ(s[0].data<uint8_t>()[3], 255);
}

// ---------------------------------------------------------------- cubic

TEST(ResampleKernelsTest, CubicWeightsAndExcludeOutside) {
  // A = -0.75, ratio 0.5: weights [-0.09375, 0.59375, 0.59375, -0.09375].
  const Tensor x = F({1, 5}, {0, 0, 10, 0, 0});
  Node n = ResizeNode(Attrs(
      {{"mode", Attribute::String("cubic")}, {"coordinate_transformation_mode", Attribute::String("asymmetric")}}));
  auto out = Both(n, {x, kNone, Scales({1, 2}), kNone});
  // y = 1: x = 0.5, taps -1 (clamped to 0), 0, 1, 2 -> -0.09375 * 10; y = 3: x = 1.5 -> 0.59375 * 10.
  EXPECT_NEAR(out[0].data<float>()[1], -0.9375f, 1e-6f);
  EXPECT_NEAR(out[0].data<float>()[3], 5.9375f, 1e-6f);
  EXPECT_NEAR(out[0].data<float>()[4], 10.f, 1e-6f);  // integer coordinate: the sample itself
  // exclude_outside drops the tap at -1 and renormalises: -0.09375 / 1.09375 * 10.
  Node ex = ResizeNode(Attrs({{"mode", Attribute::String("cubic")},
                              {"coordinate_transformation_mode", Attribute::String("asymmetric")},
                              {"exclude_outside", Attribute::Int(1)}}));
  auto o2 = Both(ex, {x, kNone, Scales({1, 2}), kNone});
  EXPECT_NEAR(o2[0].data<float>()[1], -0.9375f / 1.09375f, 1e-6f);
  // cubic_coeff_a = -0.5 at ratio 0.5: weights [-0.0625, 0.5625, 0.5625, -0.0625].
  Node a = ResizeNode(Attrs({{"mode", Attribute::String("cubic")},
                             {"coordinate_transformation_mode", Attribute::String("asymmetric")},
                             {"cubic_coeff_a", Attribute::Float(-0.5f)}}));
  auto o3 = Both(a, {x, kNone, Scales({1, 2}), kNone});
  EXPECT_NEAR(o3[0].data<float>()[3], 5.625f, 1e-6f);
}

// ---------------------------------------------------------------- tf_crop_and_resize

TEST(ResampleKernelsTest, TfCropAndResizeExtrapolates) {
  // Axis 1: roi [0.5, 1.5] of length 4, 3 outputs: x = 1.5 + y * 1.5 = 1.5, 3, 4.5 (outside).
  Node n = ResizeNode(Attrs({{"mode", Attribute::String("linear")},
                             {"coordinate_transformation_mode", Attribute::String("tf_crop_and_resize")},
                             {"extrapolation_value", Attribute::Float(-7)}}));
  auto out = Both(n, {F({1, 4}, {10, 20, 30, 40}), F({4}, {0, 0.5f, 1, 1.5f}), kNone, Sizes({1, 3})});
  EXPECT_TRUE(TensorsClose(out[0], F({1, 3}, {25, 40, -7})));
  // Nearest too.
  Node nn = ResizeNode(Attrs({{"coordinate_transformation_mode", Attribute::String("tf_crop_and_resize")},
                              {"extrapolation_value", Attribute::Float(-7)}}));
  auto o2 = Both(nn, {F({1, 4}, {10, 20, 30, 40}), F({4}, {0, 0.5f, 1, 1.5f}), kNone, Sizes({1, 3})});
  EXPECT_TRUE(TensorsClose(o2[0], F({1, 3}, {20, 40, -7})));  // 1.5 rounds down (prefer floor)
  // Without a roi it is an error.
  auto r = RunRef(n, {F({1, 4}, {10, 20, 30, 40}), kNone, kNone, Sizes({1, 3})}, 13);
  EXPECT_FALSE(r.ok());
}

// ---------------------------------------------------------------- opsets 11, 18, 19

TEST(ResampleKernelsTest, TfHalfPixelForNNInOpset11) {
  // x = (y + 0.5) / 0.5: y = 0, 1 -> 1, 3.
  Node n = ResizeNode(Attrs({{"coordinate_transformation_mode", Attribute::String("tf_half_pixel_for_nn")}}));
  auto out = Both(n, {F({1, 4}, {10, 20, 30, 40}), F({0}, {}), F({0}, {}), Sizes({1, 2})}, 11);
  EXPECT_TRUE(TensorsClose(out[0], F({1, 2}, {20, 40})));
  ExpectError(n, {F({1, 4}, {10, 20, 30, 40}), kNone, kNone, Sizes({1, 2})}, 13, "removed in opset 13");
}

TEST(ResampleKernelsTest, AxesAndKeepAspectRatio) {
  // axes [3, 2] with scales [3, 2]: width x3, height x2 (nearest, half_pixel).
  Node ax = ResizeNode(Attrs({{"axes", Attribute::Ints({3, 2})}}));
  auto a = Both(ax, {k2x2, kNone, Scales({3, 2}), kNone}, 19);
  EXPECT_EQ(a[0].dims(), (Dims{1, 1, 4, 6}));
  // sizes [7, 8] on axes 2, 3 with not_larger: scale = min(3.5, 4) = 3.5, so 7 x 7.
  // x = (y + 0.5) / 3.5 - 0.5 -> rows and cols 0, 0, 0, 0, 1, 1, 1.
  Node nl = ResizeNode(
      Attrs({{"axes", Attribute::Ints({2, 3})}, {"keep_aspect_ratio_policy", Attribute::String("not_larger")}}));
  auto b = Both(nl, {k2x2, kNone, kNone, Sizes({7, 8})}, 19);
  ASSERT_EQ(b[0].dims(), (Dims{1, 1, 7, 7}));
  EXPECT_EQ(b[0].data<float>()[0], 1.f);
  EXPECT_EQ(b[0].data<float>()[4], 2.f);
  EXPECT_EQ(b[0].data<float>()[4 * 7], 3.f);
  EXPECT_EQ(b[0].data<float>()[48], 4.f);
  // not_smaller: scale = max(3.5, 4) = 4, so 8 x 8.
  Node ns = ResizeNode(
      Attrs({{"axes", Attribute::Ints({2, 3})}, {"keep_aspect_ratio_policy", Attribute::String("not_smaller")}}));
  auto c = Both(ns, {k2x2, kNone, kNone, Sizes({7, 8})}, 19);
  EXPECT_EQ(c[0].dims(), (Dims{1, 1, 8, 8}));
  // A crop roi follows axes too: only axis 1 is cropped.
  Node cr = ResizeNode(Attrs({{"axes", Attribute::Ints({1})},
                              {"mode", Attribute::String("linear")},
                              {"coordinate_transformation_mode", Attribute::String("tf_crop_and_resize")}}));
  auto d = Both(cr, {F({1, 4}, {10, 20, 30, 40}), F({2}, {0.5f, 1.5f}), kNone, Sizes({3})}, 19);
  EXPECT_TRUE(TensorsClose(d[0], F({1, 3}, {25, 40, 0})));
}

TEST(ResampleKernelsTest, AntialiasWidensTheFilterWhenDownsampling) {
  // Scale 0.5, half_pixel: x = 0.5, 2.5. Plain linear gives 2 and 10; antialias uses 4 taps with
  // weights [.125, .375, .375, .125] at -1..2 (clamped): [0,0,4,8] -> 2.5 and [4,8,12,12] -> 9.5.
  const Tensor x = F({1, 4}, {0, 4, 8, 12});
  auto plain =
      Both(ResizeNode(Attrs({{"mode", Attribute::String("linear")}})), {x, kNone, Scales({1, 0.5f}), kNone}, 18);
  EXPECT_TRUE(TensorsClose(plain[0], F({1, 2}, {2, 10})));
  Node aa = ResizeNode(Attrs({{"mode", Attribute::String("linear")}, {"antialias", Attribute::Int(1)}}));
  auto o = Both(aa, {x, kNone, Scales({1, 0.5f}), kNone}, 18);
  EXPECT_TRUE(TensorsClose(o[0], F({1, 2}, {2.5f, 9.5f})));
  // Upsampling is unchanged by antialias.
  auto up = Both(aa, {x, kNone, Scales({1, 2}), kNone}, 18);
  auto up_plain =
      Both(ResizeNode(Attrs({{"mode", Attribute::String("linear")}})), {x, kNone, Scales({1, 2}), kNone}, 18);
  EXPECT_TRUE(TensorsClose(up[0], up_plain[0]));
  // Cubic antialias runs and keeps constants constant.
  Node ca = ResizeNode(Attrs({{"mode", Attribute::String("cubic")}, {"antialias", Attribute::Int(1)}}));
  auto k = Both(ca, {F({1, 6}, {5, 5, 5, 5, 5, 5}), kNone, Scales({1, 0.5f}), kNone}, 18);
  EXPECT_TRUE(TensorsClose(k[0], F({1, 3}, {5, 5, 5})));
}

TEST(ResampleKernelsTest, HalfPixelSymmetricCentresTheCrop) {
  // Length 5, scale 0.5: 2 outputs for a length of 2.5; offset = 2.5 * (1 - 2 / 2.5) = 0.5, so
  // x = 2y + 1 (half_pixel gives 2y + 0.5).
  const Tensor x = F({1, 5}, {10, 20, 30, 40, 50});
  Node s = ResizeNode(Attrs({{"mode", Attribute::String("linear")},
                             {"coordinate_transformation_mode", Attribute::String("half_pixel_symmetric")}}));
  auto o = Both(s, {x, kNone, Scales({1, 0.5f}), kNone}, 19);
  EXPECT_TRUE(TensorsClose(o[0], F({1, 2}, {20, 40})));
  auto h = Both(ResizeNode(Attrs({{"mode", Attribute::String("linear")}})), {x, kNone, Scales({1, 0.5f}), kNone}, 19);
  EXPECT_TRUE(TensorsClose(h[0], F({1, 2}, {15, 35})));
  ExpectError(s, {x, kNone, Scales({1, 0.5f}), kNone}, 18, "needs opset 19");
}

// ---------------------------------------------------------------- Resize-10, Upsample

TEST(ResampleKernelsTest, Resize10AndUpsampleAreAsymmetric) {
  // Resize-10: floor on upsampled axes, ceil on downsampled ones (x = y / 0.6 = 0, 1.67, 3.33).
  Node r10 = MakeNode("Resize", 2, 1);
  auto d = Both(r10, {F({1, 5}, {0, 1, 2, 3, 4}), Scales({1, 0.6f})}, 10);
  EXPECT_TRUE(TensorsClose(d[0], F({1, 3}, {0, 2, 4})));
  auto u = Both(r10, {F({1, 2}, {1, 2}), Scales({1, 2.5f})}, 10);
  EXPECT_TRUE(TensorsClose(u[0], F({1, 5}, {1, 1, 1, 2, 2})));  // x = 0, .4, .8, 1.2, 1.6
  Node r10l = MakeNode("Resize", 2, 1, Attrs({{"mode", Attribute::String("linear")}}));
  auto l = Both(r10l, {F({1, 2}, {1, 2}), Scales({1, 2})}, 10);
  EXPECT_TRUE(TensorsClose(l[0], F({1, 4}, {1, 1.5f, 2, 2})));
  // Upsample-7 (attribute) and -9 (input) repeat elements for integer scales.
  Node u7 = MakeNode("Upsample", 1, 1, Attrs({{"scales", Attribute::Floats({1, 1, 2, 3})}}));
  auto a = Both(u7, {k2x2}, 7);
  EXPECT_TRUE(TensorsClose(a[0], F({1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,  //
                                                  3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4})));
  Node u9 = MakeNode("Upsample", 2, 1);
  auto b = Both(u9, {k2x2, Scales({1, 1, 2, 3})}, 9);
  EXPECT_TRUE(TensorsClose(b[0], a[0]));
  Node u9l = MakeNode("Upsample", 2, 1, Attrs({{"mode", Attribute::String("linear")}}));
  auto c = Both(u9l, {F({1, 2}, {1, 2}), Scales({1, 2})}, 9);
  EXPECT_TRUE(TensorsClose(c[0], F({1, 4}, {1, 1.5f, 2, 2})));
}

TEST(ResampleKernelsTest, RandomShapesRun) {
  // Odd sizes, every mode: the output has the inferred dims and finite values.
  for (const char* mode : {"nearest", "linear", "cubic"}) {
    Node n = ResizeNode(Attrs({{"mode", Attribute::String(mode)}}));
    auto out = Both(n, {RandomFloat({2, 3, 7, 5}, 1), kNone, Scales({1, 1, 0.7f, 2.3f}), kNone});
    ASSERT_EQ(out[0].dims(), (Dims{2, 3, 4, 11}));
    for (int64_t i = 0; i < out[0].numel(); ++i) ASSERT_TRUE(std::isfinite(out[0].data<float>()[i]));
  }
}

// The CPU's separable float path (kernels/cpu/resample.h) against the reference's double loops on
// image-model shapes: LR-ASPP's 16x16 -> 128x128 bilinear logits, downsampling with antialias,
// cubic, align_corners, a rank-3 and a rank-5 input (leading axes copied), and an int8 input
// (which the reference keeps).
TEST(ResampleKernelsTest, CpuSeparablePathMatchesTheReference) {
  struct Case {
    const char* mode;
    const char* coord;
    int antialias;
    Dims dims;
    std::vector<float> scales;
  };
  const Case cases[] = {
      {"linear", "half_pixel", 0, {2, 21, 16, 16}, {1, 1, 8, 8}},
      {"linear", "pytorch_half_pixel", 0, {1, 3, 9, 7}, {1, 1, 2.5f, 1}},
      {"linear", "align_corners", 0, {1, 4, 5, 6}, {1, 1, 3, 2}},
      {"linear", "half_pixel", 1, {1, 2, 20, 24}, {1, 1, 0.3f, 0.5f}},
      {"cubic", "half_pixel", 0, {1, 2, 6, 7}, {1, 1, 2, 3.5f}},
      {"cubic", "asymmetric", 1, {1, 2, 17, 13}, {1, 1, 0.6f, 0.25f}},
      {"nearest", "asymmetric", 0, {2, 3, 5, 5}, {1, 1, 2, 3}},
      {"linear", "half_pixel", 0, {3, 8, 10}, {1, 2, 0.5f}},
      {"linear", "half_pixel", 0, {1, 2, 3, 4, 5}, {1, 1, 1, 2, 2}},
  };
  uint32_t seed = 80;
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.mode) + " " + c.coord + " antialias=" + std::to_string(c.antialias) + " " +
                 DimsToString(c.dims));
    Node n = ResizeNode(Attrs({{"mode", Attribute::String(c.mode)},
                               {"coordinate_transformation_mode", Attribute::String(c.coord)},
                               {"antialias", Attribute::Int(c.antialias)}}));
    ExpectBackendsMatchReference(n, {RandomFloat(c.dims, seed++), kNone, Scales(c.scales), kNone}, 1e-5f, 1e-5f, 18);
  }
  Node n = ResizeNode(Attrs({{"mode", Attribute::String("linear")}}));
  Both(n, {testing::RandomInt8({1, 2, 4, 4}, 9), kNone, Scales({1, 1, 2, 2}), kNone});
}

// ---------------------------------------------------------------- errors

TEST(ResampleKernelsTest, BadAttributesAndInputsAreOneLineErrors) {
  const Tensor x = F({1, 4}, {1, 2, 3, 4});
  ExpectError(ResizeNode(Attrs({{"mode", Attribute::String("bicubic")}})), {x, kNone, Scales({1, 2}), kNone}, 13,
              "node 'test_Resize' (Resize): mode must be nearest, linear or cubic, got 'bicubic'");
  ExpectError(ResizeNode(Attrs({{"coordinate_transformation_mode", Attribute::String("corners")}})),
              {x, kNone, Scales({1, 2}), kNone}, 13, "unknown coordinate_transformation_mode 'corners'");
  ExpectError(ResizeNode(Attrs({{"nearest_mode", Attribute::String("round")}})), {x, kNone, Scales({1, 2}), kNone}, 13,
              "nearest_mode must be");
  ExpectError(ResizeNode(Attrs({{"exclude_outside", Attribute::Int(2)}})), {x, kNone, Scales({1, 2}), kNone}, 13,
              "exclude_outside must be 0 or 1");
  ExpectError(ResizeNode(Attrs({{"antialias", Attribute::Int(1)}})), {x, kNone, Scales({1, 2}), kNone}, 17,
              "'antialias' needs opset 18");
  ExpectError(ResizeNode(), {x, kNone, Scales({1, 2}), Sizes({1, 8})}, 13, "only one of 'scales' and 'sizes'");
  ExpectError(ResizeNode(), {x, kNone, kNone, kNone}, 13, "one of 'scales' and 'sizes' must be given");
  ExpectError(ResizeNode(), {x, kNone, Scales({2}), kNone}, 13, "scales has 1 values, expected 2");
  ExpectError(ResizeNode(), {x, kNone, Scales({1, 0}), kNone}, 13, "scales must be finite and > 0");
  ExpectError(ResizeNode(), {x, kNone, Scales({1, -2}), kNone}, 13, "scales must be finite and > 0");
  ExpectError(ResizeNode(), {x, kNone, kNone, Sizes({1, -1})}, 13, "sizes must be >= 0");
  ExpectError(ResizeNode(), {x, kNone, kNone, Tensor::FromVector<int32_t>({2}, {1, 8})}, 13, "sizes must be int64");
  ExpectError(ResizeNode(Attrs({{"axes", Attribute::Ints({1, 1})}})), {x, kNone, Scales({2, 2}), kNone}, 18,
              "repeats an axis");
  ExpectError(ResizeNode(Attrs({{"axes", Attribute::Ints({2})}})), {x, kNone, Scales({2}), kNone}, 18, "out of range");
  ExpectError(ResizeNode(Attrs({{"keep_aspect_ratio_policy", Attribute::String("fit")}})),
              {x, kNone, kNone, Sizes({1, 8})}, 18, "keep_aspect_ratio_policy must be");
  ExpectError(MakeNode("Resize", 2, 1, Attrs({{"mode", Attribute::String("cubic")}})), {x, Scales({1, 2})}, 10,
              "mode must be nearest or linear in opset 10");
  ExpectError(MakeNode("Resize", 2, 1, Attrs({{"nearest_mode", Attribute::String("floor")}})), {x, Scales({1, 2})}, 10,
              "'nearest_mode' needs opset 11");
  ExpectError(MakeNode("Resize", 2, 1), {x, Scales({1, 2})}, 11, "'roi' and 'scales' are required before opset 13");
  ExpectError(MakeNode("Upsample", 2, 1), {x, Scales({1, 2})}, 10, "Upsample is deprecated from opset 10");
  ExpectError(MakeNode("Upsample", 2, 1), {x, Scales({1, 0.5f})}, 9, "scales must be >= 1");
  ExpectError(MakeNode("Upsample", 1, 1), {x}, 7, "attribute 'scales' is required");
  ExpectError(MakeNode("Upsample", 1, 1, Attrs({{"scales", Attribute::Floats({1, 2, 3})}})), {x}, 7,
              "scales has 3 values for an input of rank 2");
  ExpectError(ResizeNode(Attrs({{"mode", Attribute::String("linear")}})),
              {Tensor::FromVector<bool>({2}, {true, false}), kNone, Scales({2}), kNone}, 13, "need a numeric type");
}

// ---------------------------------------------------------------- shape inference

// Output shape of a Resize node whose scales/sizes values may be unknown (as at load time).
std::optional<SymShape> InferResizeShape(const SymShape& x, const Tensor* scales, const Tensor* sizes, bool sizes_given,
                                         AttributeMap attrs = {}, int opset = 13) {
  RegisterAllOps();
  Node n = ResizeNode(std::move(attrs));
  n.inputs[1] = -1;
  if (!scales) n.inputs[2] = -1;
  if (!sizes_given) n.inputs[3] = -1;
  InferContext ctx(n, opset);
  ctx.AddInput(true, DType::kFloat32, x, nullptr);
  ctx.AddInput(false, DType::kUndefined, std::nullopt, nullptr);
  ctx.AddInput(scales != nullptr, DType::kFloat32,
               scales ? std::optional<SymShape>(ToSymShape(scales->dims())) : std::nullopt, scales);
  ctx.AddInput(sizes_given, DType::kInt64, sizes_given ? std::optional<SymShape>(SymShape{Dim(4)}) : std::nullopt,
               sizes);
  ctx.AddOutputSlot(true);
  Status st = InferNode(*OpRegistry::Global().Find("", "Resize"), ctx);
  EXPECT_TRUE(st.ok()) << st.message();
  return ctx.OutputShape(0);
}

TEST(ResampleKernelsTest, ShapeInference) {
  const SymShape x = {Dim::Symbol("N"), Dim(3), Dim(10), Dim(7)};
  const Tensor s = Scales({1, 1, 2, 0.5f});
  auto a = InferResizeShape(x, &s, nullptr, false);
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, (SymShape{Dim::Symbol("N"), Dim(3), Dim(20), Dim(3)}));
  // sizes not known yet (a graph input): rank known, resized dims unknown.
  auto b = InferResizeShape(x, nullptr, nullptr, true);
  ASSERT_TRUE(b);
  ASSERT_EQ(b->size(), 4u);
  EXPECT_FALSE((*b)[2].known());
  EXPECT_FALSE((*b)[0].known());
  // axes [2, 3] keep the other dims, symbolic ones included.
  const Tensor sz = Sizes({5, 6});
  RegisterAllOps();
  Node n = ResizeNode(Attrs({{"axes", Attribute::Ints({2, 3})}}));
  n.inputs[1] = n.inputs[2] = -1;
  InferContext ctx(n, 18);
  ctx.AddInput(true, DType::kFloat32, x, nullptr);
  ctx.AddInput(false, DType::kUndefined, std::nullopt, nullptr);
  ctx.AddInput(false, DType::kUndefined, std::nullopt, nullptr);
  ctx.AddInput(true, DType::kInt64, SymShape{Dim(2)}, &sz);
  ctx.AddOutputSlot(true);
  ASSERT_TRUE(InferNode(*OpRegistry::Global().Find("", "Resize"), ctx).ok());
  EXPECT_EQ(*ctx.OutputShape(0), (SymShape{Dim::Symbol("N"), Dim(3), Dim(5), Dim(6)}));
}

// ---------------------------------------------------------------- NonZero

TEST(ResampleKernelsTest, NonZero) {
  Node n = MakeNode("NonZero", 1, 1);
  auto a = Both(n, {F({2, 3}, {1, 0, 0, 0, -2, 3})});
  EXPECT_TRUE(TensorsClose(a[0], Tensor::FromVector<int64_t>({2, 3}, {0, 1, 1, 0, 1, 2})));
  auto b = Both(n, {Tensor::FromVector<bool>({4}, {false, true, false, true})});
  EXPECT_TRUE(TensorsClose(b[0], Tensor::FromVector<int64_t>({1, 2}, {1, 3})));
  // -0.0 is zero, NaN is not.
  auto c = Both(n, {F({3}, {-0.f, std::numeric_limits<float>::quiet_NaN(), 0.f})});
  EXPECT_TRUE(TensorsClose(c[0], Tensor::FromVector<int64_t>({1, 1}, {1})));
  // All zero: [rank, 0]; a scalar: [0, 1] (ONNX, unlike numpy).
  auto d = Both(n, {Tensor::FromVector<int32_t>({2, 2}, {0, 0, 0, 0})});
  EXPECT_EQ(d[0].dims(), (Dims{2, 0}));
  auto e = Both(n, {Tensor::Scalar<int64_t>(7)}, 13);
  EXPECT_EQ(e[0].dims(), (Dims{0, 1}));
  // Unknown value (load time): [rank, ?].
  RegisterAllOps();
  InferContext ctx(n, 13);
  ctx.AddInput(true, DType::kFloat32, SymShape{Dim(2), Dim(3)}, nullptr);
  ctx.AddOutputSlot(true);
  ASSERT_TRUE(InferNode(*OpRegistry::Global().Find("", "NonZero"), ctx).ok());
  ASSERT_TRUE(ctx.OutputShape(0));
  EXPECT_EQ((*ctx.OutputShape(0))[0], Dim(2));
  EXPECT_FALSE((*ctx.OutputShape(0))[1].known());
  EXPECT_EQ(ctx.OutputDType(0), DType::kInt64);
}

}  // namespace
}  // namespace whittle
