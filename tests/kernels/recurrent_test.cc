// RNN, GRU and LSTM kernels: hand-computed one-step cases (hidden 1, known weights) for each op
// on every backend, sequence lengths, reverse direction, layout 1, activations with alpha/beta,
// clip, bad attributes and inputs, and the CPU kernels against the reference over random inputs
// for every direction, with and without sequence_lens, constant and per-call weights.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tests/util/test_util.h"

namespace whittle {
namespace {

using ::whittle::testing::ExpectBackendsMatchReference;
using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;

AttributeMap Attrs(std::vector<std::pair<std::string, Attribute>> kv) {
  AttributeMap m;
  for (auto& [k, v] : kv) m.Set(k, v);
  return m;
}

Tensor F(const Dims& dims, const std::vector<float>& v) { return Tensor::FromVector<float>(dims, v); }

double Sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Node with n_in inputs (undefined tensors become absent inputs) and n_out outputs.
Node RecurrentNode(const std::string& op, const std::vector<Tensor>& in, int n_out, AttributeMap attrs = {}) {
  Node n = MakeNode(op, static_cast<int>(in.size()), n_out, std::move(attrs));
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].defined()) n.inputs[i] = -1;
  return n;
}

// Runs on every backend; expects each output i in `want` (flattened) within 1e-5.
void ExpectOutputs(const Node& n, const std::vector<Tensor>& in, const std::vector<std::vector<double>>& want,
                   int opset = 17) {
  for (Backend b : ::whittle::testing::TestedBackends()) {
    SCOPED_TRACE(BackendName(b));
    auto r = RunNode(n, opset, in, b, 1);
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (size_t o = 0; o < want.size(); ++o) {
      if (want[o].empty()) continue;
      const Tensor& t = (*r)[o];
      ASSERT_EQ(t.numel(), static_cast<int64_t>(want[o].size())) << "output " << o;
      for (size_t k = 0; k < want[o].size(); ++k)
        EXPECT_NEAR(t.data<float>()[k], want[o][k], 1e-5) << "output " << o << " element " << k;
    }
  }
}

TEST(RnnKernel, OneStepHandComputed) {
  // H = tanh(0.5*1 + 0.3*2 + 0.1 + 0.2)
  const std::vector<Tensor> in = {F({1, 1, 1}, {1}), F({1, 1, 1}, {0.5f}), F({1, 1, 1}, {0.3f}),
                                  F({1, 2}, {0.1f, 0.2f}), Tensor(), F({1, 1, 1}, {2})};
  const double h = std::tanh(1.4);
  ExpectOutputs(RecurrentNode("RNN", in, 2), in, {{h}, {h}});
}

TEST(RnnKernel, ReverseWithSequenceLengths) {
  // Hidden 1, W = 1, R = 0.5, no bias: H_t = tanh(x_t + 0.5 H); batch 2 with lengths 3 and 1.
  const std::vector<float> x = {0.1f, 0.4f, 0.2f, 0.5f, 0.3f, 0.6f};  // [seq 3, batch 2, 1]
  Tensor lens = Tensor::FromVector<int32_t>({2}, {3, 1});
  const std::vector<Tensor> in = {F({3, 2, 1}, x), F({1, 1, 1}, {1}), F({1, 1, 1}, {0.5f}), Tensor(), lens};
  // Reverse: batch 0 runs t = 2, 1, 0; batch 1 runs t = 0 only.
  const double h02 = std::tanh(0.3), h01 = std::tanh(0.2 + 0.5 * h02), h00 = std::tanh(0.1 + 0.5 * h01);
  const double h10 = std::tanh(0.4);
  // Y [3, 1, 2, 1]: past batch 1's length it is zero.
  ExpectOutputs(RecurrentNode("RNN", in, 2, Attrs({{"direction", Attribute::String("reverse")}})), in,
                {{h00, h10, h01, 0, h02, 0}, {h00, h10}});
  // Forward: batch 1 stops after t = 0, and Y_h is its state there.
  const double f00 = std::tanh(0.1), f01 = std::tanh(0.2 + 0.5 * f00), f02 = std::tanh(0.3 + 0.5 * f01);
  ExpectOutputs(RecurrentNode("RNN", in, 2), in, {{f00, h10, f01, 0, f02, 0}, {f02, h10}});
  // A zero length leaves Y and Y_h zero (ONNX Runtime's reading: there is no last step).
  Tensor lens0 = Tensor::FromVector<int32_t>({2}, {3, 0});
  const std::vector<Tensor> in0 = {F({3, 2, 1}, x), F({1, 1, 1}, {1}), F({1, 1, 1}, {0.5f}), Tensor(), lens0,
                                   F({1, 2, 1}, {0.f, 0.7f})};
  ExpectOutputs(RecurrentNode("RNN", in0, 2), in0, {{f00, 0, f01, 0, f02, 0}, {f02, 0}});
}

