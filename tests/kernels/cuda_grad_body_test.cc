// The CUDA training kernels' device code, run on the CPU: the bodies of kernels/cuda/grad_body.h
// over their whole ranges against the reference kernels of the ops they serve — col2im (after the
// product W^T dY the CUDA ConvGradInput leaves to cuBLAS) against ConvGradInput, the pool
// gradients against MaxPoolGrad (bit for bit: the same first maximum, the same order of
// additions) and AveragePoolGrad, the reductions (block and per-thread) against ReduceSum/ReduceMean/ReduceMax/ReduceMin, and
// BatchNormAt against BatchNormalization. The geometry cases cover strides, dilations,
// asymmetric padding, ceil_mode and groups. cuBLAS's part and the launches run on a GPU only
// (scripts/cuda-device-check.sh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/fused_activation.h"
#include "kernels/cuda/grad_body.h"
#include "kernels/cuda/unary_body.h"
#include "kernels/cuda/im2col_body.h"
#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle::cuda {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;

struct Geometry {
  int64_t c, h, w, k_h, k_w, stride, dil, pad_t, pad_l, pad_b, pad_r;
  bool ceil = false;
};

AttributeMap WindowAttrs(const Geometry& g) {
  AttributeMap a;
  a.Set("kernel_shape", Attribute::Ints({g.k_h, g.k_w}));
  a.Set("strides", Attribute::Ints({g.stride, g.stride}));
  a.Set("dilations", Attribute::Ints({g.dil, g.dil}));
  a.Set("pads", Attribute::Ints({g.pad_t, g.pad_l, g.pad_b, g.pad_r}));
  if (g.ceil) a.Set("ceil_mode", Attribute::Int(1));
  return a;
}

Window2d WindowFor(const Geometry& g, int64_t out_h, int64_t out_w) {
  Window2d w;
  w.in_h = g.h;
  w.in_w = g.w;
  w.out_h = out_h;
  w.out_w = out_w;
  w.k_h = g.k_h;
  w.k_w = g.k_w;
  w.stride_h = w.stride_w = g.stride;
  w.dil_h = w.dil_w = g.dil;
  w.pad_top = g.pad_t;
  w.pad_left = g.pad_l;
  w.pad_bottom = g.pad_b;
  w.pad_right = g.pad_r;
  return w;
}

std::string Name(const Geometry& g) {
  return "c" + std::to_string(g.c) + " " + std::to_string(g.h) + "x" + std::to_string(g.w) + " k" +
         std::to_string(g.k_h) + "x" + std::to_string(g.k_w) + " s" + std::to_string(g.stride) + " d" +
         std::to_string(g.dil) + " pads " + std::to_string(g.pad_t) + "," + std::to_string(g.pad_l) + "," +
         std::to_string(g.pad_b) + "," + std::to_string(g.pad_r) + (g.ceil ? " ceil" : "");
}

const Geometry kGeometries[] = {
    {3, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1},  {2, 9, 7, 3, 2, 2, 1, 0, 1, 1, 0}, {4, 10, 10, 3, 3, 2, 2, 2, 1, 0, 2},
    {1, 5, 6, 1, 1, 1, 1, 0, 0, 0, 0},  {2, 7, 7, 2, 2, 2, 1, 0, 0, 0, 0, true}, {3, 6, 5, 4, 3, 3, 1, 1, 2, 2, 1}};

