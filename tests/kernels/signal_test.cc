// ONNX DFT (opsets 17 and 20): known spectra (impulse, constant, a cosine), forward then inverse
// is the identity, one-sided is the head of the full spectrum, dft_length pads and truncates, other
// axes and the opset-20 axis input, the inverse one-sided transform (irfft), float64, load-time
// shape inference and hostile attributes and inputs refused with a message.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/graph_builder.h"
#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::GraphBuilder;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;

AttributeMap Attrs(std::vector<std::pair<std::string, int64_t>> kv) {
  AttributeMap a;
  for (const auto& [k, v] : kv) a.Set(k, Attribute::Int(v));
  return a;
}

// A DFT node with inputs x[, dft_length][, axis]; an undefined tensor marks an absent input.
StatusOr<Tensor> Dft(const std::vector<Tensor>& in, AttributeMap attrs = {}, int opset = 17) {
  Node n = MakeNode("DFT", static_cast<int>(in.size()), 1, std::move(attrs));
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].defined()) n.inputs[i] = -1;
  auto out = RunNode(n, opset, in, Backend::kReference);
  if (!out.ok()) return out.status();
  return (*out)[0];
}

Tensor Real(const Dims& dims, const std::vector<float>& v) {
  Dims d = dims;
  d.push_back(1);
  return Tensor::FromVector<float>(d, v);
}

// The expected complex spectrum [1, N, 2] from interleaved (re, im) pairs.
Tensor Complex(int64_t n, const std::vector<std::complex<double>>& v) {
  std::vector<float> f;
  for (const auto& c : v) {
    f.push_back(static_cast<float>(c.real()));
    f.push_back(static_cast<float>(c.imag()));
  }
  return Tensor::FromVector<float>({1, n, 2}, f);
}

// The head of `full` along axis 1 (rank 3 [B, N, 2]): its first `bins` entries.
Tensor Head(const Tensor& full, int64_t bins) {
  const int64_t b = full.dims()[0], n = full.dims()[1];
  Tensor out(DType::kFloat32, {b, bins, 2});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t k = 0; k < bins * 2; ++k) out.data<float>()[i * bins * 2 + k] = full.data<float>()[i * n * 2 + k];
  return out;
}

TEST(Dft, ImpulseHasAFlatSpectrum) {
  auto y = Dft({Real({1, 4}, {1, 0, 0, 0})});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, Complex(4, {1, 1, 1, 1})));
  // A delayed impulse: X[k] = e^{-2 pi i k / 4} = 1, -i, -1, i.
  y = Dft({Real({1, 4}, {0, 1, 0, 0})});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, Complex(4, {{1, 0}, {0, -1}, {-1, 0}, {0, 1}}), 1e-6f));
}

TEST(Dft, ConstantIsOnlyTheDcBin) {
  auto y = Dft({Real({1, 5}, {2, 2, 2, 2, 2})});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, Complex(5, {10, 0, 0, 0, 0}), 1e-5f));
}

TEST(Dft, CosineHasTwoBins) {
  std::vector<float> x(8);
  for (int n = 0; n < 8; ++n) x[static_cast<size_t>(n)] = static_cast<float>(std::cos(2 * M_PI * 3 * n / 8.0));
  auto y = Dft({Real({1, 8}, x)});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, Complex(8, {0, 0, 0, 4, 0, 4, 0, 0}), 1e-5f));
  // One-sided: bins 0..4, the cosine's energy in bin 3 only.
  auto half = Dft({Real({1, 8}, x)}, Attrs({{"onesided", 1}}));
  ASSERT_TRUE(half.ok()) << half.status().message();
  EXPECT_TRUE(TensorsClose(*half, Complex(5, {0, 0, 0, 4, 0}), 1e-5f));
}

TEST(Dft, InverseUndoesForward) {
  for (int64_t c : {1, 2}) {
    SCOPED_TRACE("last dim " + std::to_string(c));
    const Tensor x = RandomFloat({2, 7, 3, c}, static_cast<uint32_t>(c));
    auto y = Dft({x});
    ASSERT_TRUE(y.ok()) << y.status().message();
    ASSERT_EQ(y->dims(), (Dims{2, 7, 3, 2}));
    auto back = Dft({*y}, Attrs({{"inverse", 1}}));
    ASSERT_TRUE(back.ok()) << back.status().message();
    // A real input comes back with a zero imaginary part.
    Tensor want(DType::kFloat32, {2, 7, 3, 2});
    for (int64_t i = 0; i < x.numel() / c; ++i) {
      want.data<float>()[2 * i] = x.data<float>()[i * c];
      want.data<float>()[2 * i + 1] = c == 2 ? x.data<float>()[i * c + 1] : 0.f;
    }
    EXPECT_TRUE(TensorsClose(*back, want, 1e-5f, 1e-5f));
  }
}