TEST(RnnKernel, ActivationsWithAlphaBeta) {
  // x = -2, W = 1, R = 0: H = act(-2). Alphas and betas are consumed in order by the
  // activations that take them; defaults otherwise.
  struct Case {
    std::string act;
    std::vector<float> alpha, beta;
    double want;
  };
  const double x = -2;
  const std::vector<Case> cases = {
      {"Relu", {}, {}, 0},
      {"Sigmoid", {}, {}, Sig(x)},
      {"LeakyRelu", {}, {}, 0.01 * x},
      {"LeakyRelu", {0.5f}, {}, 0.5 * x},
      {"Affine", {2}, {3}, 2 * x + 3},
      {"Affine", {}, {}, x},
      {"ThresholdedRelu", {-3}, {}, x},
      {"ThresholdedRelu", {}, {}, 0},
      {"ScaledTanh", {2}, {0.5f}, 2 * std::tanh(0.5 * x)},
      {"HardSigmoid", {}, {}, 0.2 * x + 0.5},
      {"HardSigmoid", {0.1f}, {0.9f}, 0.1 * x + 0.9},
      {"Elu", {}, {}, std::exp(x) - 1},
      {"Elu", {2}, {}, 2 * (std::exp(x) - 1)},
      {"Softsign", {}, {}, x / (1 + std::abs(x))},
      {"Softplus", {}, {}, std::log1p(std::exp(x))},
      {"tanh", {}, {}, std::tanh(x)},
  };
  const std::vector<Tensor> in = {F({1, 1, 1}, {-2}), F({1, 1, 1}, {1}), F({1, 1, 1}, {0})};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.act);
    AttributeMap a = Attrs({{"activations", Attribute::Strings({c.act})}});
    if (!c.alpha.empty()) a.Set("activation_alpha", Attribute::Floats(c.alpha));
    if (!c.beta.empty()) a.Set("activation_beta", Attribute::Floats(c.beta));
    ExpectOutputs(RecurrentNode("RNN", in, 2, a), in, {{c.want}, {c.want}});
  }
  // Clip bounds the activation's input: tanh(clip(-2)) with clip 0.5.
  ExpectOutputs(RecurrentNode("RNN", in, 2, Attrs({{"clip", Attribute::Float(0.5f)}})), in,
                {{std::tanh(-0.5)}, {std::tanh(-0.5)}});
}

TEST(GruKernel, OneStepHandComputed) {
  // W [z, r, h] = [0.5, -0.5, 1], R = [0.1, 0.2, 0.3], B = [Wb 0 0 0.25 | Rb 0 0 0.4], x = 1, h0 = 1.
  const std::vector<Tensor> in = {F({1, 1, 1}, {1}), F({1, 3, 1}, {0.5f, -0.5f, 1}), F({1, 3, 1}, {0.1f, 0.2f, 0.3f}),
                                  F({1, 6}, {0, 0, 0.25f, 0, 0, 0.4f}), Tensor(), F({1, 1, 1}, {1})};
  const double z = Sig(0.6), r = Sig(-0.3);
  const double hh0 = std::tanh(1.0 + 0.25 + 0.3 * (r * 1) + 0.4);     // linear_before_reset = 0
  const double hh1 = std::tanh(1.0 + 0.25 + r * (0.3 * 1 + 0.4));     // linear_before_reset = 1
  const double h0 = (1 - z) * hh0 + z * 1, h1 = (1 - z) * hh1 + z * 1;
  ExpectOutputs(RecurrentNode("GRU", in, 2), in, {{h0}, {h0}});
  ExpectOutputs(RecurrentNode("GRU", in, 2, Attrs({{"linear_before_reset", Attribute::Int(1)}})), in, {{h1}, {h1}});
  // Custom activations: f = HardSigmoid(0.1, 0.2) consumes the first alpha/beta, g = Affine the next.
  const AttributeMap acts = Attrs({{"activations", Attribute::Strings({"HardSigmoid", "Affine"})},
                                   {"activation_alpha", Attribute::Floats({0.1f, 3})},
                                   {"activation_beta", Attribute::Floats({0.2f, 4})}});
  const double za = 0.1 * 0.6 + 0.2, ra = 0.1 * -0.3 + 0.2;
  const double ha = 3 * (1.0 + 0.25 + 0.3 * ra + 0.4) + 4;
  const double hA = (1 - za) * ha + za;
  ExpectOutputs(RecurrentNode("GRU", in, 2, acts), in, {{hA}, {hA}});
}

