// Trainer: distillation fine-tuning of a (compressed) student against its original (teacher),
// from the ONNX graphs alone. The student's training graph (runtime/training/autodiff.h) and the
// teacher run on ordinary Sessions; the optimizer update, the loss value and the schedule are
// computed here on the parameter tensors.
//
// Defaults a user can turn off (from the training-speed literature): the learning rate is given
// for batch 256 and scaled linearly with the batch (Goyal et al.), warmed up linearly over the
// first 5 % of the steps and then decayed with a cosine; no weight decay on biases (rank-1
// params); gradients clipped to a global norm of 5. A divergence (a loss or gradient that is not
// finite, or a loss that climbs far above its lowest) rolls the run back to its last healthy
// snapshot at a tenth of the rate (TrainOptions::divergence_guard).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "runtime/training/autodiff.h"
#include "runtime/training/communicator.h"
#include "runtime/training/divergence.h"
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
  // Where the student's forward and backward passes, the teacher and the optimizer run. On kCuda
  // the parameters, their gradients and the optimizer state stay on the GPU between steps (only
  // the logits come back, for the loss); precision as SessionOptions::precision (kCuda only):
  // with bf16/fp16 cuBLAS rounds the products' operands while every tensor, gradient and master
  // weight stays float32.
  Backend backend = Backend::kCpu;
  Precision precision = Precision::kFp32;
  // Image augmentation (inputs [N, ..., H, W]), drawn per sample from (seed, epoch, step):
  // a random crop of the image zero-padded by crop_padding on each side, and a horizontal flip
  // with probability 1/2 (PyTorch's RandomCrop(padding=P) and RandomHorizontalFlip).
  int crop_padding = 0;
  bool hflip = false;
  // Without augmentation the teacher sees the same samples every epoch: keep its logits (one
  // row of C floats per sample, not its activations) from the first epoch and reuse them.
  bool cache_teacher = true;
  // BatchNormalization in training mode: batch statistics in the forward pass (the gradient
  // flows through them) and the running statistics updated after each step, as ONNX's
  // training_mode (runtime/training/autodiff.h). false: running statistics frozen.
  bool bn_training = false;
  // Quantized (QDQ) students: re-estimate each symmetric weight's scale from its latent values
  // at every step, and write the re-estimated scales (and the bias scales that follow them)
  // into the output. false: the model's scales stay.
  bool refresh_weight_scales = true;
  // Feature (hint) losses, FitNets-style: (student tensor, teacher tensor) value names of one
  // shape; the loss gains hint_weight * mean((s - t)^2) per pair. The teacher then runs on
  // every batch (no logit cache).
  std::vector<std::pair<std::string, std::string>> hints;
  float hint_weight = 1.f;
  // Synchronous data parallelism (issue 44): this process is one rank of comm's job. `batch` is
  // then the global batch: each rank takes its share of every global batch's rows (RankRows),
  // computes its gradients, and the ranks' gradients are summed (weighted by their row counts)
  // before every rank takes the same optimizer step; the schedule and the learning-rate scaling
  // see the global batch. Null (or one rank): this process trains alone. CPU backend only.
  const Communicator* comm = nullptr;
  // With comm: 0, synchronous SGD (the gradients are summed every step); K > 0, model averaging
  // (local SGD): each rank steps on its own share's gradient, and every K steps (and at the end
  // of every epoch) the ranks' parameters and optimizer state are averaged. K = 1 with plain SGD
  // is synchronous SGD again (up to rounding and the per-rank gradient clipping).
  int average_every = 0;
  // Synchronous SGD's gradient buckets: the gradients are packed, in the order the backward pass
  // computes them (the last layers' first), into buckets of about this many
  // bytes, and each bucket's all-reduce starts as soon as its last gradient is computed, while
  // the backward pass goes on (PyTorch DDP's bucketing).
  int64_t bucket_bytes = int64_t{4} << 20;
  // The divergence guard (issue 45; runtime/training/divergence.h): a step whose loss or
  // gradients are not finite, or after which the loss's moving average exceeds
  // divergence_factor times the lowest it reached, is a divergence. The trainer then restores its
  // last healthy snapshot (params, optimizer state, model state and step counter; taken at each
  // epoch's start and every snapshot_every steps while the loss is healthy), multiplies the
  // learning rate by rollback_lr_factor for the rest of the run, and goes on from that step; the
  // divergence after max_rollbacks rollbacks ends training at the snapshot (EpochStats::gave_up).
  // false: no guard; a non-finite gradient is an error.
  bool divergence_guard = true;
  int max_rollbacks = 3;
  float rollback_lr_factor = 0.1f;
  float divergence_factor = 4.f;
  int64_t snapshot_every = 50;
  // lr=auto: RunFinetune picks the rate by a range test before training (runtime/training/
  // lr_finder.h), one per group of params (codebooks, low-rank factors, ...); lr is then ignored.
  bool lr_auto = false;
};

