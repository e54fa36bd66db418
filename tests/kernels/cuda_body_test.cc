// The CUDA backend's device code, run on the CPU: the bodies of kernels/cuda/*_body.h that the
// __global__ kernels are thin drivers of, executed block by block and thread by thread over the
// same grid (phase by phase where the kernel has __syncthreads), with the same host-side packing
// and launch sequence the CUDA kernels use (RunQGemm / RunQConv over QEmulatedLaunches), against
// the reference kernels — bit for bit, as integer ops must be. This checks the kernels'
// arithmetic, indexing, padding, zero-point algebra, grouping and chunking on any machine; it
// does not check that they run on a GPU (the kernel tests do that where there is one:
// TestedBackends()).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/common/quant_params.h"
#include "kernels/cuda/qepilogue_params.h"
#include "kernels/cuda/qgemm_body.h"
#include "kernels/cuda/quant_body.h"
#include "kernels/reference/qlinear.h"
#include "runtime/node_runner.h"
#include "tests/util/test_util.h"

namespace whittle::cuda {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::RandomInt8;
using ::whittle::testing::RandomUInt8;
using ::whittle::testing::TensorsClose;

constexpr const char* kDomain = "ai.whittle";

Tensor Bytes(DType t, const Dims& d, uint32_t seed) { return t == DType::kUInt8 ? RandomUInt8(d, seed) : RandomInt8(d, seed); }

Tensor ZeroPoints(DType t, int64_t n, uint32_t seed, bool zero) {
  Tensor z = n == 1 ? Tensor(t, {}) : Tensor(t, {n});
  if (zero) return z;
  Tensor r = Bytes(t, {n}, seed);
  std::memcpy(z.raw_data(), r.raw_data(), static_cast<size_t>(n));
  return z;
}

Tensor Scales(int64_t n, uint32_t seed, float lo, float hi) {
  Tensor s = RandomFloat({n}, seed, lo, hi);
  return n == 1 ? Tensor::FromVector<float>({}, {s.data<float>()[0]}) : s;
}

// The quantization parameters and output of one case (inputs in the QGemm/QConv order).
struct QCase {
  DType x_dt = DType::kUInt8, w_dt = DType::kInt8;
  bool w_zp_zero = true, x_zp_zero = false, per_channel = true, bias = true, relu = false;
  bool clip = false;  // a fused Clip(-1, 1.5) (quantized outputs): the epilogue's narrowed clamp
  enum { kFloatOut, kU8Out, kI8Out } out = kU8Out;
};

// The fused activation's internal attributes, as the runtime's QDQ fusion sets them.
AttributeMap ActAttrs(const QCase& c) {
  AttributeMap a;
  if (c.relu) a.Set("_activation", Attribute::String("Relu"));
  if (c.clip) {
    a.Set("_activation", Attribute::String("Clip"));
    a.Set("_min", Attribute::Float(-1.f));
    a.Set("_max", Attribute::Float(1.5f));
  }
  return a;
}

// inputs: x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias (undefined where absent).
std::vector<Tensor> QInputs(const QCase& c, const Tensor& x, const Tensor& w, int64_t channels, uint32_t seed) {
  std::vector<Tensor> in(9);
  in[0] = x;
  in[1] = Scales(1, seed + 1, 0.01f, 0.03f);
  in[2] = ZeroPoints(c.x_dt, 1, seed + 2, c.x_zp_zero);
  in[3] = w;
  in[4] = Scales(c.per_channel ? channels : 1, seed + 3, 0.002f, 0.01f);
  in[5] = ZeroPoints(c.w_dt, c.per_channel ? channels : 1, seed + 4, c.w_zp_zero);
  if (c.out == QCase::kU8Out || c.out == QCase::kI8Out) {
    in[6] = Tensor::FromVector<float>({}, {0.05f});
    in[7] = ZeroPoints(c.out == QCase::kU8Out ? DType::kUInt8 : DType::kInt8, 1, seed + 5, false);
  }
  if (c.bias) {
    Tensor b = ::whittle::testing::RandomInt64({channels}, seed + 6, -3000, 3000);
    std::vector<int32_t> v(static_cast<size_t>(channels));
    for (int64_t i = 0; i < channels; ++i) v[static_cast<size_t>(i)] = static_cast<int32_t>(b.data<int64_t>()[i]);
    in[8] = Tensor::FromVector<int32_t>({channels}, v);
  }
  return in;
}

// The QOutput the CUDA factory derives (kernels/cuda/qlinear.cc does the same calls).
QOutput OutputOf(const std::vector<Tensor>& in, int64_t channels, const AttributeMap& act, QChannelParams* xp,
                 QChannelParams* wp) {
  auto x = ReadQParams("t", "x_scale", &in[1], &in[2], in[0].dtype(), -1);
  auto w = ReadQParams("t", "w_scale", &in[4], &in[5], in[3].dtype(), channels);
  EXPECT_TRUE(x.ok() && w.ok());
  *xp = *x;
  *wp = *w;
  auto out = MakeQOutput("t", *x, *w, in[6].defined() ? &in[6] : nullptr, in[7].defined() ? &in[7] : nullptr,
                         in[8].defined() ? &in[8] : nullptr, channels, FusedActivation::FromAttrs(act));
  EXPECT_TRUE(out.ok()) << out.status().message();
  return *out;
}

// The reference op's output (the whole ai.whittle op through its reference kernel).
Tensor Reference(const std::string& op, const std::vector<Tensor>& in, AttributeMap attrs) {
  Node n = MakeNode(op, 9, 1, std::move(attrs), kDomain);
  std::vector<Tensor> inputs = in;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined()) n.inputs[i] = -1;
  auto r = RunNode(n, 17, inputs, Backend::kReference, 1, true);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? (*r)[0] : Tensor();
}