TEST(LstmKernel, OneStepHandComputedWithPeepholes) {
  // Gates [i, o, f, c]: W = [0.1, 0.2, 0.3, 0.4], R = [0.5, 0.6, 0.7, 0.8]; P [i, o, f] = [0.1, 0.2, 0.3];
  // x = 1, h0 = 0.5, c0 = 0.25, no bias.
  const std::vector<Tensor> in = {F({1, 1, 1}, {1}), F({1, 4, 1}, {0.1f, 0.2f, 0.3f, 0.4f}),
                                  F({1, 4, 1}, {0.5f, 0.6f, 0.7f, 0.8f}), Tensor(), Tensor(),
                                  F({1, 1, 1}, {0.5f}), F({1, 1, 1}, {0.25f}), F({1, 3}, {0.1f, 0.2f, 0.3f})};
  const double i = Sig(0.1 + 0.25 + 0.1 * 0.25), f = Sig(0.3 + 0.35 + 0.3 * 0.25), g = std::tanh(0.4 + 0.4);
  const double c = f * 0.25 + i * g, o = Sig(0.2 + 0.3 + 0.2 * c), h = o * std::tanh(c);
  ExpectOutputs(RecurrentNode("LSTM", in, 3), in, {{h}, {h}, {c}});
  // input_forget couples the gates: f = 1 - i.
  const double c2 = (1 - i) * 0.25 + i * g, o2 = Sig(0.2 + 0.3 + 0.2 * c2), h2 = o2 * std::tanh(c2);
  ExpectOutputs(RecurrentNode("LSTM", in, 3, Attrs({{"input_forget", Attribute::Int(1)}})), in, {{h2}, {h2}, {c2}});
  // clip bounds every gate's input (all of them are 0.2 here) but not the cell that h takes.
  const double i3 = Sig(0.2), g3 = std::tanh(0.2), c3 = i3 * 0.25 + i3 * g3, h3 = i3 * std::tanh(c3);
  ASSERT_GT(c3, 0.2);
  ExpectOutputs(RecurrentNode("LSTM", in, 3, Attrs({{"clip", Attribute::Float(0.2f)}})), in, {{h3}, {h3}, {c3}});
  // Only Y_c requested (Y and Y_h absent).
  Node only_c = RecurrentNode("LSTM", in, 3);
  only_c.outputs[0] = -1;
  only_c.outputs[1] = -1;
  ExpectOutputs(only_c, in, {{}, {}, {c}});
}

TEST(LstmKernel, BidirectionalHandComputed) {
  // Hidden 1, seq 2, batch 1; forward weights as above without peepholes, the reverse direction
  // with W and R doubled; Y [2, 2, 1, 1], Y_h [2, 1, 1].
  const std::vector<Tensor> in = {F({2, 1, 1}, {1, -1}),
                                  F({2, 4, 1}, {0.1f, 0.2f, 0.3f, 0.4f, 0.2f, 0.4f, 0.6f, 0.8f}),
                                  F({2, 4, 1}, {0.5f, 0.6f, 0.7f, 0.8f, 1.0f, 1.2f, 1.4f, 1.6f})};
  auto step = [](double x, double& h, double& c, double k) {
    const double i = Sig(k * (0.1 * x + 0.5 * h)), o = Sig(k * (0.2 * x + 0.6 * h));
    const double f = Sig(k * (0.3 * x + 0.7 * h)), g = std::tanh(k * (0.4 * x + 0.8 * h));
    c = f * c + i * g;
    h = o * std::tanh(c);
  };
  double hf = 0, cf = 0, hb = 0, cb = 0;
  step(1, hf, cf, 1);
  const double yf0 = hf;
  step(-1, hf, cf, 1);
  const double yf1 = hf;
  step(-1, hb, cb, 2);
  const double yb1 = hb;
  step(1, hb, cb, 2);
  const double yb0 = hb;
  ExpectOutputs(RecurrentNode("LSTM", in, 3, Attrs({{"direction", Attribute::String("bidirectional")}})), in,
                {{yf0, yb0, yf1, yb1}, {yf1, yb0}, {cf, cb}});
}