struct StepResult {
  double loss = 0;
  int64_t correct = 0;  // top-1 hits against the labels (0 without labels)
  int64_t samples = 0;
  // false: the loss or the gradients were not finite, and no update was made.
  bool finite = true;
};

struct EpochStats {
  int epoch = 0;
  double loss = 0;           // mean over the epoch's samples
  double train_accuracy = 0; // against the labels, -1 without
  double samples_per_s = 0;
  double seconds = 0;
  double data_wait_s = 0;    // time the steps waited for the loader thread's next batch
  // Data parallelism: time in the ranks' collectives, waiting for the slowest rank included
  // (0 when training alone).
  double comm_s = 0;
  // Synchronous SGD's gradient buckets all-reduced, and of them those started while the backward
  // pass still had gradients to compute (overlapped with it).
  int64_t buckets = 0, buckets_overlapped = 0;
  int64_t teacher_cached = 0;  // samples whose teacher logits came from the cache
  // The divergences of this epoch, each rolled back (the last one may have given up: gave_up,
  // and the epoch ended at its snapshot); lr_end: the peak rate after them (as TrainOptions::lr).
  std::vector<Rollback> rollbacks;
  bool gave_up = false;
  float lr_end = 0;
};

// What the progress callback sees after every step.
struct Progress {
  int epoch = 0;
  int64_t step = 0, steps = 0;  // within the epoch
  double loss = 0, accuracy = 0, samples_per_s = 0, eta_s = 0;
};

// In place on float32 images x [B, ..., H, W]: each sample shifted by a random offset in
// [-pad, pad]^2 within its zero-padded frame and, with hflip, mirrored with probability 1/2. The
// draws depend only on (seed, epoch, step), so a resumed run sees the same images.
void AugmentImages(Tensor* x, int pad, bool hflip, uint64_t seed, int epoch, int64_t step);

class Trainer {
 public:
  // teacher may be null only with options.alpha == 0 and labels (plain fine-tuning).
  static StatusOr<std::unique_ptr<Trainer>> Create(const Graph& student, const Graph* teacher,
                                                   const TrainOptions& options);

  // Loss, accuracy and the gradient of every param on one batch (x [B, ...], labels int64 [B] or
  // undefined), without updating anything. grads: one per param (params() order), on the
  // device that computed it (the host on the CPU backend).
  // teacher_logits: the teacher's [B, C] logits for x when the caller has them (else the
  // teacher runs).
  StatusOr<StepResult> Gradients(const Tensor& x, const Tensor& labels, std::vector<Tensor>* grads,
                                 const Tensor& teacher_logits = Tensor());
  // One optimizer step at global step `step` of total_steps (the schedule's position). Loss or
  // gradients that are not finite: no update, and the result says so (StepResult::finite).
  StatusOr<StepResult> Step(const Tensor& x, const Tensor& labels, int64_t step, int64_t total_steps,
                            const Tensor& teacher_logits = Tensor());
  // One step at the per-step rate `lr` exactly (no schedule, no batch scaling, no rollback
  // factor; times each param's lr_scales()), on rows `rows` of data (with data parallelism this
  // rank's share of them: every rank calls it with the same rows); the teacher's logits from the
  // cache where it has them. The learning-rate range test's step.
  StatusOr<StepResult> StepRows(const Dataset& data, const std::vector<int64_t>& rows, float lr);
  // One pass over data in a seeded order (seed + epoch), batch by batch (the last batch shorter),
  // with the divergence guard (TrainOptions::divergence_guard); on_rollback sees each divergence.
  StatusOr<EpochStats> TrainEpoch(const Dataset& data, int epoch, const std::function<void(const Progress&)>& progress,
                                  const std::function<void(const Rollback&)>& on_rollback = nullptr);
  // Top-1 accuracy of the current student on data (with data parallelism every rank evaluates its
  // share of the rows and the hits are summed: every rank must call it).
  StatusOr<double> Evaluate(const Dataset& data, int64_t batch = 256) const;

