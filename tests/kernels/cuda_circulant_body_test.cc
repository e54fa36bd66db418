// The CUDA block-circulant layer's device code, run on the CPU: the pad, bin-product and
// epilogue bodies of kernels/cuda/circulant_body.h over their whole ranges, with the host code the
// CUDA factory runs (CirculantSpectra at load, RunCirculant per call, chunked), against the
// reference op (the dense expansion). cuFFT's batched real transforms are stood in for by a
// direct DFT with cuFFT's documented conventions (unnormalized both ways, forward e^{-2 pi i f j
// / B}, the inverse reading bins 0..B/2 and their conjugate symmetry); that cuFFT itself is
// called right is what a GPU run shows (the circulant kernel tests, TestedBackends()).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/circulant_body.h"
#include "lib/ir/circulant_format.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle::cuda {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;

constexpr double kPi = 3.14159265358979323846;

struct DftLaunches : CLaunches {
  void Pad(const float* x, float* xp, const CircShape& c) override {
    for (int64_t i = 0; i < c.M * c.Q * c.B; ++i) CircPadAt(x, xp, c, i);
  }
  bool R2C(const float* in, float* out, int64_t B, int64_t count) override {
    const int64_t H = B / 2 + 1;
    for (int64_t t = 0; t < count; ++t)
      for (int64_t f = 0; f < H; ++f) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < B; ++j) {
          const double a = -2 * kPi * static_cast<double>((f * j) % B) / static_cast<double>(B);
          re += in[t * B + j] * std::cos(a);
          im += in[t * B + j] * std::sin(a);
        }
        out[(t * H + f) * 2] = static_cast<float>(re);
        out[(t * H + f) * 2 + 1] = static_cast<float>(im);
      }
    ++transforms;
    return true;
  }
  void Bins(const float* cf, const float* xf, float* yf, const CircShape& c) override {
    for (int64_t i = 0; i < c.M * c.P * c.H(); ++i) CircBinAt(cf, xf, yf, c, i);
  }
  bool C2R(float* in, float* out, int64_t B, int64_t count) override {
    const int64_t H = B / 2 + 1;
    for (int64_t t = 0; t < count; ++t)
      for (int64_t j = 0; j < B; ++j) {
        double s = 0;
        for (int64_t f = 0; f < B; ++f) {  // bins past B/2 are the conjugates of B - f
          const int64_t g = f < H ? f : B - f;
          const double re = in[(t * H + g) * 2], im = f < H ? in[(t * H + g) * 2 + 1] : -in[(t * H + g) * 2 + 1];
          const double a = 2 * kPi * static_cast<double>((f * j) % B) / static_cast<double>(B);
          s += re * std::cos(a) - im * std::sin(a);
        }
        out[t * B + j] = static_cast<float>(s);
      }
    ++transforms;
    return true;
  }
  void Out(const float* yp, const float* bias, bool relu, float* y, const CircShape& c) override {
    for (int64_t i = 0; i < c.M * c.N; ++i) CircOutAt(yp, bias, relu, y, c, i);
  }
  int transforms = 0;
};

TEST(CudaCirculantBodies, FftPathMatchesReference) {
  RegisterAllOps();
  struct Case {
    int64_t m, n, k, block;
    bool bias, relu;
    int64_t chunk;
  };
  // Blocks odd and even, padding rows and columns (N, K not multiples of B), B = 1, chunks.
  const Case cases[] = {{1, 1, 1, 1, false, false, 1},  {3, 8, 8, 4, true, false, 3},   {5, 10, 7, 4, true, true, 2},
                        {4, 9, 13, 5, false, true, 4}, {7, 16, 32, 16, true, false, 3}, {2, 6, 4, 3, true, false, 1}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                 " block=" + std::to_string(c.block) + " chunk=" + std::to_string(c.chunk));
    const CirculantAttrs a{c.block, c.n, c.k};
    std::vector<Tensor> in{RandomFloat({c.m, c.k}, seed++), RandomFloat({a.p(), a.q(), c.block}, seed++)};
    if (c.bias) in.push_back(RandomFloat({c.n}, seed++));
    AttributeMap attrs;
    attrs.Set("block", Attribute::Int(c.block));
    attrs.Set("out_features", Attribute::Int(c.n));
    attrs.Set("in_features", Attribute::Int(c.k));
    auto want = RunNode(MakeNode("BlockCirculantMatMul", static_cast<int>(in.size()), 1, attrs, kWhittleDomain), 17, in,
                        Backend::kReference, 1, true);
    ASSERT_TRUE(want.ok()) << want.status().message();
    Tensor expect = (*want)[0];
    if (c.relu)
      for (int64_t i = 0; i < expect.numel(); ++i) expect.data<float>()[i] = std::max(expect.data<float>()[i], 0.f);
    const CircShape shape = CircShapeOf(a);
    const std::vector<float> cf = CirculantSpectra(in[1].data<float>(), shape.P, shape.Q, shape.B);
    std::vector<float> scratch(static_cast<size_t>(CircScratchFloats(shape, c.chunk)));
    Tensor got(DType::kFloat32, {c.m, c.n});
    DftLaunches L;
    ASSERT_TRUE(RunCirculant(L, shape, cf.data(), c.bias ? in[2].data<float>() : nullptr, c.relu, in[0].data<float>(),
                             c.m, c.chunk, got.data<float>(), scratch.data()));
    EXPECT_EQ(L.transforms, 2 * ((c.m + c.chunk - 1) / c.chunk));
    EXPECT_TRUE(TensorsClose(got, expect, 1e-4f, 1e-4f));
  }
}

}  // namespace
}  // namespace whittle::cuda