DType OutDType(const QOutput& o) { return o.kind == QOutput::Kind::kQuantized ? o.dtype : o.kind == QOutput::Kind::kFloat ? DType::kFloat32 : DType::kInt32; }

// max_rows: rows per launch (the grid's y limit, made small to check the slicing).
void RunGemmCase(const QCase& c, int64_t M, int64_t K, int64_t N, uint32_t seed, int64_t max_rows = kMaxGridYZ * kQTileM) {
  SCOPED_TRACE("QGemm M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
               " seed=" + std::to_string(seed));
  const Tensor x = Bytes(c.x_dt, {M, K}, seed), w = Bytes(c.w_dt, {K, N}, seed + 100);
  std::vector<Tensor> in = QInputs(c, x, w, N, seed);
  const AttributeMap attrs = ActAttrs(c);
  const Tensor want = Reference("QGemm", in, attrs);
  QChannelParams xp, wp;
  const QOutput out = OutputOf(in, N, attrs, &xp, &wp);
  const QPackedB packed = PackQGemmB(static_cast<const uint8_t*>(w.raw_data()), c.w_dt == DType::kUInt8, K, N, wp.zero_point);
  const bool x_u8 = c.x_dt == DType::kUInt8;
  const int32_t za = xp.zero_point[0] - (x_u8 ? 128 : 0);
  QGemmDevicePtrs ptrs{packed.bt.data(), packed.words.data(), packed.zero_point.data(), packed.colsum.data(), &za};
  Tensor got(OutDType(out), {M, N});
  std::vector<int32_t> rowsum(static_cast<size_t>(M));
  std::vector<int32_t> partial(static_cast<size_t>(QGemmScratchInts(std::min(M, max_rows), N, packed.Kw)));
  QEmulatedLaunches L;
  RunQGemm(L, packed, ptrs, static_cast<const uint8_t*>(x.raw_data()), x_u8, za, M,
           EpilogueParams(out, out.multiplier.data(), out.bias.data()), got.raw_data(),
           got.dtype() == DType::kFloat32 ? 4 : 1, rowsum.data(), partial.data(), max_rows);
  EXPECT_TRUE(TensorsClose(got, want, 0.f, 0.f));
}