// Layout 1 ([batch, seq, ...]) gives the transposed results of layout 0.
TEST(RecurrentKernel, Layout1IsTransposedLayout0) {
  const int64_t S = 3, N = 2, I = 4, H = 3;
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    SCOPED_TRACE(op);
    const int64_t G = op == "RNN" ? 1 : op == "GRU" ? 3 : 4;
    const Tensor x = RandomFloat({S, N, I}, 1), w = RandomFloat({2, G * H, I}, 2), r = RandomFloat({2, G * H, H}, 3);
    const Tensor b = RandomFloat({2, 2 * G * H}, 4), h0 = RandomFloat({2, N, H}, 5);
    const Tensor lens = Tensor::FromVector<int32_t>({N}, {3, 2});
    Tensor xt(DType::kFloat32, {N, S, I}), h0t(DType::kFloat32, {N, 2, H});
    for (int64_t s = 0; s < S; ++s)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t i = 0; i < I; ++i) xt.data<float>()[(n * S + s) * I + i] = x.data<float>()[(s * N + n) * I + i];
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < H; ++j) h0t.data<float>()[(n * 2 + d) * H + j] = h0.data<float>()[(d * N + n) * H + j];
    const AttributeMap bidi = Attrs({{"direction", Attribute::String("bidirectional")}});
    AttributeMap bidi1 = bidi;
    bidi1.Set("layout", Attribute::Int(1));
    const std::vector<Tensor> in0 = {x, w, r, b, lens, h0}, in1 = {xt, w, r, b, lens, h0t};
    for (Backend be : ::whittle::testing::TestedBackends()) {
      auto r0 = RunNode(RecurrentNode(op, in0, 2, bidi), 14, in0, be);
      auto r1 = RunNode(RecurrentNode(op, in1, 2, bidi1), 14, in1, be);
      ASSERT_TRUE(r0.ok()) << r0.status().message();
      ASSERT_TRUE(r1.ok()) << r1.status().message();
      const Tensor &y0 = (*r0)[0], &y1 = (*r1)[0], &s0 = (*r0)[1], &s1 = (*r1)[1];
      ASSERT_EQ(y1.dims(), (Dims{N, S, 2, H}));
      ASSERT_EQ(s1.dims(), (Dims{N, 2, H}));
      for (int64_t s = 0; s < S; ++s)
        for (int64_t d = 0; d < 2; ++d)
          for (int64_t n = 0; n < N; ++n)
            for (int64_t j = 0; j < H; ++j)
              EXPECT_EQ(y1.data<float>()[((n * S + s) * 2 + d) * H + j], y0.data<float>()[((s * 2 + d) * N + n) * H + j]);
      for (int64_t d = 0; d < 2; ++d)
        for (int64_t n = 0; n < N; ++n)
          for (int64_t j = 0; j < H; ++j)
            EXPECT_EQ(s1.data<float>()[(n * 2 + d) * H + j], s0.data<float>()[(d * N + n) * H + j]);
    }
  }
}

TEST(RecurrentKernel, DoubleMatchesFloat) {
  const int64_t S = 4, N = 2, I = 3, H = 2;
  const Tensor x = RandomFloat({S, N, I}, 7), w = RandomFloat({1, 4 * H, I}, 8), r = RandomFloat({1, 4 * H, H}, 9);
  auto to_double = [](const Tensor& t) {
    Tensor d(DType::kFloat64, t.dims());
    for (int64_t k = 0; k < t.numel(); ++k) d.data<double>()[k] = t.data<float>()[k];
    return d;
  };
  const std::vector<Tensor> inf = {x, w, r}, ind = {to_double(x), to_double(w), to_double(r)};
  auto rf = RunNode(RecurrentNode("LSTM", inf, 3), 17, inf, Backend::kCpu);
  auto rd = RunNode(RecurrentNode("LSTM", ind, 3), 17, ind, Backend::kCpu);
  ASSERT_TRUE(rf.ok()) << rf.status().message();
  ASSERT_TRUE(rd.ok()) << rd.status().message();
  ASSERT_EQ((*rd)[0].dtype(), DType::kFloat64);
  for (int64_t k = 0; k < (*rf)[0].numel(); ++k)
    EXPECT_NEAR((*rd)[0].data<double>()[k], (*rf)[0].data<float>()[k], 1e-5);
}

