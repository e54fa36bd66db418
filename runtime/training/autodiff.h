// Autodiff: turns an inference graph into a training graph that the ordinary Session runs —
// the forward ops, then the backward ops each forward op's gradient rule emits (standard ONNX ops
// where they exist: Gemm, MatMul, ReduceSum, Where, Reshape, Pad, Slice, Concat; ai.whittle
// ConvGradInput, ConvGradWeight, MaxPoolGrad, AveragePoolGrad and GatherGrad where they do not),
// in reverse topological order, with the contributions to a value used twice summed. The
// trainable weights (float32 initializers in a weight or bias slot of Gemm, MatMul, Conv, a bias
// Add, a scale Mul, a normalization's scale and bias, a Gather's table or a Concat input, on the
// path to the logits) become graph inputs, so the same kernels run whatever their current values
// are.
//
// The loss gradient is emitted too, in closed form for softmax cross-entropy mixed with
// distillation (Hinton et al.): with s = softmax(z), q = softmax(z / T),
//   d loss / d z = a * s + b * q - target,
// where the caller feeds target = a * onehot + b * p_teacher, a = (1 - alpha) / B and
// b = alpha * T / B (loss = (1 - alpha) * CE + alpha * T^2 * KL(p_teacher || q), batch mean).
// The loss value itself is computed by the trainer from the logits, which the graph outputs.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle::training {

// Names of the extra inputs of a training graph.
inline constexpr const char* kTargetInput = "whittle_train_target";     // float32, the logits' shape
inline constexpr const char* kCeCoefInput = "whittle_train_ce_coef";    // float32 scalar a
inline constexpr const char* kKdCoefInput = "whittle_train_kd_coef";    // float32 scalar b
// Feature (hint) loss: input kHintTargetPrefix + i holds the teacher's tensor for hint i (the
// student tensor's shape); kHintCoefInput the scalar c of its gradient c * (s - t).
inline constexpr const char* kHintTargetPrefix = "whittle_hint_target_";
inline constexpr const char* kHintCoefInput = "whittle_hint_coef";

// A weight the model stores quantized (DequantizeLinear of a constant integer initializer, as
// --int8 and ONNX Runtime's QDQ format write them): it trains as a float latent copy behind a
// fake quantization (QuantizeLinear -> DequantizeLinear with the model's scale and zero point;
// the gradient passes straight through where the value is inside the quantized range), and is
// written back quantized with the same scale (QuantizeStored). int32 biases train in float.
struct QuantizedParam {
  std::string latent;      // the param in the training graph
  std::string stored;      // the model's integer initializer
  DType dtype = DType::kInt8;
  Tensor scale, zero_point;  // zero_point undefined: 0
  int64_t axis = 0;        // the channel axis of scale (per-axis), normalized
  // With refresh_weight_scales (weights stored symmetric, their scale used by nothing else): the
  // training graph input that carries the scale (LiveScale of the latent values, fed every
  // step, as PyTorch's QAT observers re-estimate it), the model's scale initializer it replaces
  // at export, and per channel the integer level the largest |w| maps to (the stored weight's
  // largest |q|, so the quantizer keeps the range convention the model was written with).
  std::string live_scale, stored_scale;
  Tensor levels;
  // An int32 bias of a layer whose weight scale is live: the weight's latent name and its scale
  // in the model. The bias scale (input scale x weight scale) follows the weight's in ratio.
  std::string bias_of;
  Tensor weight_scale0;
};

// A binarized layer (ai.whittle BinaryMatMul / BinaryConv with float activations; lib/ops/binary.cc)
// trains as a float latent weight behind SignSte (straight-through gradient) times its alpha, a
// param of its own; the training graph runs a standard MatMul / Conv on sign * alpha. Export packs
// the latent's signs into the layer's bits and writes alpha back (BinaryParam).
struct BinaryParam {
  std::string latent;       // param: BinaryMatMul [K, N] (W transposed); BinaryConv [M, C/g, kh, kw]
  std::string alpha;        // param: BinaryMatMul the model's alpha [N]; BinaryConv [M, 1, 1, 1]
  std::string bits, alpha_stored;  // the model's initializers
  bool transposed = false;  // latent is W^T (BinaryMatMul)
  int64_t n = 0, k = 0;     // W [n, k] as the bits store it
};

// The scale of a live-scaled weight for latent values w: per channel max |w| / levels, the
// model's scale where a channel is all zeros.
Tensor LiveScale(const Tensor& w, const QuantizedParam& q);
// The stored integer tensor for latent values w (round half to even, saturated).
Tensor QuantizeStored(const Tensor& w, const QuantizedParam& q);

// A model state the training graph updates but does not train: with bn_training, each
// BatchNormalization's running mean and running variance. The initializer is a graph input
// (named as in the model) that the caller feeds each step (first with `initial`); the graph
// output `output` is its new value after the step, to feed at the next step and to write back
// into the model's initializer when exporting.
struct StateUpdate {
  std::string output;       // graph output: the updated value
  std::string initializer;  // graph input, and the model's initializer of that name
  Tensor initial;           // its value in the model
};

struct TrainingGraphOptions {
  // false: BatchNormalization uses its running statistics (frozen; inference semantics).
  // true: it normalizes with the batch's mean and biased variance (over all axes but the channel
  // axis; the gradient flows through them) and updates the running statistics as ONNX's
  // training_mode does: running = running * momentum + batch * (1 - momentum) (momentum: the
  // node's attribute, default 0.9; batch variance biased, as ONNX's reference, unlike PyTorch's
  // unbiased running_var). The running statistics become state updates.
  bool bn_training = false;
  // Quantized weights: re-estimate their scales from the latent weights at every step (see
  // QuantizedParam::live_scale) instead of keeping the model's. Activation scales stay fixed.
  bool refresh_weight_scales = false;
  // Student tensors (value names) with a feature loss: each gets the extra gradient
  // c_i * (s - t_i), t_i fed as kHintTargetPrefix + i and c_i as kHintCoefInput + "_" + i (the
  // caller's choice of scale, e.g. 2 * weight / numel for weight * mean((s - t)^2)). Each must
  // lie between a trainable weight and the logits.
  std::vector<std::string> hints;
};

struct TrainingGraph {
  Graph graph;  // outputs: logits, one gradient per param (params' order), one per state (state's order)
  std::vector<std::string> params;  // graph inputs holding the trainable weights
  std::vector<Tensor> initial;      // their values in the model
  std::vector<QuantizedParam> quantized;  // the params trained behind a fake quantization
  std::vector<BinaryParam> binary;        // binarized layers' latent weights
  std::vector<StateUpdate> state;   // graph inputs updated but not trained (empty without bn_training)
  std::vector<std::string> hint_outputs;  // graph outputs after the state's: the hint tensors' values
  std::string logits;               // the model's first output
  std::string model_input;          // the model's (only) data input
};

// temperature: T of the distillation term (a graph constant). Errors name the node whose op has
// no gradient rule, or the model feature that is not supported (several data inputs, no float
// weights on the path to the logits). Only float values downstream of a param are
// differentiated: shape arithmetic, integer casts, comparisons and conditions need no rule.
StatusOr<TrainingGraph> BuildTrainingGraph(const Graph& model, float temperature,
                                           const TrainingGraphOptions& options = TrainingGraphOptions());

}  // namespace whittle::training