// Few tiles and a long K: the product is split over K (the batch-64 Linear layers of the bundled
// models), the splits' sums added by the epilogue pass, bit for bit as unsplit.
TEST(CudaBodies, QGemmSplitKMatchesReferenceBitForBit) {
  const int64_t shapes[][3] = {{64, 1568, 128}, {64, 784, 256}, {1, 1001, 10}, {130, 702, 70}, {3, 100, 5}};
  uint32_t seed = 900;
  int split = 0;
  for (const auto& s : shapes) {
    split += QGemmKwPerSplit(s[0], s[2], CeilDiv(s[1], 4)) > 0;
    for (DType wdt : {DType::kInt8, DType::kUInt8}) {
      QCase c;
      c.w_dt = wdt;
      c.w_zp_zero = wdt == DType::kInt8;
      c.x_zp_zero = seed % 2 == 0;
      c.relu = seed % 3 == 0;
      RunGemmCase(c, s[0], s[1], s[2], seed++);
    }
  }
  EXPECT_EQ(split, 4);  // all but the K = 100 case (too few K words)
}

// Large products take cuBLAS's int8 GEMM (stood in for by the plain product): A to int8 with K
// padded by its zero point, B as [N][Kp], then the epilogue pass; bit for bit as the tiles.
TEST(CudaBodies, QGemmTensorCorePathMatchesReferenceBitForBit) {
  const int64_t shapes[][3] = {{1024, 784, 64}, {300, 1001, 120}};
  uint32_t seed = 950;
  for (const auto& s : shapes) {
    ASSERT_TRUE(QGemmUsesInt8Gemm(s[0], s[2], CeilDiv(s[1], 4)));
    for (DType wdt : {DType::kInt8, DType::kUInt8}) {
      QCase c;
      c.w_dt = wdt;
      c.w_zp_zero = wdt == DType::kInt8;  // uint8 weights: a non-zero zero point (row sums)
      c.x_zp_zero = false;
      c.relu = true;
      RunGemmCase(c, s[0], s[1], s[2], seed++);
    }
  }
}

TEST(CudaBodies, QGemmTileMatchesReferenceBitForBit) {
  uint32_t seed = 1;
  // Shapes across tile edges: K not a multiple of 4 or of the 32-byte step, N and M past 64.
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {64, 32, 64}, {65, 33, 70}, {130, 100, 17}, {7, 200, 129}};
  for (const auto& s : shapes) {
    for (DType xdt : {DType::kUInt8, DType::kInt8})
      for (DType wdt : {DType::kInt8, DType::kUInt8}) {
        QCase c;
        c.x_dt = xdt;
        c.w_dt = wdt;
        c.w_zp_zero = wdt == DType::kInt8 && (seed % 2 == 0);  // a non-zero weight zero point half the time
        c.x_zp_zero = seed % 3 == 0;
        RunGemmCase(c, s[0], s[1], s[2], seed++);
      }
  }
  // Every epilogue: int8/uint8 (with and without Relu or Clip), float, per-tensor, no bias.
  for (auto out : {QCase::kU8Out, QCase::kI8Out, QCase::kFloatOut})
    for (int act : {0, 1, 2})
      for (bool per_channel : {true, false}) {
        if (act == 2 && out == QCase::kFloatOut) continue;  // Clip is fused only before a QuantizeLinear
        const bool relu = act == 1;
        QCase c;
        c.out = out;
        c.relu = relu;
        c.clip = act == 2;
        c.per_channel = per_channel;
        c.bias = !relu;
        c.w_zp_zero = false;
        RunGemmCase(c, 37, 45, 66, seed++);
      }
  // Calls past the grid's row limit go in slices (here of 64 and of 100 rows).
  for (int64_t max_rows : {int64_t{64}, int64_t{100}}) {
    QCase c;
    c.w_dt = DType::kUInt8;  // non-zero weight zero point: the row sums are sliced too
    c.w_zp_zero = false;
    RunGemmCase(c, 230, 45, 20, seed++, max_rows);
    c.out = QCase::kFloatOut;
    RunGemmCase(c, 130, 9, 70, seed++, max_rows);
  }
}

struct ConvGeo {
  int64_t N, C, H, W, M, kh, kw, group, stride, pad, dil;
};