TEST(Dft, OnesidedIsTheHeadOfTheFullSpectrum) {
  for (int64_t n : {1, 2, 7, 8}) {
    SCOPED_TRACE("N " + std::to_string(n));
    const Tensor x = RandomFloat({3, n, 1}, static_cast<uint32_t>(n));
    auto full = Dft({x});
    auto half = Dft({x}, Attrs({{"onesided", 1}}));
    ASSERT_TRUE(full.ok() && half.ok());
    ASSERT_EQ(half->dims(), (Dims{3, n / 2 + 1, 2}));
    EXPECT_TRUE(TensorsClose(*half, Head(*full, n / 2 + 1)));
  }
}

TEST(Dft, DftLengthPadsAndTruncates) {
  const Tensor x = Real({1, 3}, {1, 2, 3});
  // Padded to 4: [1, 2, 3, 0] -> 6, -2-2i, 2, -2+2i.
  auto y = Dft({x, Tensor::Scalar<int64_t>(4)});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, Complex(4, {{6, 0}, {-2, -2}, {2, 0}, {-2, 2}}), 1e-5f));
  // Truncated to 2: [1, 2] -> 3, -1 (an int32 length works too).
  y = Dft({x, Tensor::FromVector<int32_t>({1}, {2})});
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, Complex(2, {3, -1}), 1e-6f));
  // One-sided of the padded signal: 4/2 + 1 bins.
  y = Dft({x, Tensor::Scalar<int64_t>(4)}, Attrs({{"onesided", 1}}));
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, Complex(3, {{6, 0}, {-2, -2}, {2, 0}}), 1e-5f));
}

// A batch of 2-D signals [2, 3, 4, 1] transformed along axis 2 (each row of 4), against the
// direct sum, with the opset-17 attribute, the opset-20 input and the opset-20 default (-2).
TEST(Dft, OtherAxes) {
  const Tensor x = RandomFloat({2, 3, 4, 1}, 9);
  Tensor want(DType::kFloat32, {2, 3, 4, 2});
  for (int64_t b = 0; b < 6; ++b)
    for (int64_t k = 0; k < 4; ++k) {
      std::complex<double> s;
      for (int64_t n = 0; n < 4; ++n)
        s += static_cast<double>(x.data<float>()[b * 4 + n]) * std::polar(1.0, -2 * M_PI * static_cast<double>(k * n) / 4);
      want.data<float>()[(b * 4 + k) * 2] = static_cast<float>(s.real());
      want.data<float>()[(b * 4 + k) * 2 + 1] = static_cast<float>(s.imag());
    }
  for (int64_t axis : {2, -2}) {
    auto y = Dft({x}, Attrs({{"axis", axis}}));
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_TRUE(TensorsClose(*y, want, 1e-5f)) << "opset 17 axis " << axis;
    y = Dft({x, Tensor(), Tensor::Scalar<int64_t>(axis)}, {}, 20);
    ASSERT_TRUE(y.ok()) << y.status().message();
    EXPECT_TRUE(TensorsClose(*y, want, 1e-5f)) << "opset 20 axis " << axis;
  }
  auto y = Dft({x}, {}, 20);
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_TRUE(TensorsClose(*y, want, 1e-5f)) << "opset 20 default axis";
  // Axis 1 differs (the columns): the test can tell the axes apart.
  y = Dft({x}, Attrs({{"axis", 1}}));
  ASSERT_TRUE(y.ok());
  EXPECT_FALSE(TensorsClose(*y, want, 1e-3f));
}

TEST(Dft, InverseOnesidedRebuildsTheRealSignal) {
  for (int64_t n : {6, 7}) {
    SCOPED_TRACE("N " + std::to_string(n));
    const Tensor x = RandomFloat({2, n, 1}, static_cast<uint32_t>(n));
    auto half = Dft({x}, Attrs({{"onesided", 1}}));
    ASSERT_TRUE(half.ok()) << half.status().message();
    // Even N is the default length (2 * (bins - 1)); odd N needs dft_length.
    std::vector<Tensor> in{*half};
    if (n % 2) in.push_back(Tensor::Scalar<int64_t>(n));
    auto back = Dft(in, Attrs({{"onesided", 1}, {"inverse", 1}}), n % 2 ? 17 : 20);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_TRUE(TensorsClose(*back, x, 1e-5f, 1e-5f));
  }
}