  // The student with its current weights (the original graph, initializers replaced; weights it
  // stores quantized are quantized again with their scales).
  Graph CurrentModel() const;
  const std::vector<std::string>& params() const { return params_; }
  // The training graph's nodes with no kernel on the backend's device (run on the CPU with
  // copies; Session::fallback_nodes); empty on the CPU.
  const std::vector<std::string>& fallback_nodes() const { return train_->fallback_nodes(); }
  // On the backend's device (TrainOptions::backend); a caller may put host tensors of the same
  // dims here (a restored checkpoint), and the next step moves them there.
  std::vector<Tensor>& param_values() { return values_; }
  // Optimizer state (momentum / Adam moments) and the step counter, for checkpoints (device as
  // param_values()).
  std::vector<Tensor>& state1() { return m_; }
  std::vector<Tensor>& state2() { return v_; }
  int64_t& adam_steps() { return adam_t_; }
  // Model state the steps update but do not train (BatchNormalization running statistics with
  // bn_training), by initializer name; for checkpoints (device as param_values()).
  const std::vector<std::string>& state_names() const { return state_names_; }
  std::vector<Tensor>& state_values() { return state_values_; }
  int64_t StepsPerEpoch(int64_t samples) const { return (samples + opts_.batch - 1) / opts_.batch; }
  const TrainOptions& options() const { return opts_; }

  // What a rollback restores: params, optimizer state, model state and the step counter, in host
  // memory (a copy: training goes on in place).
  struct State {
    std::vector<Tensor> values, m, v, model_state;
    int64_t adam_steps = 0;
  };
  State Snapshot() const;
  void Restore(const State& s);

  // Learning rates. lr: TrainOptions::lr (for batch 256 when scale_lr); the peak rate the
  // schedule reaches is lr() times the rollbacks' factor (peak_lr()); StepRate converts a rate
  // in lr's units to the optimizer's per-step rate.
  float lr() const { return opts_.lr; }
  void set_lr(float lr) { opts_.lr = lr; }
  float peak_lr() const { return opts_.lr * lr_factor_; }
  float StepRate(float lr) const { return lr * (opts_.scale_lr ? static_cast<float>(opts_.batch) / 256.f : 1.f); }
  // Per param (params() order) a multiplier of the rate: 0 freezes the param (no update at all).
  // Empty: 1 for every param.
  const std::vector<float>& lr_scales() const { return lr_scale_; }
  void set_lr_scales(std::vector<float> s) { lr_scale_ = std::move(s); }
  // TrainOptions::lr_auto. A run resumed from a checkpoint that holds lr=auto's rates sets them
  // (set_lr, set_lr_scales) and turns it off: the range test is not run again (ResumeFinetune).
  void set_lr_auto(bool on) { opts_.lr_auto = on; }
  // Per param the compressed form it trains (ParamKinds in runtime/training/lr_finder.h):
  // "codebook", "circulant", "binary", "low-rank" or "dense".
  const std::vector<std::string>& param_kinds() const { return kinds_; }
  // The rollbacks so far and the rate's factor they left (0.1 per rollback by default), for a
  // checkpoint: a resumed run goes on at the rate the rollbacks left.
  int rollbacks() const { return rollbacks_; }
  float rollback_lr_factor() const { return lr_factor_; }
  void SetRollbackState(int rollbacks, float lr_factor) {
    rollbacks_ = rollbacks;
    lr_factor_ = lr_factor;
  }

