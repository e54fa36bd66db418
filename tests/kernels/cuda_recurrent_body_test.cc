// The CUDA LSTM and GRU run on the CPU: RunRecurrent's sequence of calls
// (kernels/cuda/recurrent_driver.h) with plain loops for cuBLAS's products and copies and the
// cell body (kernels/cuda/recurrent_body.h) over every element, against the reference LSTM/GRU:
// both directions, both layouts, sequence_lens with an empty and a short sequence, initial
// states, peepholes, clip and input_forget. The launches run on a GPU only.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/common/recurrent_attrs.h"
#include "kernels/cuda/recurrent_driver.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "tests/util/node_case.h"
#include "tests/util/test_util.h"

namespace whittle::cuda {
namespace {

using ::whittle::testing::MakeNode;
using ::whittle::testing::RandomFloat;
using ::whittle::testing::TensorsClose;

class EmulatedRecurrentOps : public RecurrentOps {
 public:
  Status Gemm(const float* a, int64_t lda, const float* bt, int64_t ldb, float* c, int64_t ldc, int64_t M, int64_t N,
              int64_t K) override {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += a[m * lda + k] * bt[n * ldb + k];
        c[m * ldc + n] = s;
      }
    return Status::Ok();
  }
  Status Zero(float* p, int64_t n) override {
    std::memset(p, 0, static_cast<size_t>(n) * sizeof(float));
    return Status::Ok();
  }
  Status Copy2d(const float* src, int64_t src_stride, float* dst, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * cols, src + r * src_stride, static_cast<size_t>(cols) * sizeof(float));
    return Status::Ok();
  }
  Status Cell(const RecurrentStep& s) override {
    for (int64_t i = 0; i < s.batch * s.hidden; ++i) RecurrentCellAt(s, i);
    return Status::Ok();
  }
};

struct Case {
  RecurrentOp op;
  std::string direction;
  int layout;
  bool lens, initial, peep, clip, input_forget;
  bool linear_before_reset = true;  // GRU
};