TEST(Dft, Float64AndBackendsAgree) {
  Tensor x(DType::kFloat64, {1, 3, 1});
  for (int i = 0; i < 3; ++i) x.data<double>()[i] = i + 1;
  auto y = Dft({x});
  ASSERT_TRUE(y.ok()) << y.status().message();
  ASSERT_EQ(y->dtype(), DType::kFloat64);
  EXPECT_NEAR(y->data<double>()[0], 6.0, 1e-12);
  EXPECT_NEAR(y->data<double>()[2], -1.5, 1e-12);
  EXPECT_NEAR(y->data<double>()[3], std::sqrt(3.0) / 2, 1e-12);
  ExpectBackendsMatchReference(MakeNode("DFT", 1, 1), {RandomFloat({2, 9, 2}, 4)});
}

TEST(Dft, LoadTimeShapes) {
  RegisterAllOps();
  struct Case {
    int opset;
    AttributeMap attrs;
    int64_t dft_length;  // -1: absent
    SymShape want;
  };
  const Case cases[] = {{17, {}, -1, {Dim::Symbol("b"), 10, 4, 2}},
                        {17, Attrs({{"onesided", 1}}), -1, {Dim::Symbol("b"), 6, 4, 2}},
                        {17, Attrs({{"axis", 2}}), 7, {Dim::Symbol("b"), 10, 7, 2}},
                        {20, Attrs({{"onesided", 1}, {"inverse", 1}}), -1, {Dim::Symbol("b"), 10, 6, 1}}};
  for (const Case& c : cases) {
    GraphBuilder gb(c.opset);
    gb.Input("x", DType::kFloat32, {Dim::Symbol("b"), 10, 4, 1});
    std::vector<std::string> in{"x"};
    if (c.dft_length >= 0) {
      gb.Init("len", Tensor::Scalar<int64_t>(c.dft_length));
      in.push_back("len");
    }
    if (c.opset >= 20) {
      gb.Init("axis", Tensor::Scalar<int64_t>(-2));
      in.resize(2);
      in.push_back("axis");
    }
    Graph g = gb.Op("DFT", in, {"y"}, c.attrs).Output("y").Build();
    ASSERT_TRUE(InferShapes(g).ok());
    const auto& s = g.value(g.FindValue("y")).shape;
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(SymShapeToString(*s), SymShapeToString(c.want));
  }
}

TEST(Dft, RefusesBadInputs) {
  struct Case {
    const char* what;
    std::vector<Tensor> in;
    AttributeMap attrs;
    int opset;
    const char* message;
  };
  const Tensor real = RandomFloat({1, 4, 1}, 1), cplx = RandomFloat({1, 4, 2}, 2);
  const Case cases[] = {
      {"last dim 3", {RandomFloat({1, 4, 3}, 3)}, {}, 17, "last dim must be 1 (real) or 2"},
      {"rank 1", {RandomFloat({4}, 3)}, Attrs({{"axis", 0}}), 17, "rank >= 2"},
      {"onesided complex", {cplx}, Attrs({{"onesided", 1}}), 17, "needs a real input"},
      {"axis out of range", {real}, Attrs({{"axis", 3}}), 17, "out of range"},
      {"axis on the last dim", {real}, Attrs({{"axis", -1}}), 17, "names the last dim"},
      {"axis input on the last dim", {real, Tensor(), Tensor::Scalar<int64_t>(2)}, {}, 20, "names the last dim"},
      {"negative dft_length", {real, Tensor::Scalar<int64_t>(-3)}, {}, 17, "dft_length must be >= 1"},
      {"zero dft_length", {real, Tensor::Scalar<int64_t>(0)}, {}, 17, "dft_length must be >= 1"},
      {"dft_length not a scalar", {real, Tensor::FromVector<int64_t>({2}, {2, 3})}, {}, 17, "must be a scalar"},
      {"float dft_length", {real, Tensor::Scalar<float>(4.f)}, {}, 17, "int32 or int64"},
      {"int input", {Tensor::FromVector<int64_t>({1, 2, 1}, {1, 2})}, {}, 17, "float32 or float64"},
      {"inverse 2", {real}, Attrs({{"inverse", 2}}), 17, "must be 0 or 1"},
      {"axis attribute at 20", {real}, Attrs({{"axis", 1}}), 20, "no axis attribute"},
      {"axis input at 17", {real, Tensor(), Tensor::Scalar<int64_t>(1)}, {}, 17, "at most 2 inputs"},
      {"irfft of one bin", {RandomFloat({1, 1, 2}, 4)}, Attrs({{"onesided", 1}, {"inverse", 1}}), 17, "needs dft_length"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto y = Dft(c.in, c.attrs, c.opset);
    ASSERT_FALSE(y.ok());
    EXPECT_NE(y.status().message().find(c.message), std::string::npos) << y.status().message();
  }
}

}  // namespace
}  // namespace whittle
