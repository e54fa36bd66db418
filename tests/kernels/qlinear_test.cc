// Integer linear kernels (QGemm, QConv, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger,
// DynamicQuantizeLinear): hand-computed cases (rounding ties, bias, Relu, per-channel), the fast
// CPU kernels bit-identical to the reference loops on random shapes (odd sizes, u8/s8, per-tensor
// and per-channel, constant and per-call weights, 1 and 2 threads; our kernel and, on CPUs with
// AVX512-VNNI, oneDNN and the automatic split), and bad quantization
// parameters rejected with a message naming the node and the parameter. The ONNX backend test
// data (tests/conformance) checks the reference against values we did not compute.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/depthwise_window.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/qgemm_tile.h"
#include "kernels/reference/qlinear.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomInt8;
using ::whittle::testing::RandomUInt8;
using ::whittle::testing::TensorsClose;

constexpr const char* kDomain = "ai.whittle";

// The int8 GEMM backends to check bit-exactness under: ours always (the byte kernel where it is
// exact, and the int16 kernel alone); oneDNN (forced, and the automatic split) only where it
// accumulates exactly (AVX512-VNNI).
std::vector<QGemmBackend> BackendsToCheck() {
  if (!CpuHasVnni()) {
    static bool said = false;
    if (!said) std::printf("[ qlinear ] oneDNN int8 backend not checked: oneDNN runs without AVX512-VNNI here, where "
                           "oneDNN's u8 x s8 GEMM saturates and Whittle never uses it\n");
    said = true;
    return {QGemmBackend::kOwn, QGemmBackend::kOwn16};
  }
  return {QGemmBackend::kOwn, QGemmBackend::kOwn16, QGemmBackend::kOneDnn, QGemmBackend::kAuto};
}

const char* BackendName(QGemmBackend b) {
  return b == QGemmBackend::kOwn     ? "own"
         : b == QGemmBackend::kOwn16 ? "own16"
         : b == QGemmBackend::kOneDnn ? "onednn"
                                      : "auto";
}

// Restores the automatic choice when a test ends.
struct ScopedBackend {
  explicit ScopedBackend(QGemmBackend b) { SetQGemmBackend(b); }
  ~ScopedBackend() { SetQGemmBackend(QGemmBackend::kAuto); }
};

// The byte kernel's tiles to check: the AVX-512 VNNI one where the CPU has it (the default there),
// and the 4 x 16 one the other CPUs run.
std::vector<int> ByteTilesToCheck() {
  if (qgemm_internal::Q8Avx512Vnni()) return {-1, 0};
  return {-1};
}
struct ScopedByteTile {
  explicit ScopedByteTile(int use) { qgemm_internal::SetQ8Avx512Vnni(use); }
  ~ScopedByteTile() { qgemm_internal::SetQ8Avx512Vnni(-1); }
};

Tensor RandomBytes(DType dt, const Dims& dims, uint32_t seed) {
  return dt == DType::kUInt8 ? RandomUInt8(dims, seed) : RandomInt8(dims, seed);
}

Tensor ByteScalar(DType dt, int v) {
  return dt == DType::kUInt8 ? Tensor::Scalar<uint8_t>(static_cast<uint8_t>(v)) : Tensor::Scalar<int8_t>(static_cast<int8_t>(v));
}

Tensor ByteVector(DType dt, const std::vector<int>& v) {
  Tensor t(dt, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kUInt8) t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
    else t.data<int8_t>()[i] = static_cast<int8_t>(v[i]);
  }
  return t;
}

Node WithAbsent(Node n, const std::vector<Tensor>& in) {
  for (size_t i = 0; i < in.size() && i < n.inputs.size(); ++i)
    if (!in[i].defined()) n.inputs[i] = -1;
  return n;
}

// Every built backend vs the reference (1 thread) with constant and per-call inputs at 1 and 2
// threads, bit for bit. Returns the reference output.
Tensor ExpectBitExact(const Node& node, const std::vector<Tensor>& in, int opset = 13) {
  Tensor ref;
  for (bool as_const : {false, true}) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(node.op_type + " const=" + std::to_string(as_const) + " threads=" + std::to_string(threads));
      auto outs = ExpectBackendsMatchReference(node, in, 0.f, 0.f, opset, threads, as_const);
      if (!ref.defined() && !outs.empty()) ref = outs[0];
    }
  }
  return ref;
}

AttributeMap Relu() {
  AttributeMap a;
  a.Set("_activation", Attribute::String("Relu"));
  return a;
}

