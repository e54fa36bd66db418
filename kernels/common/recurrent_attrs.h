// The recurrent family (RNN, GRU, LSTM), shared by every backend: attributes parsed and checked
// once (RecurrentAttrs: direction, hidden_size, per-direction activation functions with their
// alpha/beta, clip, input_forget, linear_before_reset, layout), run-time shape resolution of all
// inputs (RecurrentDims, with one-line errors naming the offending input), per-sequence lengths,
// the index maps of the two layouts, and RecurrentFns, the per-backend table of kernel builders.
//
// Gate order inside W, R and B (ONNX): RNN [i]; GRU [z, r, h]; LSTM [i, o, f, c]; B holds the W
// biases of every gate, then the R biases. LSTM's P holds the peepholes [i, o, f].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/elementwise_ops.h"
#include "kernels/kernel.h"

namespace whittle {

enum class RecurrentOp { kRnn, kGru, kLstm };
const char* RecurrentOpName(RecurrentOp op);
// Weight blocks per direction in W and R: 1, 3, 4.
int RecurrentGates(RecurrentOp op);

// One activation function of a recurrent op, with its alpha and beta resolved (the ONNX default
// of the corresponding operator where the attribute lists run out).
struct RnnActivation {
  enum Kind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
              kSoftsign, kSoftplus };
  Kind kind = kTanh;
  float alpha = 0.f, beta = 0.f;

  template <class T>
  T operator()(T x) const {
    const T a = static_cast<T>(alpha), b = static_cast<T>(beta);
    switch (kind) {
      case kRelu: return x > T(0) ? x : T(0);
      case kTanh: return std::tanh(x);
      case kSigmoid: return ew::Sigmoid(x);
      case kAffine: return a * x + b;
      case kLeakyRelu: return x >= T(0) ? x : a * x;
      case kThresholdedRelu: return x > a ? x : T(0);
      case kScaledTanh: return a * std::tanh(b * x);
      case kHardSigmoid: return ew::HardSigmoid(x, a, b);
      case kElu: return x >= T(0) ? x : a * (std::exp(x) - T(1));
      case kSoftsign: return ew::Softsign(x);
      case kSoftplus: return ew::Softplus(x);
    }
    return x;
  }
};

struct RecurrentAttrs {
  RecurrentOp op = RecurrentOp::kRnn;
  DType dtype = DType::kFloat32;
  int num_directions = 1;
  bool reverse = false;        // direction == "reverse" (the only direction runs backwards)
  int64_t hidden_size = -1;    // -1: taken from R
  // acts[d * per_direction + k]: RNN f; GRU f, g; LSTM f, g, h.
  std::vector<RnnActivation> acts;
  int per_direction = 1;
  bool has_clip = false;
  float clip = 0.f;
  bool input_forget = false;         // LSTM
  bool linear_before_reset = false;  // GRU
  int layout = 0;                    // 0: [seq, batch, ...]; 1: [batch, seq, ...]

  const RnnActivation& act(int direction, int k) const {
    return acts[static_cast<size_t>(direction * per_direction + k)];
  }
  // Direction d runs from the end of each sequence to its start.
  bool Backward(int d) const { return reverse || d == 1; }
  template <class T>
  T Clip(T x) const {
    if (!has_clip) return x;
    const T c = static_cast<T>(clip);
    return std::max(-c, std::min(c, x));
  }
};

// Parses and checks the attributes once (float and double only; the node name is added by the
// caller's context).
StatusOr<RecurrentAttrs> ParseRecurrentAttrs(RecurrentOp op, const KernelInit& init);

// Input indices.
enum RecurrentInput { kRnnX = 0, kRnnW, kRnnR, kRnnB, kRnnSeqLens, kRnnInitialH, kRnnInitialC, kRnnP };

// Sizes of one call, every input checked against them.
struct RecurrentDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int num_directions = 1;
  int gates = 1;

  // Checks the dtypes and shapes of every present input in ctx (W, R, B may be replaced by the
  // kernel's stored constants, but must still agree).
  Status Resolve(const RecurrentAttrs& a, const std::vector<const Tensor*>& inputs);

  // Flat element offsets of the two layouts.
  int64_t XRow(int layout, int64_t t, int64_t b) const { return layout == 0 ? t * batch + b : b * seq + t; }
  int64_t YOffset(int layout, int64_t t, int d, int64_t b) const {
    return (layout == 0 ? (t * num_directions + d) * batch + b : (b * seq + t) * num_directions + d) * hidden;
  }
  int64_t StateOffset(int layout, int d, int64_t b) const {
    return (layout == 0 ? d * batch + b : b * num_directions + d) * hidden;
  }
};

// Per-sequence lengths: sequence_lens's values (each checked to lie in [0, seq]), or seq for
// every sequence when absent.
StatusOr<std::vector<int64_t>> ResolveSequenceLengths(const Tensor* sequence_lens, const RecurrentDims& d);

// A backend's builders (nullptr, or an ok null kernel: the reference builds it).
struct RecurrentFns {
  KernelOr (*rnn)(const RecurrentAttrs& a, const KernelInit& init);
  KernelOr (*gru)(const RecurrentAttrs& a, const KernelInit& init);
  KernelOr (*lstm)(const RecurrentAttrs& a, const KernelInit& init);
};

}  // namespace whittle