TEST(CudaRecurrentBodies, LstmAndGruMatchTheReference) {
  RegisterAllOps();
  const Case cases[] = {{RecurrentOp::kLstm, "forward", 0, false, false, false, false, false},
                        {RecurrentOp::kLstm, "bidirectional", 0, true, true, true, false, false},
                        {RecurrentOp::kLstm, "reverse", 1, true, true, false, true, false},
                        {RecurrentOp::kLstm, "bidirectional", 1, false, true, true, false, true},
                        {RecurrentOp::kGru, "forward", 0, false, false, false, false, false},
                        {RecurrentOp::kGru, "bidirectional", 1, true, true, false, true, false},
                        {RecurrentOp::kGru, "reverse", 0, true, false, false, false, false},
                        {RecurrentOp::kGru, "bidirectional", 0, true, true, false, false, false, false},
                        {RecurrentOp::kGru, "forward", 1, false, true, false, true, false, false}};
  const int64_t S = 5, B = 3, I = 4, H = 6;
  uint32_t seed = 80;
  for (const Case& c : cases) {
    const bool lstm = c.op == RecurrentOp::kLstm;
    const char* name = lstm ? "LSTM" : "GRU";
    SCOPED_TRACE(std::string(name) + " " + c.direction + " layout " + std::to_string(c.layout) +
                 (c.linear_before_reset ? "" : " reset before linear"));
    const int64_t D = c.direction == "bidirectional" ? 2 : 1, G = lstm ? 4 : 3;
    AttributeMap at;
    at.Set("hidden_size", Attribute::Int(H));
    at.Set("direction", Attribute::String(c.direction));
    at.Set("layout", Attribute::Int(c.layout));
    if (!lstm) at.Set("linear_before_reset", Attribute::Int(c.linear_before_reset ? 1 : 0));
    if (c.clip) at.Set("clip", Attribute::Float(0.7f));
    if (c.input_forget) at.Set("input_forget", Attribute::Int(1));
    std::vector<Tensor> in = {c.layout == 0 ? RandomFloat({S, B, I}, seed++) : RandomFloat({B, S, I}, seed++),
                              RandomFloat({D, G * H, I}, seed++, -0.5f, 0.5f), RandomFloat({D, G * H, H}, seed++, -0.5f, 0.5f),
                              RandomFloat({D, 2 * G * H}, seed++, -0.3f, 0.3f)};
    in.push_back(c.lens ? Tensor::FromVector<int32_t>({B}, {5, 0, 3}) : Tensor());
    const Dims state = c.layout == 0 ? Dims{D, B, H} : Dims{B, D, H};
    in.push_back(c.initial ? RandomFloat(state, seed++) : Tensor());
    if (lstm) {
      in.push_back(c.initial ? RandomFloat(state, seed++) : Tensor());
      in.push_back(c.peep ? RandomFloat({D, 3 * H}, seed++, -0.5f, 0.5f) : Tensor());
    }
    const int outputs = lstm ? 3 : 2;
    Node n = MakeNode(name, static_cast<int>(in.size()), outputs, at);
    for (size_t k = 0; k < in.size(); ++k)
      if (!in[k].defined()) n.inputs[k] = -1;
    auto want = RunNode(n, 14, in, Backend::kReference);
    ASSERT_TRUE(want.ok()) << want.status().message();

    std::vector<DType> dts;
    std::vector<const Tensor*> ptrs;
    ::whittle::testing::InputViews(in, &dts, &ptrs);
    KernelInit init{at, 14, dts, std::vector<const Tensor*>(in.size(), nullptr), outputs, "test", Backend::kCpu};
    auto a = ParseRecurrentAttrs(c.op, init);
    ASSERT_TRUE(a.ok()) << a.status().message();
    ASSERT_TRUE(CudaRecurrentSupports(*a));
    RecurrentDims d;
    ASSERT_TRUE(d.Resolve(*a, ptrs).ok());
    std::vector<Tensor> got;
    for (int k = 0; k < outputs; ++k) got.emplace_back(DType::kFloat32, (*want)[static_cast<size_t>(k)].dims());
    std::vector<float> scratch(static_cast<size_t>(RecurrentScratchFloats(d)));
    auto f = [&](size_t k) { return in.size() > k && in[k].defined() ? in[k].data<float>() : nullptr; };
    RecurrentCall call;
    call.X = f(0), call.W = f(1), call.R = f(2), call.B = f(3), call.h0 = f(5);
    call.lens = in[4].defined() ? in[4].data<int32_t>() : nullptr;
    if (lstm) call.c0 = f(6), call.P = f(7);
    call.Y = got[0].data<float>(), call.Yh = got[1].data<float>(), call.Yc = lstm ? got[2].data<float>() : nullptr;
    call.scratch = scratch.data();
    EmulatedRecurrentOps ops;
    ASSERT_TRUE(RunRecurrent(*a, d, call, ops).ok());
    for (int k = 0; k < outputs; ++k) EXPECT_TRUE(TensorsClose(got[static_cast<size_t>(k)], (*want)[static_cast<size_t>(k)], 1e-5f, 1e-5f)) << "output " << k;
  }
}