// Expects RunNode to fail with code and a message containing `what`.
void ExpectError(const Node& n, const std::vector<Tensor>& in, StatusCode code, const std::string& what,
                 int opset = 17) {
  for (Backend b : ::whittle::testing::TestedBackends()) {
    auto r = RunNode(n, opset, in, b);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().code(), code) << r.status().message();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(n.name), std::string::npos) << r.status().message();
  }
}

TEST(RecurrentKernel, BadAttributesAndInputs) {
  const Tensor x = RandomFloat({2, 1, 3}, 1), w = RandomFloat({1, 4 * 2, 3}, 2), r = RandomFloat({1, 4 * 2, 2}, 3);
  const std::vector<Tensor> in = {x, w, r};
  const auto kInv = StatusCode::kInvalidArgument;
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"hidden_size", Attribute::Int(3)}})), in, kInv, "hidden_size");
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"direction", Attribute::String("sideways")}})), in, kInv,
              "direction");
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"direction", Attribute::String("bidirectional")}})), in, kInv,
              "num_directions");
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"activations", Attribute::Strings({"Tanh", "Tanh"})}})), in, kInv,
              "activations");
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"activations", Attribute::Strings({"Sigmoid", "Gelu", "Tanh"})}})),
              in, StatusCode::kUnimplemented, "Gelu");
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"clip", Attribute::Float(-1.f)}})), in, kInv, "clip");
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"layout", Attribute::Int(1)}})), in, kInv, "opset 14", 13);
  ExpectError(RecurrentNode("LSTM", in, 3, Attrs({{"layout", Attribute::Int(2)}})), in, kInv, "layout");
  ExpectError(RecurrentNode("GRU", in, 2), in, kInv, "3*hidden_size");  // 8 rows is not 3*hidden
  const std::vector<Tensor> bad_x = {RandomFloat({2, 1, 4}, 1), w, r};
  ExpectError(RecurrentNode("LSTM", bad_x, 3), bad_x, kInv, "input_size");
  const std::vector<Tensor> bad_b = {x, w, r, RandomFloat({1, 8}, 4)};
  ExpectError(RecurrentNode("LSTM", bad_b, 3), bad_b, kInv, "B");
  const std::vector<Tensor> bad_len = {x, w, r, Tensor(), Tensor::FromVector<int32_t>({1}, {3})};
  ExpectError(RecurrentNode("LSTM", bad_len, 3), bad_len, kInv, "sequence_lens");
  const std::vector<Tensor> len64 = {x, w, r, Tensor(), Tensor::FromVector<int64_t>({1}, {2})};
  ExpectError(RecurrentNode("LSTM", len64, 3), len64, kInv, "int32");
  const std::vector<Tensor> bad_h = {x, w, r, Tensor(), Tensor(), RandomFloat({1, 2, 2}, 5)};
  ExpectError(RecurrentNode("LSTM", bad_h, 3), bad_h, kInv, "initial_h");
  const std::vector<Tensor> bad_p = {x, w, r, Tensor(), Tensor(), Tensor(), Tensor(), RandomFloat({1, 4}, 6)};
  ExpectError(RecurrentNode("LSTM", bad_p, 3), bad_p, kInv, "P");
}