// fn(geo, group, attrs) for every geometry Conv has (no ceil_mode) with 1 and 2 groups, attrs
// the window's and the group's, under a trace naming the case; a fatal failure stops the loop.
template <class Fn>
void ForEachGroupedConv(Fn fn) {
  for (const Geometry& geo : kGeometries)
    for (int64_t group : {int64_t{1}, int64_t{2}}) {
      if (geo.ceil) continue;
      SCOPED_TRACE(Name(geo) + " group " + std::to_string(group));
      AttributeMap attrs = WindowAttrs(geo);
      attrs.Set("group", Attribute::Int(group));
      fn(geo, group, attrs);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(CudaGradBodies, Col2imAfterTheProductIsConvGradInput) {
  RegisterAllOps();
  uint32_t seed = 1;
  ForEachGroupedConv([&](const Geometry& geo, int64_t group, const AttributeMap& attrs) {
    const int64_t N = 2, C = geo.c * group, M = 3 * group, Cg = geo.c, Mg = 3;
    const Tensor x = RandomFloat({N, C, geo.h, geo.w}, seed++);
    const Tensor w = RandomFloat({M, Cg, geo.k_h, geo.k_w}, seed++);
    auto y = RunNode(MakeNode("Conv", 2, 1, attrs), 17, {x, w}, Backend::kReference);
    ASSERT_TRUE(y.ok()) << y.status().message();
    const Tensor dy = RandomFloat((*y)[0].dims(), seed++);
    auto want = RunNode(MakeNode("ConvGradInput", 3, 1, attrs, kWhittleDomain), 17, {dy, w, x}, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();
    const Window2d win = WindowFor(geo, dy.dim(2), dy.dim(3));
    const int64_t Kg = Cg * geo.k_h * geo.k_w, P = win.out_h * win.out_w, HW = geo.h * geo.w;
    Tensor got(DType::kFloat32, x.dims());
    std::vector<float> col(static_cast<size_t>(Kg * P));
    for (int64_t n = 0; n < N; ++n)
      for (int64_t g = 0; g < group; ++g) {
        // col = W_g^T dY_g: what the CUDA kernel asks cuBLAS for.
        for (int64_t k = 0; k < Kg; ++k)
          for (int64_t p = 0; p < P; ++p) {
            double s = 0;
            for (int64_t m = 0; m < Mg; ++m)
              s += static_cast<double>(w.data<float>()[(g * Mg + m) * Kg + k]) * dy.data<float>()[(n * M + g * Mg + m) * P + p];
            col[static_cast<size_t>(k * P + p)] = static_cast<float>(s);
          }
        float* dx = got.data<float>() + (n * C + g * Cg) * HW;
        for (int64_t i = 0; i < Cg * HW; ++i) Col2imAt(col.data(), dx, win, i);
      }
    EXPECT_TRUE(TensorsClose(got, (*want)[0], 1e-5f, 1e-5f));
  });
}

// The im2col an entry at a time (entry i of col [channels * k_h * k_w, out_h * out_w]): the
// reference the per-window body is checked against.
void Im2colAt(const float* x, float* col, const Window2d& w, int64_t i) {
  const int64_t hw = w.out_h * w.out_w;
  const int64_t p = i % hw, r = i / hw;  // r = (c * k_h + kh) * k_w + kw
  const int64_t kw = r % w.k_w, kh = (r / w.k_w) % w.k_h, c = r / (w.k_w * w.k_h);
  const int64_t oh = p / w.out_w, ow = p % w.out_w;
  const int64_t ih = oh * w.stride_h - w.pad_top + kh * w.dil_h, iw = ow * w.stride_w - w.pad_left + kw * w.dil_w;
  col[i] = ih >= 0 && ih < w.in_h && iw >= 0 && iw < w.in_w ? x[(c * w.in_h + ih) * w.in_w + iw] : 0.f;
}

// The CUDA Conv's columns and epilogue: Im2colWindowAt in the per-image layout is Im2colAt bit for
// bit, and in the wide layout (the images' columns side by side) the product W_g x col into a
// channel-major [M, N, P] scratch, read back by ChannelMajorAt with the bias and a residual, is
// the reference Conv plus that residual.
TEST(CudaGradBodies, WideConvColumnsAndEpilogueAreTheConv) {
  RegisterAllOps();
  uint32_t seed = 90;
  ForEachGroupedConv([&](const Geometry& geo, int64_t group, const AttributeMap& attrs) {
    const int64_t N = 3, C = geo.c * group, M = 3 * group, Cg = geo.c, Mg = 3;
    const Tensor x = RandomFloat({N, C, geo.h, geo.w}, seed++);
    const Tensor w = RandomFloat({M, Cg, geo.k_h, geo.k_w}, seed++), b = RandomFloat({M}, seed++);
    auto want = RunNode(MakeNode("Conv", 3, 1, attrs), 17, {x, w, b}, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();
    const Tensor& y = (*want)[0];
    const Tensor r = RandomFloat(y.dims(), seed++);
    const Window2d win = WindowFor(geo, y.dim(2), y.dim(3));
    const int64_t Kg = Cg * geo.k_h * geo.k_w, P = win.out_h * win.out_w, HW = geo.h * geo.w;
    std::vector<float> t(static_cast<size_t>(M * N * P));
    for (int64_t g = 0; g < group; ++g) {
      std::vector<float> wide(static_cast<size_t>(Kg * N * P), -1.f), image(static_cast<size_t>(Kg * P), -1.f),
          per_entry(static_cast<size_t>(Kg * P), -2.f);
      for (int32_t n = 0; n < N; ++n) {
        const float* xg = x.data<float>() + (n * C + g * Cg) * HW;
        for (int32_t c = 0; c < Cg; ++c)
          for (int32_t p = 0; p < P; ++p) {
            Im2colWindowAt<int32_t>(xg, wide.data() + n * P, N * P, win, c, p);
            Im2colWindowAt<int32_t>(xg, image.data(), P, win, c, p);
          }
        for (int64_t i = 0; i < Kg * P; ++i) Im2colAt(xg, per_entry.data(), win, i);
        ASSERT_EQ(0, std::memcmp(image.data(), per_entry.data(), image.size() * sizeof(float)));
      }
      for (int64_t m = 0; m < Mg; ++m)  // t[g*Mg + m, n, p] = sum_k W_g[m, k] wide[k, n*P + p]
        for (int64_t q = 0; q < N * P; ++q) {
          double s = 0;
          for (int64_t k = 0; k < Kg; ++k)
            s += static_cast<double>(w.data<float>()[(g * Mg + m) * Kg + k]) * wide[static_cast<size_t>(k * N * P + q)];
          t[static_cast<size_t>((g * Mg + m) * N * P + q)] = static_cast<float>(s);
        }
    }
    Tensor got(DType::kFloat32, y.dims()), want_r(DType::kFloat32, y.dims());
    for (int32_t o = 0; o < y.numel(); ++o) {
      got.data<float>()[o] = ChannelMajorAt<int32_t>(t.data(), N, M, P, b.data<float>(), r.data<float>(), o);
      want_r.data<float>()[o] = y.data<float>()[o] + r.data<float>()[o];
    }
    EXPECT_TRUE(TensorsClose(got, want_r, 1e-5f, 1e-5f));
  });
}

TEST(CudaGradBodies, PoolGradientsMatchTheReference) {
  RegisterAllOps();
  uint32_t seed = 100;
  for (const Geometry& geo : kGeometries)
    for (const char* op : {"MaxPool", "AveragePool", "AveragePool+pad"}) {
      const bool max = std::string(op) == "MaxPool", include_pad = std::string(op) == "AveragePool+pad";
      if (!max && geo.dil != 1) continue;  // AveragePool's dilations need opset 19
      SCOPED_TRACE(Name(geo) + " " + op);
      AttributeMap attrs = WindowAttrs(geo);
      if (!max) attrs.Erase("dilations");
      if (include_pad) attrs.Set("count_include_pad", Attribute::Int(1));
      Tensor x = RandomFloat({2, geo.c, geo.h, geo.w}, seed++);
      if (max)  // ties: the first maximum in tap order must win, as on the CPU
        for (int64_t i = 0; i < x.numel(); i += 3) x.data<float>()[i] = 0.5f;
      auto y = RunNode(MakeNode(max ? "MaxPool" : "AveragePool", 1, 1, attrs), 17, {x}, Backend::kReference);
      ASSERT_TRUE(y.ok()) << y.status().message();
      const Tensor dy = RandomFloat((*y)[0].dims(), seed++);
      auto want = RunNode(MakeNode(max ? "MaxPoolGrad" : "AveragePoolGrad", 2, 1, attrs, kWhittleDomain), 17, {x, dy},
                          Backend::kReference);
      ASSERT_TRUE(want.ok()) << want.status().message();
      const Window2d win = WindowFor(geo, dy.dim(2), dy.dim(3));
      Tensor got(DType::kFloat32, x.dims());
      for (int64_t i = 0; i < x.numel(); ++i)
        PoolGradAt(max ? x.data<float>() : nullptr, dy.data<float>(), got.data<float>(), win, max ? 0 : 1, include_pad, i);
      if (max) {
        EXPECT_TRUE(got.BitwiseEquals((*want)[0]));
      } else {
        EXPECT_TRUE(TensorsClose(got, (*want)[0], 1e-6f, 1e-5f));
      }
    }
}

TEST(CudaGradBodies, ReductionsMatchReduceSumMeanMaxAndMin) {
  RegisterAllOps();
  const Tensor x = RandomFloat({3, 4, 5, 6}, 7);
  const std::vector<std::vector<int64_t>> axes_cases = {{0, 2, 3}, {1}, {-1}, {0}, {0, 1, 2, 3}, {1, 3}};
  const std::pair<const char*, int> ops[] = {
      {"ReduceSum", kReduceAdd}, {"ReduceMean", kReduceAdd}, {"ReduceMax", kReduceMax}, {"ReduceMin", kReduceMin}};
  for (const auto& axes : axes_cases)
    for (const auto& [op_name, op] : ops) {
      const bool mean = std::string(op_name) == "ReduceMean";
      SCOPED_TRACE(std::string(op_name) + " over " + std::to_string(axes.size()) + " axes");
      AttributeMap attrs;
      attrs.Set("axes", Attribute::Ints(axes));
      auto want = RunNode(MakeNode(op_name, 1, 1, attrs), 11, {x}, Backend::kReference);
      ASSERT_TRUE(want.ok()) << want.status().message();
      // The host side of the CUDA factory: kept and reduced axes with their strides.
      ReduceShape r;
      r.op = op;
      int64_t stride = 1, strides[4];
      for (int d = 3; d >= 0; --d) strides[d] = stride, stride *= x.dim(d);
      for (int d = 0; d < 4; ++d) {
        bool red = false;
        for (int64_t a : axes) red |= (a < 0 ? a + 4 : a) == d;
        int& n = red ? r.reduced_rank : r.kept_rank;
        (red ? r.reduced_dims : r.kept_dims)[n] = x.dim(d);
        (red ? r.reduced_strides : r.kept_strides)[n] = strides[d];
        ++n;
        (red ? r.count : r.outputs) *= x.dim(d);
      }
      r.scale = mean ? 1.f / static_cast<float>(r.count) : 1.f;
      ASSERT_EQ(r.outputs, (*want)[0].numel());
      Tensor got(DType::kFloat32, (*want)[0].dims()), serial(DType::kFloat32, (*want)[0].dims());
      constexpr int64_t kShares = 256;  // a block's threads
      for (int64_t o = 0; o < r.outputs; ++o) {
        float s[kShares];
        for (int64_t t = 0; t < kShares; ++t) s[t] = ReduceShareAt(x.data<float>(), r, o, t, kShares);
        for (int64_t w = kShares / 2; w > 0; w /= 2)
          for (int64_t t = 0; t < w; ++t) s[t] = ReduceCombine(r.op, s[t], s[t + w]);
        got.data<float>()[o] = s[0] * r.scale;
        // The short reductions' kernel: a thread per output, the elements in order.
        serial.data<float>()[o] = ReduceShareAt(x.data<float>(), r, o, 0, 1) * r.scale;
      }
      EXPECT_TRUE(TensorsClose(got, (*want)[0], 1e-5f, 1e-5f));
      EXPECT_TRUE(TensorsClose(serial, (*want)[0], 1e-5f, 1e-5f));
    }
}

// Transpose and Expand as the CUDA factories lay them out: y's index walks x at strides.
TEST(CudaGradBodies, StridedCopyIsTransposeAndExpand) {
  RegisterAllOps();
  const Tensor x = RandomFloat({2, 3, 4, 5}, 11);
  for (const std::vector<int64_t>& perm : std::vector<std::vector<int64_t>>{{0, 2, 3, 1}, {}, {1, 0, 3, 2}}) {
    SCOPED_TRACE("perm of " + std::to_string(perm.size()));
    AttributeMap attrs;
    if (!perm.empty()) attrs.Set("perm", Attribute::Ints(perm));
    auto want = RunNode(MakeNode("Transpose", 1, 1, attrs), 17, {x}, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();
    const int64_t strides[4] = {60, 20, 5, 1};
    BroadcastShape b;
    b.rank = 4;
    for (int d = 0; d < 4; ++d) {
      b.dims[d] = (*want)[0].dim(d);
      b.a_strides[d] = strides[perm.empty() ? 3 - d : perm[static_cast<size_t>(d)]];
    }
    Tensor got(DType::kFloat32, (*want)[0].dims());
    for (int64_t i = 0; i < got.numel(); ++i) StridedCopyAt(x.data<float>(), got.data<float>(), b, i);
    EXPECT_TRUE(got.BitwiseEquals((*want)[0]));
  }
  const Tensor small = RandomFloat({3, 1, 5}, 12);
  auto want = RunNode(MakeNode("Expand", 2, 1), 17, {small, Tensor::FromVector<int64_t>({4}, {2, 3, 4, 5})},
                      Backend::kReference);
  ASSERT_TRUE(want.ok()) << want.status().message();
  BroadcastShape b;
  b.rank = 4;
  const int64_t dims[4] = {2, 3, 4, 5}, strides[4] = {0, 5, 0, 1};  // small's, 0 along the broadcast dims
  for (int d = 0; d < 4; ++d) b.dims[d] = dims[d], b.a_strides[d] = strides[d];
  Tensor got(DType::kFloat32, (*want)[0].dims());
  for (int64_t i = 0; i < got.numel(); ++i) StridedCopyAt(small.data<float>(), got.data<float>(), b, i);
  EXPECT_TRUE(got.BitwiseEquals((*want)[0]));
}

// ConvTranspose as the CUDA factory computes it: the data gradient of the convolution from Y to X
// (W^T X_g per group, then col2im over Y's planes with that convolution's window), then the bias;
// strides, asymmetric pads, output_padding, dilation and groups.
TEST(CudaGradBodies, ConvTransposeIsTheConvolutionsDataGradient) {
  RegisterAllOps();
  struct Case {
    int64_t c_in, c_out, group, h, w, k, stride, dil;
    std::vector<int64_t> pads, out_pad;
  } cases[] = {{4, 6, 2, 5, 4, 3, 2, 1, {1, 1, 1, 1}, {1, 1}},
               {3, 2, 1, 4, 4, 2, 2, 1, {0, 0, 0, 0}, {0, 0}},
               {2, 3, 1, 3, 5, 3, 1, 2, {0, 1, 1, 0}, {0, 0}}};
  uint32_t seed = 70;
  for (const Case& c : cases) {
    SCOPED_TRACE("k " + std::to_string(c.k) + " stride " + std::to_string(c.stride) + " group " + std::to_string(c.group));
    const Tensor x = RandomFloat({2, c.c_in, c.h, c.w}, seed++), w = RandomFloat({c.c_in, c.c_out / c.group, c.k, c.k}, seed++),
                 b = RandomFloat({c.c_out}, seed++);
    AttributeMap a;
    a.Set("strides", Attribute::Ints({c.stride, c.stride}));
    a.Set("dilations", Attribute::Ints({c.dil, c.dil}));
    a.Set("pads", Attribute::Ints(c.pads));
    a.Set("output_padding", Attribute::Ints(c.out_pad));
    a.Set("group", Attribute::Int(c.group));
    auto want = RunNode(MakeNode("ConvTranspose", 3, 1, a), 17, {x, w, b}, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();
    const Tensor& y = (*want)[0];
    Window2d win;  // the convolution from Y (its input) to X (its output)
    win.in_h = y.dim(2), win.in_w = y.dim(3), win.out_h = c.h, win.out_w = c.w, win.k_h = c.k, win.k_w = c.k;
    win.stride_h = win.stride_w = c.stride, win.dil_h = win.dil_w = c.dil;
    win.pad_top = c.pads[0], win.pad_left = c.pads[1], win.pad_bottom = c.pads[2], win.pad_right = c.pads[3];
    const int64_t Mg = c.c_in / c.group, Cg = c.c_out / c.group, Kg = Cg * c.k * c.k, P = c.h * c.w;
    const int64_t HW = y.dim(2) * y.dim(3);
    Tensor got(DType::kFloat32, y.dims());
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t g = 0; g < c.group; ++g) {
        std::vector<float> col(static_cast<size_t>(Kg * P), 0.f);  // W_g^T [Kg, Mg] x X_g [Mg, P]
        for (int64_t r = 0; r < Kg; ++r)
          for (int64_t p = 0; p < P; ++p)
            for (int64_t m = 0; m < Mg; ++m)
              col[static_cast<size_t>(r * P + p)] +=
                  w.data<float>()[(g * Mg + m) * Kg + r] * x.data<float>()[((n * c.c_in) + g * Mg + m) * P + p];
        float* plane = got.data<float>() + (n * c.c_out + g * Cg) * HW;
        for (int64_t i = 0; i < Cg * HW; ++i) Col2imAt(col.data(), plane, win, i);
      }
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t ch = 0; ch < c.c_out; ++ch)
        for (int64_t i = 0; i < HW; ++i) got.data<float>()[(n * c.c_out + ch) * HW + i] += b.data<float>()[ch];
    EXPECT_TRUE(TensorsClose(got, y, 1e-5f, 1e-5f));
  }
}

// The 2-D CUDA convolutions and pools decline a node whose input rank static inference knows to
// be other than 4 (the suite's 1-D and 3-D ConvTranspose cases), so that it runs on the CPU
// instead of failing at run time; an unknown rank keeps the CUDA kernel (it checks per call).
// Whether this build has the CUDA backend (its factories then build device kernels, GPU or not).
bool CudaBuilt() {
  for (Backend b : BuiltBackends())
    if (b == Backend::kCuda) return true;
  return false;
}

TEST(CudaGradBodies, KnownNon2dRanksDeclineToTheCpu) {
  RegisterAllOps();
  const bool cuda_built = CudaBuilt();
  AttributeMap pool;
  pool.Set("kernel_shape", Attribute::Ints({2, 2}));
  struct Case {
    const char* op;
    int inputs;
    AttributeMap attrs;
  } cases[] = {{"ConvTranspose", 2, {}}, {"Conv", 2, {}}, {"MaxPool", 1, pool}, {"AveragePool", 1, pool}};
  for (const Case& c : cases) {
    for (int rank : {3, 4, 5, -1}) {
      SCOPED_TRACE(std::string(c.op) + " rank " + std::to_string(rank));
      const std::vector<DType> dts(static_cast<size_t>(c.inputs), DType::kFloat32);
      const std::vector<const Tensor*> consts(static_cast<size_t>(c.inputs), nullptr);
      auto k = CreateKernel(MakeNode(c.op, c.inputs, 1, c.attrs), 17, Backend::kCuda, dts, consts, Precision::kFp32,
                            std::vector<int>(static_cast<size_t>(c.inputs), rank));
      ASSERT_TRUE(k.ok()) << k.status().message();
      const bool on_gpu = cuda_built && (rank == 4 || rank == -1);
      EXPECT_EQ((*k)->device(), on_gpu ? DeviceType::kCuda : DeviceType::kCpu);
    }
  }
}

// Every activation the runtime fuses into Conv, Gemm and MatMul keeps the node on the GPU: Relu in
// the kernels' epilogue, the others (Clip for ReLU6, HardSwish, SiLU, ...) as the element-wise
// kernel on the output (before, such a node ran on the CPU with copies both ways). And the SiLU
// the element-wise kernel applies is the CPU's fused one.
TEST(CudaFusedActivation, EveryFusedActivationStaysOnTheDevice) {
  RegisterAllOps();
  const bool cuda_built = CudaBuilt();
  for (const char* act : {"", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid", "HardSwish", "Silu"}) {
    for (const char* op : {"Conv", "Gemm", "MatMul"}) {
      SCOPED_TRACE(std::string(op) + "+" + act);
      AttributeMap attrs;
      if (*act) attrs.Set("_activation", Attribute::String(act));
      if (std::string(act) == "Clip") {
        attrs.Set("_min", Attribute::Float(0.f));
        attrs.Set("_max", Attribute::Float(6.f));
      }
      const int inputs = std::string(op) == "MatMul" ? 2 : 3;
      const std::vector<DType> dts(static_cast<size_t>(inputs), DType::kFloat32);
      const std::vector<const Tensor*> consts(static_cast<size_t>(inputs), nullptr);
      const int rank = std::string(op) == "Conv" ? 4 : 2;
      auto k = CreateKernel(MakeNode(op, inputs, 1, attrs), 17, Backend::kCuda, dts, consts, Precision::kFp32,
                            std::vector<int>(static_cast<size_t>(inputs), rank));
      ASSERT_TRUE(k.ok()) << k.status().message();
      EXPECT_EQ((*k)->device(), cuda_built ? DeviceType::kCuda : DeviceType::kCpu);
    }
  }
  FusedActivation silu;
  silu.kind = FusedActivation::kSilu;
  for (float x : {-30.f, -4.5f, -1.f, -0.25f, 0.f, 0.3f, 2.f, 7.5f, 40.f}) {
    float want = x;
    silu.Apply(&want, 1);
    EXPECT_NEAR(cuda::Apply(cuda::Unary::kSilu, x, 0.f), want, 1e-6f * (1.f + std::fabs(want))) << x;
  }
}

TEST(CudaGradBodies, BatchNormMatchesTheReference) {
  RegisterAllOps();
  const int64_t N = 2, C = 3, H = 4, W = 5;
  std::vector<Tensor> in{RandomFloat({N, C, H, W}, 1), RandomFloat({C}, 2), RandomFloat({C}, 3), RandomFloat({C}, 4),
                         RandomFloat({C}, 5)};
  for (int64_t c = 0; c < C; ++c) in[4].data<float>()[c] = 0.5f + std::abs(in[4].data<float>()[c]);  // variances
  AttributeMap attrs;
  attrs.Set("epsilon", Attribute::Float(1e-3f));
  auto want = RunNode(MakeNode("BatchNormalization", 5, 1, attrs), 15, in, Backend::kReference);
  ASSERT_TRUE(want.ok()) << want.status().message();
  Tensor got(DType::kFloat32, in[0].dims());
  for (int64_t i = 0; i < got.numel(); ++i)
    BatchNormAt(in[0].data<float>(), in[1].data<float>(), in[2].data<float>(), in[3].data<float>(), in[4].data<float>(),
                1e-3f, C, H * W, got.data<float>(), i);
  EXPECT_TRUE(TensorsClose(got, (*want)[0], 1e-5f, 1e-5f));
}

}  // namespace
}  // namespace whittle::cuda