// The ONNX backend suite's LSTM and GRU cases through RunRecurrent (emulated) against the suite's
// expected outputs: every case agrees (none is left to the CPU).
TEST(CudaRecurrentBodies, ConformanceCases) {
  RegisterAllOps();
  int ran = 0, declined = 0;
  for (const auto& e : std::filesystem::directory_iterator(::whittle::testing::kOnnxNodeCases)) {
    const std::string name = e.path().filename().string();
    const bool lstm = name.rfind("test_lstm_", 0) == 0;
    if (!lstm && name.rfind("test_gru_", 0) != 0) continue;
    SCOPED_TRACE(name);
    auto nc = ::whittle::testing::LoadNodeCase(e.path().string());
    ASSERT_TRUE(nc.ok()) << nc.status().message();
    std::vector<Tensor> in = nc->inputs;
    if (in[0].dtype() != DType::kFloat32) continue;
    std::vector<DType> dts;
    std::vector<const Tensor*> ptrs;
    ::whittle::testing::InputViews(in, &dts, &ptrs);
    const int outputs = static_cast<int>(nc->node.outputs.size());
    KernelInit init{nc->node.attrs, static_cast<int>(nc->graph.OpsetFor("")), dts,
                    std::vector<const Tensor*>(in.size(), nullptr), outputs, name, Backend::kCpu};
    auto a = ParseRecurrentAttrs(lstm ? RecurrentOp::kLstm : RecurrentOp::kGru, init);
    ASSERT_TRUE(a.ok()) << a.status().message();
    if (!CudaRecurrentSupports(*a)) {
      ++declined;
      continue;
    }
    RecurrentDims d;
    ASSERT_TRUE(d.Resolve(*a, ptrs).ok());
    // The node's outputs: Y, Y_h[, Y_c], each present or not; the case's files follow the graph's.
    std::vector<Tensor> got(3);
    size_t file = 0;
    std::vector<std::pair<int, size_t>> compare;  // (output slot, expected file)
    for (int k = 0; k < outputs; ++k)
      if (nc->node.outputs[static_cast<size_t>(k)] >= 0) {
        got[static_cast<size_t>(k)] = Tensor(DType::kFloat32, nc->outputs[file].dims());
        compare.emplace_back(k, file++);
      }
    std::vector<float> scratch(static_cast<size_t>(RecurrentScratchFloats(d)));
    auto f = [&](size_t k) { return in.size() > k && in[k].defined() ? in[k].data<float>() : nullptr; };
    RecurrentCall call;
    call.X = f(0), call.W = f(1), call.R = f(2), call.B = f(3), call.h0 = f(5);
    call.lens = in.size() > 4 && in[4].defined() ? in[4].data<int32_t>() : nullptr;
    if (lstm) call.c0 = f(6), call.P = f(7);
    auto out = [&](int k) { return got[static_cast<size_t>(k)].defined() ? got[static_cast<size_t>(k)].data<float>() : nullptr; };
    call.Y = out(0), call.Yh = out(1), call.Yc = lstm ? out(2) : nullptr;
    call.scratch = scratch.data();
    EmulatedRecurrentOps ops;
    ASSERT_TRUE(RunRecurrent(*a, d, call, ops).ok());
    for (const auto& [k, fi] : compare)
      EXPECT_TRUE(TensorsClose(got[static_cast<size_t>(k)], nc->outputs[fi], 1e-5f, 1e-5f)) << "output " << k;
    ++ran;
  }
  std::printf("[ rnn      ] %d LSTM/GRU conformance cases through the CUDA sequence, %d left to the CPU\n", ran, declined);
  EXPECT_GE(ran, 8);
  EXPECT_EQ(declined, 0);
}

TEST(CudaRecurrentBodies, UnsupportedAttributesDeclineToTheCpu) {
  AttributeMap at;
  at.Set("hidden_size", Attribute::Int(2));
  std::vector<DType> dts = {DType::kFloat32, DType::kFloat32, DType::kFloat32};
  KernelInit init{at, 14, dts, {nullptr, nullptr, nullptr}, 2, "test", Backend::kCpu};
  auto rnn = ParseRecurrentAttrs(RecurrentOp::kRnn, init);  // no CUDA RNN
  ASSERT_TRUE(rnn.ok());
  EXPECT_FALSE(CudaRecurrentSupports(*rnn));
  at.Set("activations", Attribute::Strings({"Relu", "Tanh", "Tanh"}));
  auto relu = ParseRecurrentAttrs(RecurrentOp::kLstm, KernelInit{at, 14, dts, {nullptr, nullptr, nullptr}, 2, "test", Backend::kCpu});
  ASSERT_TRUE(relu.ok()) << relu.status().message();
  EXPECT_FALSE(CudaRecurrentSupports(*relu));
}

}  // namespace
}  // namespace whittle::cuda