// CPU (and any other backend) against the reference over random inputs.
TEST(RecurrentKernel, BackendsMatchReference) {
  const int64_t S = 5, N = 3, I = 4, H = 6;
  uint32_t seed = 100;
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    const int64_t G = op == "RNN" ? 1 : op == "GRU" ? 3 : 4;
    for (const std::string dir : {"forward", "reverse", "bidirectional"}) {
      const int64_t nd = dir == "bidirectional" ? 2 : 1;
      for (int with_lens = 0; with_lens < 2; ++with_lens)
        for (int layout = 0; layout < 2; ++layout)
          for (int variant = 0; variant < 2; ++variant) {
            SCOPED_TRACE(op + " " + dir + " lens=" + std::to_string(with_lens) + " layout=" + std::to_string(layout) +
                         " variant=" + std::to_string(variant));
            std::vector<Tensor> in = {RandomFloat(layout ? Dims{N, S, I} : Dims{S, N, I}, seed++),
                                      RandomFloat({nd, G * H, I}, seed++), RandomFloat({nd, G * H, H}, seed++),
                                      RandomFloat({nd, 2 * G * H}, seed++)};
            in.push_back(with_lens ? Tensor::FromVector<int32_t>({N}, {5, 2, 0}) : Tensor());
            in.push_back(RandomFloat(layout ? Dims{N, nd, H} : Dims{nd, N, H}, seed++));
            if (op == "LSTM") {
              in.push_back(RandomFloat(layout ? Dims{N, nd, H} : Dims{nd, N, H}, seed++));
              in.push_back(RandomFloat({nd, 3 * H}, seed++));
            }
            AttributeMap a = Attrs({{"direction", Attribute::String(dir)}, {"hidden_size", Attribute::Int(H)},
                                    {"layout", Attribute::Int(layout)}});
            if (variant == 1) {
              // No bias or initial state; op-specific options and a clip.
              in[3] = Tensor();
              in[5] = Tensor();
              a.Set("clip", Attribute::Float(0.8f));
              if (op == "GRU") a.Set("linear_before_reset", Attribute::Int(1));
              if (op == "LSTM") a.Set("input_forget", Attribute::Int(1));
              if (op == "RNN") a.Set("activations", Attribute::Strings(std::vector<std::string>(
                                                        static_cast<size_t>(nd), "Relu")));
            }
            const Node n = RecurrentNode(op, in, op == "LSTM" ? 3 : 2, a);
            for (bool is_const : {false, true}) ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 17, 2, is_const);
          }
    }
  }
}

// Constant W and R are packed at load (kernels/cpu/packed_gemm.h) where the products are wide
// enough: hidden sizes that leave part of a panel empty, both GRU forms (without
// linear_before_reset, R's z/r rows and its h rows are packed apart), LSTM with and without
// peepholes, a clip, and sequence lengths.
TEST(RecurrentKernel, PackedWeightsMatchReferenceAtLayerSizes) {
  const int64_t S = 4, N = 2, I = 19, H = 37;
  uint32_t seed = 900;
  for (const std::string op : {"RNN", "GRU", "LSTM"}) {
    const int64_t G = op == "RNN" ? 1 : op == "GRU" ? 3 : 4;
    for (int variant = 0; variant < 2; ++variant) {
      SCOPED_TRACE(op + " variant=" + std::to_string(variant));
      for (const std::string dir : {"forward", "bidirectional"}) {
        const int64_t nd = dir == "bidirectional" ? 2 : 1;
        std::vector<Tensor> in = {RandomFloat({S, N, I}, seed++), RandomFloat({nd, G * H, I}, seed++, -0.3f, 0.3f),
                                  RandomFloat({nd, G * H, H}, seed++, -0.3f, 0.3f), RandomFloat({nd, 2 * G * H}, seed++),
                                  Tensor::FromVector<int32_t>({N}, {4, 3}), RandomFloat({nd, N, H}, seed++)};
        if (op == "LSTM") {
          in.push_back(RandomFloat({nd, N, H}, seed++));
          in.push_back(variant ? RandomFloat({nd, 3 * H}, seed++) : Tensor());
        }
        AttributeMap a = Attrs({{"direction", Attribute::String(dir)}, {"hidden_size", Attribute::Int(H)}});
        if (variant == 1) {
          a.Set("clip", Attribute::Float(1.5f));
          if (op == "GRU") a.Set("linear_before_reset", Attribute::Int(1));
        }
        const Node n = RecurrentNode(op, in, op == "LSTM" ? 3 : 2, a);
        ExpectBackendsMatchReference(n, in, 1e-4f, 1e-4f, 17, 2, /*as_const=*/true);
      }
    }
  }
}

}  // namespace
}  // namespace whittle