void RunConvCase(const QCase& c, const ConvGeo& g, int64_t chunk, uint32_t seed) {
  SCOPED_TRACE("QConv C=" + std::to_string(g.C) + " M=" + std::to_string(g.M) + " k=" + std::to_string(g.kh) + "x" +
               std::to_string(g.kw) + " group=" + std::to_string(g.group) + " stride=" + std::to_string(g.stride) +
               " pad=" + std::to_string(g.pad) + " dil=" + std::to_string(g.dil) + " seed=" + std::to_string(seed));
  const Tensor x = Bytes(c.x_dt, {g.N, g.C, g.H, g.W}, seed), w = Bytes(c.w_dt, {g.M, g.C / g.group, g.kh, g.kw}, seed + 7);
  std::vector<Tensor> in = QInputs(c, x, w, g.M, seed);
  AttributeMap attrs = ActAttrs(c);
  attrs.Set("group", Attribute::Int(g.group));
  attrs.Set("strides", Attribute::Ints({g.stride, g.stride}));
  attrs.Set("pads", Attribute::Ints({g.pad, g.pad, g.pad, g.pad}));
  attrs.Set("dilations", Attribute::Ints({g.dil, g.dil}));
  const Tensor want = Reference("QConv", in, attrs);
  QChannelParams xp, wp;
  const QOutput out = OutputOf(in, g.M, attrs, &xp, &wp);
  auto shape = ResolveQConvShape("t", attrs, x.dims(), w.dims());
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  QConvGeometry geo;
  geo.C = g.C;
  geo.M = g.M;
  geo.group = g.group;
  geo.in_h = g.H;
  geo.in_w = g.W;
  geo.out_h = shape->geo.out[0];
  geo.out_w = shape->geo.out[1];
  geo.k_h = g.kh;
  geo.k_w = g.kw;
  geo.stride_h = geo.stride_w = g.stride;
  geo.dil_h = geo.dil_w = g.dil;
  geo.pad_top = geo.pad_left = g.pad;
  const QPackedW packed = PackQConvW(static_cast<const uint8_t*>(w.raw_data()), c.w_dt == DType::kUInt8, g.M,
                                     w.numel() / g.M, wp.zero_point);
  const bool x_u8 = c.x_dt == DType::kUInt8;
  const int32_t zb = xp.zero_point[0] - (x_u8 ? 128 : 0);
  QConvDevicePtrs ptrs{packed.bytes.data(), packed.zero_point.data(), packed.rowsum.data(), &zb};
  // Every path forced: the dp4a tiles, the tensor-core path (the transposed columns, one product
  // per group over the chunk, the split epilogue) and, where K is short, the direct kernel.
  for (QConvPath path : {QConvPath::kTiles, QConvPath::kInt8Gemm, QConvPath::kDirect}) {
    if (path == QConvPath::kDirect && packed.Kp > kQDirectMaxKp) continue;
    SCOPED_TRACE(path == QConvPath::kTiles ? "tile path" : path == QConvPath::kInt8Gemm ? "tensor-core path" : "direct path");
    std::vector<int32_t> scratch(static_cast<size_t>(QConvScratchInts(geo, packed, chunk, path)));
    Tensor got(OutDType(out), want.dims());
    QEmulatedLaunches L;
    RunQConv(L, geo, packed, ptrs, static_cast<const uint8_t*>(x.raw_data()), x_u8, zb, g.N, chunk,
             EpilogueParams(out, out.multiplier.data(), out.bias.data()), got.raw_data(),
             got.dtype() == DType::kFloat32 ? 4 : 1, scratch.data(), path);
    EXPECT_TRUE(TensorsClose(got, want, 0.f, 0.f));
  }
}

TEST(CudaBodies, QConvIm2colTileMatchesReferenceBitForBit) {
  const ConvGeo geos[] = {
      {2, 1, 28, 28, 8, 3, 3, 1, 1, 1, 1},   // the bundled CNN's first layer shape
      {3, 6, 9, 7, 10, 3, 3, 2, 2, 1, 1},    // groups, stride 2, odd sizes
      {2, 5, 8, 8, 5, 3, 3, 5, 1, 2, 2},     // depthwise, dilation, pad 2
      {1, 16, 6, 6, 70, 1, 1, 1, 1, 0, 1},   // 1x1, M past one tile
      {2, 3, 11, 5, 4, 5, 2, 1, 3, 0, 1},    // non-square kernel, stride 3
  };
  uint32_t seed = 50;
  for (const ConvGeo& g : geos)
    for (DType xdt : {DType::kUInt8, DType::kInt8})
      for (bool w_zp_zero : {true, false}) {
        QCase c;
        c.x_dt = xdt;
        c.w_dt = w_zp_zero ? DType::kInt8 : DType::kUInt8;
        c.w_zp_zero = w_zp_zero;
        c.relu = seed % 2 == 1;
        c.out = seed % 3 == 0 ? QCase::kFloatOut : QCase::kU8Out;
        c.clip = !c.relu && c.out == QCase::kU8Out && seed % 4 == 0;
        RunConvCase(c, g, /*chunk=*/2, seed++);  // 3 images in chunks of 2 where N = 3
      }
}