// a [2,3] u8 (zp 1, scale 0.5) x b [3,2] s8 (scales 1, 0.25) + bias [10, -8]:
// acc = [[-4, 8], [-4, 17]] + bias = [[6, 0], [6, 9]].
std::vector<Tensor> SmallGemmInputs() {
  return {Tensor::FromVector<uint8_t>({2, 3}, {1, 2, 3, 4, 5, 6}), Tensor::Scalar<float>(0.5f), Tensor::Scalar<uint8_t>(1),
          Tensor::FromVector<int8_t>({3, 2}, {1, -1, 2, 0, -3, 4}), Tensor::FromVector<float>({2}, {1.f, 0.25f}),
          Tensor::Scalar<int8_t>(0), Tensor(), Tensor(), Tensor::FromVector<int32_t>({2}, {10, -8})};
}

TEST(QLinearKernelsTest, QGemmFloatOutputByHand) {
  Tensor y = ExpectBitExact(MakeNode("QGemm", 9, 1, {}, kDomain), SmallGemmInputs());
  // S = 0.5 * [1, 0.25].
  EXPECT_TRUE(TensorsClose(y, Tensor::FromVector<float>({2, 2}, {3.f, 0.f, 3.f, 1.125f}), 0.f, 0.f));
}

TEST(QLinearKernelsTest, QGemmQuantizedOutputRoundsHalfToEven) {
  auto in = SmallGemmInputs();
  in[6] = Tensor::Scalar<float>(0.25f);  // M = [2, 0.5]
  in[7] = Tensor::Scalar<uint8_t>(3);
  Tensor y = ExpectBitExact(MakeNode("QGemm", 9, 1, {}, kDomain), in);
  // 6*2+3 = 15; 0+3; 15; 9*0.5 = 4.5 -> 4 (tie to even) + 3 = 7.
  EXPECT_TRUE(TensorsClose(y, Tensor::FromVector<uint8_t>({2, 2}, {15, 3, 15, 7})));
  // Negative bias pushes values below the zero point; Relu clamps them at y_zp.
  in[8] = Tensor::FromVector<int32_t>({2}, {-20, -8});  // acc + bias = [[-24, 0], [-24, 9]]
  Tensor plain = ExpectBitExact(MakeNode("QGemm", 9, 1, {}, kDomain), in);
  EXPECT_TRUE(TensorsClose(plain, Tensor::FromVector<uint8_t>({2, 2}, {0, 3, 0, 7})));  // -48+3 saturates at 0
  in[7] = Tensor::Scalar<uint8_t>(100);
  Tensor relu = ExpectBitExact(MakeNode("QGemm", 9, 1, Relu(), kDomain), in);
  EXPECT_TRUE(TensorsClose(relu, Tensor::FromVector<uint8_t>({2, 2}, {100, 100, 100, 104})));
}

TEST(QLinearKernelsTest, DynamicQuantizeLinearByHand) {
  // ONNX example: range [0, 255] -> scale 1... here [-1, 2]: scale 3/255, zp round(1/(3/255)) = 85.
  Tensor x = Tensor::FromVector<float>({4}, {-1.f, 0.f, 1.f, 2.f});
  for (Backend p : ::whittle::testing::TestedBackends()) {
    SCOPED_TRACE(BackendName(p));
    auto r = RunNode(MakeNode("DynamicQuantizeLinear", 1, 3), 11, {x}, p, 1);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_FLOAT_EQ((*r)[1].data<float>()[0], 3.f / 255.f);
    EXPECT_EQ((*r)[2].data<uint8_t>()[0], 85);
    EXPECT_TRUE(TensorsClose((*r)[0], Tensor::FromVector<uint8_t>({4}, {0, 85, 170, 255})));
    // All zeros: no range; zeros out, zero point 0.
    auto z = RunNode(MakeNode("DynamicQuantizeLinear", 1, 3), 11, {Tensor::FromVector<float>({2}, {0.f, 0.f})}, p, 1);
    ASSERT_TRUE(z.ok()) << z.status().message();
    EXPECT_EQ((*z)[2].data<uint8_t>()[0], 0);
    EXPECT_TRUE(TensorsClose((*z)[0], Tensor::FromVector<uint8_t>({2}, {0, 0})));
  }
}