 private:
  Trainer() = default;
  // ready: the training session's output hook (RunNotifying), null for a plain Run.
  StatusOr<StepResult> Forward(const Tensor& x, const Tensor& labels, const Tensor& teacher_logits,
                               std::vector<Tensor>* outs,
                               const std::function<void(size_t, const Tensor&)>* ready = nullptr) const;
  StatusOr<StepResult> GradientsNotifying(const Tensor& x, const Tensor& labels, std::vector<Tensor>* grads,
                                          const Tensor& teacher_logits,
                                          const std::function<void(size_t, const Tensor&)>* ready);
  // The teacher's logits for rows `rows` of data whose batch is x: from the cache where every
  // row is there, else by running the teacher (and filling the cache). *cached: rows served.
  StatusOr<Tensor> TeacherLogits(const Dataset& data, const std::vector<int64_t>& rows, const Tensor& x,
                                 int64_t* cached);
  // The cache set up for data (emptied when it was another data set's).
  void CacheFor(const Dataset& data);
  // The cached logits of samples rows[0, count), every one cached.
  Tensor CachedLogits(const int64_t* rows, int64_t count) const;
  // Data parallelism's: every rank calls it for global batch rows order[g0, g1), of which it
  // holds order[l0, l1) in x (none: an undefined result). The ranks' fresh logits are summed into
  // every rank's cache, so from the second epoch no rank runs the teacher, wherever the reshuffle
  // puts a row (a cache per rank would hold only the rows it happened to see).
  StatusOr<Tensor> SharedTeacherLogits(const Dataset& data, const std::vector<int64_t>& order, int64_t g0, int64_t g1,
                                       int64_t l0, int64_t l1, const Tensor& x, int64_t* cached);
  float LearningRate(int64_t step, int64_t total) const;
  // Step's work at per-step rate lr.
  StatusOr<StepResult> StepAt(const Tensor& x, const Tensor& labels, float lr, const Tensor& teacher_logits);
  // The optimizer update of every param from grads (on the device), clipped by the global norm.
  Status ApplyUpdate(const std::vector<Tensor>& grads, double norm, float lr);
  // The teacher's logits of TrainEpoch's step s (undefined: the teacher runs in the step).
  StatusOr<Tensor> EpochTeacherLogits(const Dataset& data, const std::vector<int64_t>& order, int64_t s,
                                      const Tensor& x, int64_t* cached);
  // Synchronous SGD's step on this rank's rows (none: a global batch's tail shorter than the rank
  // count): its gradients computed, each bucket's all-reduce started as the backward pass
  // computes the bucket's last gradient, then waited for; grads and r become the global batch's
  // (the ranks' gradients summed weighted by their row counts).
  StatusOr<StepResult> ReducedGradients(const Tensor& x, const Tensor& labels, const Tensor& teacher_logits,
                                        std::vector<Tensor>* grads);
  void PlanBuckets();
  // Model averaging: the ranks' parameters and optimizer state replaced by their mean.
  Status AverageModels();
  // Data parallelism's step result: the ranks' rows, loss and hits summed into the global batch's.
  Status ReduceStats(int64_t rows, StepResult* r) const;
  bool Distributed() const { return opts_.comm && opts_.comm->size() > 1; }
  // A param's current values in host memory, to read (the param itself on the CPU, else a download).
  std::optional<Tensor> Latent(const std::string& param) const;
  // Params, optimizer state and model state moved to the backend's device where they are not.
  Status ToBackendDevice();

  TrainOptions opts_;
  DeviceType device_ = DeviceType::kCpu;  // the backend's
  Graph student_;
  std::unique_ptr<Session> train_, teacher_;
  std::string input_name_;
  std::vector<std::string> params_;
  std::vector<QuantizedParam> quantized_;  // params the student stores quantized
  std::vector<BinaryParam> binary_;        // binarized layers' latent weights
  std::vector<Tensor> values_, m_, v_;
  std::vector<std::string> state_names_;
  std::vector<Tensor> state_values_;
  std::vector<Tensor> pending_state_;  // the last Gradients() call's updated state
  int64_t adam_t_ = 0;
  std::vector<std::string> kinds_;  // param_kinds()
  std::vector<float> lr_scale_;     // lr_scales()
  // The divergence guard's state over the run, the rate's factor from rollbacks, and their count.
  DivergenceGuard guard_;
  float lr_factor_ = 1.f;
  int rollbacks_ = 0;
  double comm_s_ = 0;  // time in collectives since the epoch began (EpochStats::comm_s)
  int64_t buckets_ = 0, buckets_overlapped_ = 0;  // since the epoch began (EpochStats)
  // Gradient buckets (PlanBuckets): per param its offset in flat_ and its bucket; per bucket its
  // [begin, end) in flat_ and, during a step, how many of its gradients are still to come.
  std::vector<int64_t> grad_offset_;
  std::vector<int> bucket_of_;
  std::vector<std::pair<int64_t, int64_t>> bucket_range_;
  std::vector<int> bucket_missing_;
  std::vector<float> flat_;
  // Teacher logits per sample of the data set last trained on (see TrainOptions::cache_teacher).
  const void* cache_for_ = nullptr;
  int64_t cache_classes_ = 0;
  std::vector<float> teacher_cache_;
  std::vector<uint8_t> cache_filled_;
};

}  // namespace whittle::training