// QuantizeLinear / DequantizeLinear bodies against the reference ops, per tensor and per axis,
// with rounding ties, saturation, NaN and infinities.
void ExpectQuantBodies(const Tensor& x, const Tensor& scale, const Tensor& zp, int64_t axis) {
  AttributeMap a;
  a.Set("axis", Attribute::Int(axis));
  auto want_q = RunNode(MakeNode("QuantizeLinear", 3, 1, a), 13, {x, scale, zp}, Backend::kReference, 1, true);
  ASSERT_TRUE(want_q.ok()) << want_q.status().message();
  auto layout = ResolveQuantLayout(x, scale, &zp, axis);
  ASSERT_TRUE(layout.ok());
  std::vector<int32_t> zv(static_cast<size_t>(zp.numel()));
  for (int64_t i = 0; i < zp.numel(); ++i) zv[static_cast<size_t>(i)] = static_cast<int32_t>(ZeroPointAt(&zp, i));
  Tensor q(zp.dtype(), x.dims());
  QuantizeArgs args;
  args.x = x.raw_data();
  args.y = q.raw_data();
  args.q_uint8 = zp.dtype() == DType::kUInt8;
  args.channels = layout->channels;
  args.inner = layout->inner;
  args.scale = scale.data<float>();
  args.zero_point = zv.data();
  for (int64_t i = 0; i < x.numel(); ++i) QuantizeAt(args, i);
  EXPECT_TRUE(TensorsClose(q, (*want_q)[0], 0.f, 0.f)) << "QuantizeLinear";
  auto want_d = RunNode(MakeNode("DequantizeLinear", 3, 1, a), 13, {q, scale, zp}, Backend::kReference, 1, true);
  ASSERT_TRUE(want_d.ok()) << want_d.status().message();
  Tensor d(DType::kFloat32, x.dims());
  args.x = q.raw_data();
  args.y = d.raw_data();
  for (int64_t i = 0; i < x.numel(); ++i) DequantizeAt(args, i);
  EXPECT_TRUE(TensorsClose(d, (*want_d)[0], 0.f, 0.f)) << "DequantizeLinear";
}

TEST(CudaBodies, QuantizeAndDequantizeMatchReferenceBitForBit) {
  Tensor x = RandomFloat({2, 3, 4, 5}, 9, -30.f, 30.f);
  float* p = x.data<float>();
  p[0] = 2.5f;  // ties: x / 1 at .5
  p[1] = -3.5f;
  p[2] = std::numeric_limits<float>::quiet_NaN();
  p[3] = std::numeric_limits<float>::infinity();
  p[4] = -std::numeric_limits<float>::infinity();
  p[5] = 1e30f;
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    ExpectQuantBodies(x, Tensor::FromVector<float>({}, {1.f}), ZeroPoints(t, 1, 3, false), 1);
    ExpectQuantBodies(x, Tensor::FromVector<float>({}, {0.1f}), ZeroPoints(t, 1, 4, false), 1);
    ExpectQuantBodies(x, Scales(3, 5, 0.05f, 0.2f), ZeroPoints(t, 3, 6, false), 1);   // per axis 1
    ExpectQuantBodies(x, Scales(5, 7, 0.05f, 0.2f), ZeroPoints(t, 5, 8, false), -1);  // per last axis
  }
}

