// Trainer: distillation fine-tuning of a (compressed) student against its original (teacher),
// from the ONNX graphs alone. The student's training graph (runtime/training/autodiff.h) and the
// teacher run on ordinary Sessions; the optimizer update, the loss value and the schedule are
// computed here on the parameter tensors.
//
// Defaults a user can turn off (from the training-speed literature): the learning rate is given
// for batch 256 and scaled linearly with the batch (Goyal et al.), warmed up linearly over the
// first 5 % of the steps and then decayed with a cosine; no weight decay on biases (rank-1
// params); gradients clipped to a global norm of 5.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "runtime/training/autodiff.h"
#include "whittle/session.h"

namespace whittle::training {

enum class OptimizerKind { kSgd, kAdamW };

struct TrainOptions {
  int epochs = 1;
  int64_t batch = 64;
  float lr = 0.05f;             // for batch 256 when scale_lr (else as given)
  bool scale_lr = true;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  float momentum = 0.9f;        // SGD
  bool nesterov = false;        // SGD
  float weight_decay = -1.f;    // < 0: 5e-4 for SGD, 0.01 for AdamW; never on rank-1 params
  float beta1 = 0.9f, beta2 = 0.999f, adam_eps = 1e-8f;
  float temperature = 4.f;
  float alpha = 0.5f;           // weight of the distillation term; 1 with use_labels = false
  bool use_labels = true;
  float label_smoothing = 0.f;
  float clip_norm = 5.f;        // <= 0: no clipping
  float warmup_fraction = 0.05f;
  bool cosine = true;
  uint64_t seed = 0;
  int threads = 1;
};

struct StepResult {
  double loss = 0;
  int64_t correct = 0;  // top-1 hits against the labels (0 without labels)
  int64_t samples = 0;
};

struct EpochStats {
  int epoch = 0;
  double loss = 0;           // mean over the epoch's samples
  double train_accuracy = 0; // against the labels, -1 without
  double samples_per_s = 0;
  double seconds = 0;
  double data_wait_s = 0;    // time the steps waited for the loader thread's next batch
};

// What the progress callback sees after every step.
struct Progress {
  int epoch = 0;
  int64_t step = 0, steps = 0;  // within the epoch
  double loss = 0, accuracy = 0, samples_per_s = 0, eta_s = 0;
};

class Trainer {
 public:
  // teacher may be null only with options.alpha == 0 and labels (plain fine-tuning).
  static StatusOr<std::unique_ptr<Trainer>> Create(const Graph& student, const Graph* teacher,
                                                   const TrainOptions& options);

  // Loss, accuracy and the gradient of every param on one batch (x [B, ...], labels int64 [B] or
  // undefined), without updating anything. grads: one per param (params() order).
  StatusOr<StepResult> Gradients(const Tensor& x, const Tensor& labels, std::vector<Tensor>* grads);
  // One optimizer step at global step `step` of total_steps (the schedule's position).
  StatusOr<StepResult> Step(const Tensor& x, const Tensor& labels, int64_t step, int64_t total_steps);
  // One pass over data in a seeded order (seed + epoch), batch by batch (the last batch shorter).
  StatusOr<EpochStats> TrainEpoch(const Dataset& data, int epoch, const std::function<void(const Progress&)>& progress);
  // Top-1 accuracy of the current student on data.
  StatusOr<double> Evaluate(const Dataset& data, int64_t batch = 256) const;

  // The student with its current weights (the original graph, initializers replaced; weights it
  // stores quantized are quantized again with their scales).
  Graph CurrentModel() const;
  const std::vector<std::string>& params() const { return params_; }
  std::vector<Tensor>& param_values() { return values_; }
  // Optimizer state (momentum / Adam moments) and the step counter, for checkpoints.
  std::vector<Tensor>& state1() { return m_; }
  std::vector<Tensor>& state2() { return v_; }
  int64_t& adam_steps() { return adam_t_; }
  int64_t StepsPerEpoch(int64_t samples) const { return (samples + opts_.batch - 1) / opts_.batch; }

 private:
  Trainer() = default;
  StatusOr<StepResult> Forward(const Tensor& x, const Tensor& labels, std::vector<Tensor>* outs) const;
  float LearningRate(int64_t step, int64_t total) const;

  TrainOptions opts_;
  Graph student_;
  std::unique_ptr<Session> train_, teacher_;
  std::string input_name_;
  std::vector<std::string> params_;
  std::vector<QuantizedParam> quantized_;  // params the student stores quantized
  std::vector<Tensor> values_, m_, v_;
  int64_t adam_t_ = 0;
};

}  // namespace whittle::training