struct Quant {
  DType x_dt = DType::kUInt8, w_dt = DType::kInt8;
  bool per_channel = true, bias = true, relu = false, quantized_out = true;
  bool clip = false;  // a fused Clip (quantized outputs only), see WithActivation
  bool symmetric_w = false;  // weight zero points all 0 (what --int8 emits)
  bool reduced_w = false;    // weights in [-63, 63] (reduce-range=1): the byte kernel's exact case
  DType y_dt = DType::kUInt8;
};

// Parameters that spread the outputs over the quantized range (with some saturation).
std::vector<Tensor> QParamsFor(const Quant& q, int64_t channels, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> ws(0.002f, 0.02f);
  std::uniform_int_distribution<int> zp(-20, 20), bias(-20000, 20000);
  const float x_scale = 0.02f;
  const int x_zp = q.x_dt == DType::kUInt8 ? 128 + zp(rng) : zp(rng);
  std::vector<float> w_scale(q.per_channel ? static_cast<size_t>(channels) : 1);
  for (float& s : w_scale) s = ws(rng);
  std::vector<int> w_zp(w_scale.size());
  for (int& z : w_zp) z = q.symmetric_w ? 0 : q.w_dt == DType::kInt8 ? zp(rng) : 128 + zp(rng);
  std::vector<Tensor> p(9);
  p[1] = Tensor::Scalar<float>(x_scale);
  p[2] = ByteScalar(q.x_dt, x_zp);
  p[4] = q.per_channel ? Tensor::FromVector<float>({channels}, w_scale) : Tensor::Scalar<float>(w_scale[0]);
  p[5] = q.per_channel ? ByteVector(q.w_dt, w_zp) : ByteScalar(q.w_dt, w_zp[0]);
  if (q.quantized_out) {
    p[6] = Tensor::Scalar<float>(x_scale * 0.01f * std::sqrt(static_cast<float>(K)) * 74.f * 74.f / 40.f);
    p[7] = ByteScalar(q.y_dt, q.y_dt == DType::kUInt8 ? 128 + zp(rng) : zp(rng));
  }
  if (q.bias) {
    std::vector<int32_t> b(static_cast<size_t>(channels));
    for (int32_t& v : b) v = bias(rng);
    p[8] = Tensor::FromVector<int32_t>({channels}, b);
  }
  return p;
}

// Random weights of q's type; reduced: halved into [-64, 63] and then clamped to [-63, 63].
Tensor WeightBytes(const Quant& q, const Dims& dims, uint32_t seed) {
  Tensor t = RandomBytes(q.w_dt, dims, seed);
  if (q.reduced_w && q.w_dt == DType::kInt8) {
    int8_t* p = t.data<int8_t>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<int8_t>(std::max(-63, p[i] / 2));
  }
  return t;
}

std::vector<Quant> QuantVariants() {
  std::vector<Quant> v;
  Quant q;
  v.push_back(q);                                              // u8 x s8, per-channel, bias, u8 out
  q.symmetric_w = true;                                        // ... with symmetric weights
  v.push_back(q);
  q.reduced_w = true;                                          // ... in [-63, 63]
  v.push_back(q);
  q.relu = true, q.per_channel = false;                        // ... per tensor, Relu
  v.push_back(q);
  q.x_dt = DType::kInt8, q.y_dt = DType::kInt8, q.relu = false;  // ... s8 activations
  v.push_back(q);
  q.clip = true;                                                 // ... with a fused Clip (ReLU6)
  v.push_back(q);
  q = Quant();
  q.clip = true;                                                 // u8, per-channel, Clip
  v.push_back(q);
  q = Quant();
  q.per_channel = false, q.bias = false, q.relu = true;        // per-tensor, Relu
  v.push_back(q);
  q.x_dt = DType::kInt8, q.y_dt = DType::kInt8, q.relu = false, q.bias = true;  // s8 activations
  v.push_back(q);
  q.quantized_out = false, q.relu = true, q.per_channel = true;                 // float output
  v.push_back(q);
  q.w_dt = DType::kUInt8, q.x_dt = DType::kUInt8, q.relu = false;               // u8 weights
  v.push_back(q);
  return v;
}

// A Clip-fused output stays within [zp - 40, zp + 60] (WithActivation's bounds); returns how
// many values sit on the lower and on the upper bound.
std::pair<int64_t, int64_t> ExpectClipped(const Tensor& y, const Tensor& y_zp) {
  const int zp = y_zp.dtype() == DType::kUInt8 ? y_zp.data<uint8_t>()[0] : y_zp.data<int8_t>()[0];
  std::pair<int64_t, int64_t> at_bounds{0, 0};
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int v = y.dtype() == DType::kUInt8 ? y.data<uint8_t>()[i] : y.data<int8_t>()[i];
    EXPECT_GE(v, zp - 40);
    EXPECT_LE(v, zp + 60);
    at_bounds.first += v == zp - 40;
    at_bounds.second += v == zp + 60;
  }
  return at_bounds;
}