TEST(CudaBodies, BytePoolMatchesReferenceMaxPool) {
  struct P {
    int64_t k, stride, pad, dil;
  };
  for (DType t : {DType::kUInt8, DType::kInt8})
    for (const P& c : {P{2, 2, 0, 1}, P{3, 1, 1, 1}, P{3, 2, 1, 2}, P{2, 3, 1, 1}}) {
      const Tensor x = Bytes(t, {2, 3, 9, 8}, 11);
      AttributeMap a;
      a.Set("kernel_shape", Attribute::Ints({c.k, c.k}));
      a.Set("strides", Attribute::Ints({c.stride, c.stride}));
      a.Set("pads", Attribute::Ints({c.pad, c.pad, c.pad, c.pad}));
      a.Set("dilations", Attribute::Ints({c.dil, c.dil}));
      auto want = RunNode(MakeNode("MaxPool", 1, 1, a), 12, {x}, Backend::kReference, 1, false);
      ASSERT_TRUE(want.ok()) << want.status().message();
      const Tensor& y = (*want)[0];
      Window2d w;
      w.in_h = 9;
      w.in_w = 8;
      w.out_h = y.dim(2);
      w.out_w = y.dim(3);
      w.k_h = w.k_w = c.k;
      w.stride_h = w.stride_w = c.stride;
      w.dil_h = w.dil_w = c.dil;
      w.pad_top = w.pad_left = w.pad_bottom = w.pad_right = c.pad;
      Tensor got(t, y.dims());
      for (int64_t i = 0; i < got.numel(); ++i) {
        if (t == DType::kUInt8) MaxPoolBytesAt(x.data<uint8_t>(), got.data<uint8_t>(), w, i);
        else MaxPoolBytesAt(x.data<int8_t>(), got.data<int8_t>(), w, i);
      }
      EXPECT_TRUE(TensorsClose(got, y, 0.f, 0.f)) << "k=" << c.k << " stride=" << c.stride << " pad=" << c.pad;
    }
}

// The same int8 ops as nodes with constant weights and parameters (what the QDQ fusion makes),
// on every backend this machine can run — the CUDA kernels themselves where there is a GPU —
// bit for bit against the reference.
TEST(CudaBodies, Int8OpsOnEveryTestedBackendMatchReference) {
  uint32_t seed = 200;
  for (DType wdt : {DType::kInt8, DType::kUInt8}) {
    QCase c;
    c.w_dt = wdt;
    c.w_zp_zero = wdt == DType::kInt8;
    // Relu with int8 weights, Clip with uint8 ones.
    c.relu = wdt == DType::kInt8;
    c.clip = !c.relu;
    const Tensor x = Bytes(c.x_dt, {5, 70}, seed), w = Bytes(c.w_dt, {70, 33}, seed + 1);
    std::vector<Tensor> in = QInputs(c, x, w, 33, seed);
    const AttributeMap act = ActAttrs(c);
    ::whittle::testing::ExpectBackendsMatchReference(MakeNode("QGemm", 9, 1, act, kDomain), in, 0.f, 0.f, 17, 2,
                                                     /*inputs_const=*/true);
    const Tensor cx = Bytes(c.x_dt, {2, 4, 10, 9}, seed + 2), cw = Bytes(c.w_dt, {6, 2, 3, 3}, seed + 3);
    std::vector<Tensor> cin = QInputs(c, cx, cw, 6, seed + 4);
    AttributeMap a = act;
    a.Set("group", Attribute::Int(2));
    a.Set("pads", Attribute::Ints({1, 1, 1, 1}));
    ::whittle::testing::ExpectBackendsMatchReference(MakeNode("QConv", 9, 1, a, kDomain), cin, 0.f, 0.f, 17, 2, true);
    a.Set("_max_pool", Attribute::Ints({2, 2}));  // the fused pool (window = stride)
    ::whittle::testing::ExpectBackendsMatchReference(MakeNode("QConv", 9, 1, a, kDomain), cin, 0.f, 0.f, 17, 2, true);
    seed += 10;
  }
  const Tensor x = RandomFloat({2, 3, 4, 5}, 5, -4.f, 4.f);
  const Tensor scale = Scales(3, 6, 0.02f, 0.05f), zp = ZeroPoints(DType::kUInt8, 3, 7, false);
  AttributeMap axis;
  axis.Set("axis", Attribute::Int(1));
  const auto q = ::whittle::testing::ExpectBackendsMatchReference(MakeNode("QuantizeLinear", 3, 1, axis), {x, scale, zp},
                                                                   0.f, 0.f, 13, 2, true);
  ASSERT_EQ(q.size(), 1u);
  ::whittle::testing::ExpectBackendsMatchReference(MakeNode("DequantizeLinear", 3, 1, axis), {q[0], scale, zp}, 0.f,
                                                   0.f, 13, 2, true);
}

}  // namespace
}  // namespace whittle::cuda