// q's fused activation as the runtime's QDQ fusion sets it: Relu, or a Clip whose bounds cut the
// output's integer range at both ends (40 steps of the output scale below zero, 60 above), so
// every backend's narrowed clamp is exercised.
AttributeMap WithActivation(AttributeMap a, const Quant& q, const std::vector<Tensor>& in) {
  if (q.relu) a.Set("_activation", Attribute::String("Relu"));
  if (q.clip) {
    const float y_scale = in[6].data<float>()[0];
    a.Set("_activation", Attribute::String("Clip"));
    a.Set("_min", Attribute::Float(-40.f * y_scale));
    a.Set("_max", Attribute::Float(60.f * y_scale));
  }
  return a;
}

TEST(QLinearKernelsTest, QGemmCpuMatchesReference) {
  const std::vector<std::vector<int64_t>> shapes = {{1, 1, 1}, {5, 7, 3}, {17, 33, 19}, {64, 784, 32}, {64, 72, 128},
                                                    {3, 128, 10}, {9, 1, 40}, {4, 16, 16}};
  int64_t clipped_low = 0, clipped_high = 0;  // outputs on a fused Clip's bounds
  for (int tile : ByteTilesToCheck())
  for (QGemmBackend backend : BackendsToCheck()) {
  ScopedByteTile wide(tile);
  ScopedBackend use(backend);
  SCOPED_TRACE(std::string(BackendName(backend)) + (tile == 0 ? ", 4x16 byte tile" : ""));
  uint32_t seed = 1;
  for (const Quant& q : QuantVariants()) {
    for (const auto& s : shapes) {
      const int64_t M = s[0], K = s[1], N = s[2];
      auto in = QParamsFor(q, N, K, seed++);
      in[0] = RandomBytes(q.x_dt, {M, K}, seed++);
      in[3] = WeightBytes(q, {K, N}, seed++);
      SCOPED_TRACE("M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N));
      const Tensor y = ExpectBitExact(MakeNode("QGemm", 9, 1, WithActivation({}, q, in), kDomain), in);
      if (q.clip && y.defined()) {
        const auto b = ExpectClipped(y, in[7]);
        clipped_low += b.first, clipped_high += b.second;
      }
    }
  }
  }
  // The Clip cases cut into the outputs at both ends.
  EXPECT_GT(clipped_low, 0);
  EXPECT_GT(clipped_high, 0);
}

TEST(QLinearKernelsTest, QGemmBatchedAndVectorA) {
  Quant q;
  for (const Dims& a_dims : std::vector<Dims>{{2, 3, 21}, {21}, {2, 1, 5, 21}}) {
    auto in = QParamsFor(q, 9, 21, 7);
    in[0] = RandomBytes(q.x_dt, a_dims, 8);
    in[3] = RandomBytes(q.w_dt, {21, 9}, 9);
    Tensor y = ExpectBitExact(MakeNode("QGemm", 9, 1, {}, kDomain), in);
    Dims want = a_dims;
    want.back() = 9;
    EXPECT_EQ(y.dims(), want);
  }
}

TEST(QLinearKernelsTest, QLinearMatMulBroadcastBatches) {
  Quant q;
  q.bias = false;
  auto in = QParamsFor(q, 6, 13, 11);
  in.resize(8);
  in[0] = RandomBytes(q.x_dt, {3, 1, 5, 13}, 12);
  in[3] = RandomBytes(q.w_dt, {4, 13, 6}, 13);
  in[4] = Tensor::FromVector<float>({6}, {0.01f, 0.02f, 0.005f, 0.01f, 0.03f, 0.002f});
  in[5] = ByteVector(q.w_dt, {0, 1, -2, 3, 0, 5});
  Tensor y = ExpectBitExact(MakeNode("QLinearMatMul", 8, 1), in);
  EXPECT_EQ(y.dims(), (Dims{3, 4, 5, 6}));
}

TEST(QLinearKernelsTest, MatMulIntegerPerRowAndPerColumnZeroPoints) {
  std::vector<Tensor> in = {RandomUInt8({2, 5, 19}, 21), RandomInt8({19, 7}, 22),
                            ByteVector(DType::kUInt8, {1, 200, 3, 128, 0}), ByteVector(DType::kInt8, {0, -1, 2, 3, -4, 5, 6})};
  Tensor y = ExpectBitExact(MakeNode("MatMulInteger", 4, 1), in);
  // Check one element by hand against the definition.
  int32_t want = 0;
  for (int k = 0; k < 19; ++k)
    want += (in[0].data<uint8_t>()[5 * 19 + 1 * 19 + k] - 200) * (in[1].data<int8_t>()[k * 7 + 3] - 3);
  EXPECT_EQ(y.data<int32_t>()[1 * 35 + 1 * 7 + 3], want);
  // Without zero points.
  ExpectBitExact(MakeNode("MatMulInteger", 2, 1), {RandomInt8({9, 33}, 23), RandomInt8({33, 17}, 24)});
}

AttributeMap ConvAttrs(std::vector<int64_t> strides, std::vector<int64_t> pads, std::vector<int64_t> dilations,
                       int64_t group, bool relu) {
  AttributeMap a;
  a.Set("strides", Attribute::Ints(std::move(strides)));
  a.Set("pads", Attribute::Ints(std::move(pads)));
  a.Set("dilations", Attribute::Ints(std::move(dilations)));
  a.Set("group", Attribute::Int(group));
  if (relu) a.Set("_activation", Attribute::String("Relu"));
  return a;
}

struct ConvCase {
  Dims x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group;
};

// Each case under every quantization variant, QConv (with its fused activation) and, where it
// applies, QLinearConv, bit-exact on every backend.
void ExpectConvCasesBitExact(const std::vector<ConvCase>& cases, uint32_t seed) {
  for (const Quant& q : QuantVariants()) {
    for (const ConvCase& c : cases) {
      const int64_t M = c.w[0], K = c.w[1] * c.w[2] * (c.w.size() > 3 ? c.w[3] : 1);
      auto in = QParamsFor(q, M, K, seed++);
      in[0] = RandomBytes(q.x_dt, c.x, seed++);
      in[3] = WeightBytes(q, c.w, seed++);
      SCOPED_TRACE("x=" + DimsToString(c.x) + " w=" + DimsToString(c.w));
      ExpectBitExact(
          MakeNode("QConv", 9, 1, WithActivation(ConvAttrs(c.strides, c.pads, c.dilations, c.group, false), q, in), kDomain),
          in);
      if (!q.relu && !q.clip && q.quantized_out) {
        ExpectBitExact(MakeNode("QLinearConv", 9, 1, ConvAttrs(c.strides, c.pads, c.dilations, c.group, false)), in);
      }
    }
  }
}

TEST(QLinearKernelsTest, QConvCpuMatchesReference) {
  const std::vector<ConvCase> cases = {
      {{3, 1, 28, 28}, {16, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},      // CNN conv1
      {{2, 16, 14, 14}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},    // CNN conv2
      {{2, 6, 9, 7}, {9, 2, 3, 2}, {2, 1}, {0, 1, 2, 0}, {1, 2}, 3},         // grouped, strided, uneven pads
      {{2, 6, 9, 7}, {9, 2, 3, 2}, {1, 1}, {2, 1, 0, 3}, {2, 1}, 3},         // stride 1 (padded planes), dilated
      {{1, 3, 5, 40}, {4, 3, 2, 5}, {1, 1}, {1, 0, 0, 2}, {1, 3}, 1},        // stride 1, wide rows, odd K
      {{1, 5, 6, 6}, {7, 5, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},         // 1x1
      {{2, 4, 11}, {6, 4, 3}, {2}, {1, 1}, {1}, 1},                          // 1-D
      {{1, 2, 4, 5, 3}, {3, 2, 2, 3, 2}, {1, 2, 1}, {1, 0, 1, 0, 1, 0}, {1, 1, 1}, 1},  // 3-D
      // The channels-last byte kernel's cases (group 1): row segments with C % 4 != 0 (kw * C
      // rounded up to 4), tap segments (stride or dilation along W), channel counts above 16
      // (16 x 16 byte transposes with overlapping tails), no padding (transposed in place),
      // output channels past a 16-column panel, and one image large enough for threads inside
      // the GEMM.
      {{2, 5, 9, 8}, {6, 5, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      {{2, 2, 5, 5}, {3, 2, 5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}, 1},
      {{1, 20, 7, 9}, {17, 20, 3, 3}, {2, 2}, {0, 1, 1, 0}, {1, 1}, 1},
      {{3, 32, 6, 6}, {33, 32, 3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 1},
      {{2, 17, 16, 17}, {4, 17, 1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 1},
      {{1, 7, 1, 30}, {5, 7, 1, 4}, {1, 3}, {0, 1, 0, 2}, {1, 1}, 1},
      {{2, 1, 12, 11}, {8, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {{1, 16, 28, 28}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
      // Depthwise (group = C = M; the direct path over phase planes): MobileNet's 3x3 at strides 1
      // and 2, a 5x5 with uneven pads, a dilated one with stride 3, and short rows.
      {{2, 8, 9, 11}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},
      {{1, 16, 20, 20}, {16, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16},
      {{1, 5, 13, 12}, {5, 1, 5, 5}, {2, 1}, {2, 1, 1, 2}, {1, 1}, 5},
      {{2, 4, 14, 15}, {4, 1, 3, 2}, {3, 3}, {0, 2, 1, 0}, {2, 3}, 4},
      {{1, 32, 5, 5}, {32, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 32},
  };
  for (int tile : ByteTilesToCheck())
  for (QGemmBackend backend : BackendsToCheck()) {
    ScopedByteTile wide(tile);
    ScopedBackend use(backend);
    SCOPED_TRACE(std::string(BackendName(backend)) + (tile == 0 ? ", 4x16 byte tile" : ""));
    ExpectConvCasesBitExact(cases, 100);
  }
}

// Depthwise convs through every CPU path: the window kernels (AVX-512 VBMI + VNNI, and AVX2, each
// where the CPU has it) and the tap-by-tap one. Kernel rows of 1 to 7 taps (one and two groups of 4), strides 1
// to 4, dilations, and rows the window kernel cannot load at once (stride 4 with dilation 2).
TEST(QLinearKernelsTest, DepthwiseEveryPathMatchesTheReference) {
  const std::vector<ConvCase> cases = {
      {{2, 8, 9, 11}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 8},
      {{1, 16, 20, 20}, {16, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 16},  // MobileNet's stride 2
      {{1, 5, 13, 12}, {5, 1, 5, 5}, {2, 1}, {2, 1, 1, 2}, {1, 1}, 5},
      {{2, 4, 14, 15}, {4, 1, 3, 2}, {3, 3}, {0, 2, 1, 0}, {2, 3}, 4},
      {{1, 3, 12, 12}, {3, 1, 7, 7}, {1, 1}, {3, 3, 3, 3}, {1, 1}, 3},      // two groups of taps per row
      {{1, 4, 17, 19}, {4, 1, 5, 5}, {2, 2}, {2, 2, 2, 2}, {1, 1}, 4},      // MobileNetV3's 5x5, stride 2
      {{2, 3, 11, 13}, {3, 1, 3, 1}, {1, 1}, {1, 0, 1, 0}, {1, 1}, 3},      // one tap per row
      {{1, 2, 16, 23}, {2, 1, 3, 3}, {2, 2}, {2, 2, 2, 2}, {2, 2}, 2},      // stride and dilation 2
      {{1, 2, 15, 30}, {2, 1, 3, 4}, {3, 4}, {1, 1, 1, 2}, {1, 1}, 2},      // stride 4: bytes up to 63
      {{1, 2, 10, 40}, {2, 1, 2, 3}, {1, 4}, {0, 1, 1, 0}, {1, 2}, 2},      // stride 4, dilation 2
      {{1, 64, 7, 7}, {64, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 64},     // MobileNetV2's last planes
  };
  struct ScopedWindow {
    explicit ScopedWindow(int use) { cpu::depthwise::SetWindowKernel(use); }
    ~ScopedWindow() { cpu::depthwise::SetWindowKernel(-1); }
  };
  for (int window : {-1, 2, 0}) {
    ScopedWindow use(window);
    SCOPED_TRACE(window == 0 ? "tap by tap" : window == 2 ? "AVX2 window kernel" : "automatic");
    ExpectConvCasesBitExact(cases, 900);
  }
}

// QConv with a fused max pool (_max_pool, runtime/rewrite/fuse_qconv_pool.h): every backend
// bit-identical to the reference, and the reference equal to the unfused pair run as two nodes
// (QConv, then MaxPool on its bytes). Covers the CPU's pooled channels-last kernel (constant
// weights) and the scratch-then-pool fallback (weights per call), square and non-square windows,
// conv outputs that the window does not divide (floor mode), 1-D, threads inside one image.
TEST(QLinearKernelsTest, QConvWithFusedMaxPoolMatchesConvThenPool) {
  struct PoolCase {
    ConvCase conv;
    std::vector<int64_t> window;
  };
  const std::vector<PoolCase> cases = {
      {{{3, 1, 28, 28}, {16, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, {2, 2}},      // CNN conv1 + pool
      {{{2, 16, 14, 14}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, {2, 2}},    // CNN conv2 + pool
      {{{2, 5, 11, 10}, {17, 5, 3, 3}, {1, 1}, {0, 1, 1, 0}, {1, 1}, 1}, {3, 3}},      // floor: rows/cols dropped
      {{{1, 8, 9, 12}, {6, 8, 3, 2}, {2, 1}, {1, 0, 1, 1}, {1, 2}, 1}, {1, 2}},        // strided, dilated, 1x2
      {{{2, 4, 13}, {6, 4, 3}, {1}, {1, 1}, {1}, 1}, {2}},                             // 1-D
      {{{1, 16, 28, 28}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1}, {2, 2}},    // threads inside the image
  };
  uint32_t seed = 700;
  for (QGemmBackend backend : BackendsToCheck()) {
    ScopedBackend use(backend);
    SCOPED_TRACE(BackendName(backend));
    for (const Quant& q : QuantVariants()) {
      for (const PoolCase& pc : cases) {
        const ConvCase& c = pc.conv;
        const int64_t M = c.w[0], K = c.w[1] * c.w[2] * (c.w.size() > 3 ? c.w[3] : 1);
        auto in = QParamsFor(q, M, K, seed++);
        in[0] = RandomBytes(q.x_dt, c.x, seed++);
        in[3] = WeightBytes(q, c.w, seed++);
        SCOPED_TRACE("x=" + DimsToString(c.x) + " w=" + DimsToString(c.w) + " window=" + DimsToString(pc.window));
        AttributeMap attrs = WithActivation(ConvAttrs(c.strides, c.pads, c.dilations, c.group, false), q, in);
        const Node plain = MakeNode("QConv", 9, 1, attrs, kDomain);
        attrs.Set("_max_pool", Attribute::Ints(pc.window));
        const Node fused = MakeNode("QConv", 9, 1, attrs, kDomain);
        Tensor pooled = ExpectBitExact(fused, in);
        ASSERT_TRUE(pooled.defined());
        // The same by two nodes on the reference backend.
        auto conv = RunNode(plain, 13, in, Backend::kReference, 1);
        ASSERT_TRUE(conv.ok()) << conv.status().message();
        ASSERT_NE((*conv)[0].dtype(), DType::kInt32);  // QConv outputs bytes or floats, which MaxPool takes
        AttributeMap pool_attrs;
        pool_attrs.Set("kernel_shape", Attribute::Ints(pc.window));
        pool_attrs.Set("strides", Attribute::Ints(pc.window));
        auto pool = RunNode(MakeNode("MaxPool", 1, 1, pool_attrs), 12, {(*conv)[0]}, Backend::kReference, 1);
        ASSERT_TRUE(pool.ok()) << pool.status().message();
        EXPECT_TRUE(TensorsClose(pooled, (*pool)[0], 0.f, 0.f));
      }
    }
  }
}

TEST(QLinearKernelsTest, ConvPaddingReadsTheZeroPoint) {
  // 1x1 input equal to its zero point, 3x3 kernel with pad 1: every tap adds 0, so only the bias remains.
  std::vector<Tensor> in(9);
  in[0] = Tensor::FromVector<uint8_t>({1, 1, 1, 1}, {77});
  in[1] = Tensor::Scalar<float>(1.f);
  in[2] = Tensor::Scalar<uint8_t>(77);
  in[3] = RandomInt8({2, 1, 3, 3}, 5);
  in[4] = Tensor::Scalar<float>(1.f);
  in[5] = Tensor::Scalar<int8_t>(0);
  in[8] = Tensor::FromVector<int32_t>({2}, {5, -3});
  Tensor y = ExpectBitExact(MakeNode("QConv", 9, 1, ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false), kDomain), in);
  EXPECT_TRUE(TensorsClose(y, Tensor::FromVector<float>({1, 2, 1, 1}, {5.f, -3.f}), 0.f, 0.f));
  // ConvInteger with the same zero point: int32 zeros.
  Tensor z = ExpectBitExact(MakeNode("ConvInteger", 4, 1, ConvAttrs({1, 1}, {1, 1, 1, 1}, {1, 1}, 1, false)),
                            {in[0], in[3], in[2], Tensor::Scalar<int8_t>(0)});
  EXPECT_TRUE(TensorsClose(z, Tensor::FromVector<int32_t>({1, 2, 1, 1}, {0, 0})));
}

TEST(QLinearKernelsTest, ConvIntegerPerChannelWeightZeroPoint) {
  ExpectBitExact(MakeNode("ConvInteger", 4, 1, ConvAttrs({1, 2}, {1, 0, 0, 1}, {2, 1}, 2, false)),
                 {RandomUInt8({2, 4, 7, 8}, 31), RandomUInt8({6, 2, 2, 3}, 32), Tensor::Scalar<uint8_t>(9),
                  ByteVector(DType::kUInt8, {0, 10, 128, 255, 3, 7})});
}

// The GEMM core on extreme values: exact int32 accumulation (no int16 saturation anywhere).
TEST(QLinearKernelsTest, GemmCoreExactOnExtremes) {
  const int64_t M = 7, K = 1001, N = 19;
  Tensor a(DType::kUInt8, {M, K}), b(DType::kInt8, {K, N});
  for (int64_t i = 0; i < a.numel(); ++i) a.data<uint8_t>()[i] = 255;
  for (int64_t i = 0; i < b.numel(); ++i) b.data<int8_t>()[i] = -128;
  std::vector<int32_t> zp0{0};
  QMatrix am{a.raw_data(), a.dtype(), K, &zp0}, bm{b.raw_data(), b.dtype(), N, &zp0};
  QPackedA pa;
  QPackedB pb;
  QPackA(am, M, K, &pa);
  QPackB(bm, K, N, &pb);
  std::vector<int32_t> y(static_cast<size_t>(M * N));
  QGemmPacked(pa, pb, Int32QOutput(), false, 0, y.data(), N, 2);
  for (int32_t v : y) ASSERT_EQ(v, 255 * -128 * 1001);
}

void ExpectRejected(const Node& node, const std::vector<Tensor>& in, const std::string& what) {
  const Node n = WithAbsent(node, in);
  for (Backend p : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(n, 13, in, p, 1, /*treat_inputs_as_const=*/true);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(node.name), std::string::npos) << r.status().message();
  }
}

TEST(QLinearKernelsTest, BadParametersRejected) {
  Node node = MakeNode("QGemm", 9, 1, {}, kDomain);
  node.name = "fc1_quant";
  auto in = SmallGemmInputs();
  auto bad = in;
  bad[1] = Tensor::Scalar<float>(0.f);
  ExpectRejected(node, bad, "a_scale must be finite and > 0");
  bad = in;
  bad[4] = Tensor::FromVector<float>({2}, {1.f, std::numeric_limits<float>::quiet_NaN()});
  ExpectRejected(node, bad, "b_scale must be finite and > 0");
  bad = in;
  bad[4] = Tensor::FromVector<float>({3}, {1.f, 1.f, 1.f});
  ExpectRejected(node, bad, "b_scale has 3 values, expected 1 or 2");
  bad = in;
  bad[5] = Tensor::FromVector<int8_t>({3}, {0, 0, 0});
  ExpectRejected(node, bad, "b_zero_point has 3 values");
  bad = in;
  bad[5] = Tensor::Scalar<uint8_t>(0);
  ExpectRejected(node, bad, "zero_point must have its data's type int8");
  bad = in;
  bad[6] = Tensor::Scalar<float>(-1.f);
  bad[7] = Tensor::Scalar<uint8_t>(0);
  ExpectRejected(node, bad, "y_scale must be finite and > 0");
  Node conv = MakeNode("QLinearConv", 8, 1);
  conv.name = "conv_q";
  std::vector<Tensor> cin = {RandomUInt8({1, 2, 4, 4}, 1), Tensor::Scalar<float>(0.1f), Tensor::Scalar<uint8_t>(3),
                             RandomInt8({3, 2, 3, 3}, 2), Tensor::FromVector<float>({2}, {0.1f, 0.1f}),
                             Tensor::Scalar<int8_t>(0), Tensor::Scalar<float>(0.2f), Tensor::Scalar<uint8_t>(0)};
  ExpectRejected(conv, cin, "w_scale has 2 values, expected 1 or 3");
}

}  // namespace
}  // namespace whittle
