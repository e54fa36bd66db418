#include "runtime/training/trainer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <utility>

#include "kernels/kernel.h"
#include "kernels/param_update.h"
#include "lib/ir/binary_format.h"
#include "runtime/session_internal.h"
#include "runtime/training/autodiff.h"
#include "runtime/training/lift.h"
#include "runtime/training/lr_finder.h"

namespace whittle::training {
namespace {

// Rows idx[begin, end) of t (dim 0) gathered into a new tensor.
Tensor GatherRows(const Tensor& t, const std::vector<int64_t>& idx, int64_t begin, int64_t end) {
  Dims d = t.dims();
  d[0] = end - begin;
  Tensor out(t.dtype(), d);
  const size_t row = t.nbytes() / static_cast<size_t>(std::max<int64_t>(1, t.dim(0)));
  for (int64_t i = begin; i < end; ++i)
    std::memcpy(static_cast<char*>(out.raw_data()) + static_cast<size_t>(i - begin) * row,
                static_cast<const char*>(t.raw_data()) + static_cast<size_t>(idx[static_cast<size_t>(i)]) * row, row);
  return out;
}

// Row-wise softmax of z / T into p (B x C).
void Softmax(const float* z, int64_t B, int64_t C, float T, std::vector<float>* p) {
  p->resize(static_cast<size_t>(B * C));
  for (int64_t i = 0; i < B; ++i) {
    const float* zi = z + i * C;
    float* pi = p->data() + i * C;
    float m = zi[0];
    for (int64_t c = 1; c < C; ++c) m = std::max(m, zi[c]);
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += (pi[c] = std::exp((zi[c] - m) / T));
    for (int64_t c = 0; c < C; ++c) pi[c] = static_cast<float>(pi[c] / sum);
  }
}

// t's values in host memory: t itself on the CPU, else downloaded.
Tensor HostValues(const Tensor& t) {
  auto h = t.ToDevice(DeviceType::kCpu);
  WH_CHECK(h.ok());  // a download of the trainer's own buffer fails only with the device
  return *h;
}

// t's values in host memory, in a buffer of their own (a snapshot: training goes on in place).
Tensor HostSnapshot(const Tensor& t) { return t.device() == DeviceType::kCpu ? t.Clone() : HostValues(t); }

}  // namespace

void AugmentImages(Tensor* x, int pad, bool hflip, uint64_t seed, int epoch, int64_t step) {
  const int64_t B = x->dim(0), H = x->dim(x->rank() - 2), W = x->dim(x->rank() - 1);
  const int64_t planes = B > 0 && H > 0 && W > 0 ? x->numel() / (B * H * W) : 0;
  std::mt19937_64 rng((seed + 0x9E3779B97F4A7C15ULL) * 6364136223846793005ULL + static_cast<uint64_t>(epoch) * 1000003ULL +
                      static_cast<uint64_t>(step));
  std::vector<float> tmp(static_cast<size_t>(H * W));
  float* p = x->data<float>();
  for (int64_t b = 0; b < B; ++b) {
    const int64_t dy = pad > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * pad + 1)) - pad : 0;
    const int64_t dx = pad > 0 ? static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * pad + 1)) - pad : 0;
    const bool flip = hflip && (rng() & 1);
    for (int64_t c = 0; c < planes; ++c) {
      float* img = p + (b * planes + c) * H * W;
      for (int64_t y = 0; y < H; ++y)
        for (int64_t xx = 0; xx < W; ++xx) {
          const int64_t sy = y + dy, sx = (flip ? W - 1 - xx : xx) + dx;
          tmp[static_cast<size_t>(y * W + xx)] = sy >= 0 && sy < H && sx >= 0 && sx < W ? img[sy * W + sx] : 0.f;
        }
      std::memcpy(img, tmp.data(), sizeof(float) * tmp.size());
    }
  }
}

namespace {

// Builds batches on a thread of its own, one ahead of the consumer, so that the gathering of
// shuffled rows overlaps the previous step.
class Prefetcher {
 public:
  using Batch = std::pair<Tensor, Tensor>;
  // Batches first .. steps - 1 (a rolled-back epoch starts again from its snapshot's step).
  Prefetcher(int64_t first, int64_t steps, std::function<Batch(int64_t)> make)
      : first_(first), steps_(steps), make_(std::move(make)) {
    worker_ = std::thread([this] {
      for (int64_t s = first_; s < steps_; ++s) {
        Batch b = make_(s);
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !full_ || stop_; });
        if (stop_) return;
        next_ = std::move(b);
        full_ = true;
        cv_.notify_all();
      }
    });
  }
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  // The next batch, and how long the caller waited for it (seconds).
  Batch Next(double* waited) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return full_; });
    *waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Batch b = std::move(next_);
    full_ = false;
    cv_.notify_all();
    return b;
  }

 private:
  int64_t first_, steps_;
  std::function<Batch(int64_t)> make_;
  std::mutex mu_;
  std::condition_variable cv_;
  Batch next_;
  bool full_ = false, stop_ = false;
  std::thread worker_;
};

}  // namespace

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const Graph& student, const Graph* teacher,
                                                   const TrainOptions& options) {
  std::unique_ptr<Trainer> t(new Trainer());
  t->opts_ = options;
  t->device_ = BackendDevice(options.backend);
  if (!options.use_labels) t->opts_.alpha = 1.f;
  if (t->opts_.weight_decay < 0) t->opts_.weight_decay = options.optimizer == OptimizerKind::kSgd ? 5e-4f : 0.01f;
  if (t->opts_.alpha > 0 && !teacher) return InvalidArgument("distillation (alpha > 0 or no labels) needs a teacher");
  if (options.batch < 1) return InvalidArgument("batch must be >= 1");
  if (!(options.temperature > 0)) return InvalidArgument("temperature must be > 0");
  if (!(options.alpha >= 0 && options.alpha <= 1)) return InvalidArgument("alpha must be in [0, 1]");
  if (options.crop_padding < 0) return InvalidArgument("crop padding must be >= 0");
  t->student_ = student;
  TrainingGraphOptions go;
  go.bn_training = options.bn_training;
  go.refresh_weight_scales = options.refresh_weight_scales;
  for (const auto& h : options.hints) go.hints.push_back(h.first);
  if (!options.hints.empty() && !teacher) return InvalidArgument("a hint (feature) loss needs a teacher");
  if (!(options.hint_weight >= 0)) return InvalidArgument("the hint weight must be >= 0");
  WH_ASSIGN_OR_RETURN(TrainingGraph tg, BuildTrainingGraph(student, t->opts_.temperature, go));
  for (const StateUpdate& su : tg.state) {
    t->state_names_.push_back(su.initializer);
    t->state_values_.push_back(su.initial.Clone());
  }
  t->input_name_ = tg.model_input;
  t->params_ = tg.params;
  t->quantized_ = tg.quantized;
  t->binary_ = tg.binary;
  t->kinds_ = ParamKinds(student, t->params_, t->quantized_, t->binary_);
  t->guard_ = DivergenceGuard(options.divergence_factor);
  if (!(options.rollback_lr_factor > 0 && options.rollback_lr_factor < 1))
    return InvalidArgument("the rollback's learning-rate factor must be in (0, 1)");
  if (!(options.divergence_factor > 1)) return InvalidArgument("the divergence factor must be > 1");
  // Own copies: tensor copies share their bytes, and the updates are made in place.
  for (const Tensor& p : tg.initial) t->values_.push_back(p.Clone());
  for (const Tensor& p : t->values_) {
    Tensor z(DType::kFloat32, p.dims());
    std::memset(z.raw_data(), 0, z.nbytes());
    t->m_.push_back(z);
    Tensor z2(DType::kFloat32, p.dims());
    std::memset(z2.raw_data(), 0, z2.nbytes());
    t->v_.push_back(z2);
  }
  SessionOptions so;
  so.num_threads = options.threads;
  so.backend = options.backend;
  so.precision = options.precision;
  // The session says first whether the device is there (and registers its backend).
  WH_ASSIGN_OR_RETURN(t->train_, Session::FromGraph(std::move(tg.graph), so));
  if (!ParamUpdatesFor(t->device_))
    return Unimplemented(std::string("training on '") + BackendName(options.backend) +
                         "': this build has no optimizer update for that device");
  WH_RETURN_IF_ERROR(t->ToBackendDevice());
  if (teacher) {
    if (teacher->inputs().size() != 1 || teacher->outputs().empty())
      return InvalidArgument("the teacher must have one data input and logits as its first output");
    const Value& ti = teacher->value(teacher->inputs()[0]);
    const Value& si = student.value(student.inputs()[0]);
    if (ti.dtype != si.dtype || !ti.shape || !si.shape || ti.shape->size() != si.shape->size())
      return InvalidArgument("the student's input '" + si.name + "' does not match the teacher's '" + ti.name + "'");
    Graph tg2 = *teacher;
    for (const auto& h : options.hints) {
      const int v = tg2.FindValue(h.second);
      if (v < 0) return InvalidArgument("hint: the teacher has no tensor '" + h.second + "'");
      tg2.outputs().push_back(v);
    }
    if (!options.hints.empty()) so.optimize = false;  // keep the named tensors
    WH_ASSIGN_OR_RETURN(t->teacher_, Session::FromGraph(std::move(tg2), so));
    so.optimize = true;
  }
  if (t->Distributed()) {
    // Every rank starts from rank 0's weights and model state (as PyTorch DDP does): a student
    // that each rank compressed itself may differ in the last bits, and synchronous SGD would
    // keep the difference.
    for (auto* set : {&t->values_, &t->state_values_})
      for (Tensor& v : *set) {
        if (!v.defined() || v.device() != DeviceType::kCpu) continue;
        v = v.Clone();
        WH_RETURN_IF_ERROR(t->opts_.comm->Broadcast(v.raw_data(), static_cast<int64_t>(v.nbytes()), 0));
      }
  }
  return t;
}

StatusOr<StepResult> Trainer::Forward(const Tensor& x, const Tensor& labels, const Tensor& teacher_logits,
                                      std::vector<Tensor>* outs,
                                      const std::function<void(size_t, const Tensor&)>* ready) const {
  const int64_t B = x.dim(0);
  const Value& lv = SessionGraph(*train_).value(SessionGraph(*train_).outputs()[0]);
  const int64_t C = lv.shape && lv.shape->size() == 2 && (*lv.shape)[1].known() ? (*lv.shape)[1].value : -1;
  if (C < 1) return InvalidArgument("the logits need a known class count");
  const float alpha = opts_.alpha, T = opts_.temperature;
  const float a = (1.f - alpha) / static_cast<float>(B), b = alpha * T / static_cast<float>(B);
  std::vector<float> p_teacher;
  std::vector<Tensor> features;  // the teacher's hint tensors
  if (alpha > 0 || !opts_.hints.empty()) {
    Tensor tz = teacher_logits;
    if (!tz.defined() || !opts_.hints.empty()) {
      WH_ASSIGN_OR_RETURN(std::vector<Tensor> tout, teacher_->Run({{teacher_->inputs()[0].name, x}}));
      tz = tout[0];
      features.assign(tout.begin() + 1, tout.end());
    }
    if (tz.dtype() != DType::kFloat32 || tz.numel() != B * C)
      return InvalidArgument("the teacher's logits " + DimsToString(tz.dims()) + " do not match the student's [" +
                             std::to_string(B) + ", " + std::to_string(C) + "]");
    Softmax(tz.data<float>(), B, C, T, &p_teacher);
  }
  std::vector<float> onehot;
  if (labels.defined()) {
    const float eps = opts_.label_smoothing;
    onehot.assign(static_cast<size_t>(B * C), eps / static_cast<float>(C));
    for (int64_t i = 0; i < B; ++i) {
      const int64_t y = labels.data<int64_t>()[i];
      if (y < 0 || y >= C) return InvalidArgument("label " + std::to_string(y) + " is outside the model's " +
                                                  std::to_string(C) + " classes");
      onehot[static_cast<size_t>(i * C + y)] += 1.f - eps;
    }
  } else if (alpha < 1) {
    return InvalidArgument("the data has no labels: use --no-labels (teacher only)");
  }
  Tensor target(DType::kFloat32, {B, C});
  float* tp = target.data<float>();
  for (int64_t i = 0; i < B * C; ++i)
    tp[i] = (alpha < 1 ? a * onehot[static_cast<size_t>(i)] : 0.f) + (alpha > 0 ? b * p_teacher[static_cast<size_t>(i)] : 0.f);
  std::map<std::string, Tensor> in{{input_name_, x},
                                   {kTargetInput, target},
                                   {kCeCoefInput, Tensor::Scalar<float>(a)},
                                   {kKdCoefInput, Tensor::Scalar<float>(b)}};
  for (size_t i = 0; i < params_.size(); ++i) in[params_[i]] = values_[i];
  for (size_t i = 0; i < state_names_.size(); ++i) in[state_names_[i]] = state_values_[i];
  for (const QuantizedParam& q : quantized_)
    if (!q.live_scale.empty()) in[q.live_scale] = LiveScale(*Latent(q.latent), q);  // a download on a device
  for (size_t i = 0; i < opts_.hints.size(); ++i) {
    if (i >= features.size() || features[i].dtype() != DType::kFloat32)
      return InvalidArgument("hint: the teacher's tensor '" + opts_.hints[i].second + "' is not float32");
    const Graph& tg = SessionGraph(*train_);
    const int tv = tg.FindValue(kHintTargetPrefix + std::to_string(i));
    const std::optional<SymShape>& want = tg.value(tv).shape;
    bool fits = !want || want->size() == features[i].dims().size();
    for (size_t d = 0; fits && want && d < want->size(); ++d)
      fits = !(*want)[d].known() || (*want)[d].value == features[i].dim(static_cast<int>(d));
    if (!fits)
      return InvalidArgument("hint '" + opts_.hints[i].first + "' = '" + opts_.hints[i].second + "': the student's " +
                             SymShapeToString(*want) + " and the teacher's " + DimsToString(features[i].dims()) +
                             " differ");
    in[kHintTargetPrefix + std::to_string(i)] = features[i];
    // d/ds of w * mean((s - t)^2) = 2 w / numel * (s - t).
    in[std::string(kHintCoefInput) + "_" + std::to_string(i)] =
        Tensor::Scalar<float>(2.f * opts_.hint_weight / static_cast<float>(std::max<int64_t>(1, features[i].numel())));
  }
  // Gradients and state stay where they were computed (the device, for the optimizer); the
  // logits and the hint tensors come to the host for the loss.
  if (ready) {
    WH_ASSIGN_OR_RETURN(*outs, train_->RunNotifying(in, *ready, OutputsOn::kWhereComputed));
  } else {
    WH_ASSIGN_OR_RETURN(*outs, train_->Run(in, nullptr, OutputsOn::kWhereComputed));
  }
  WH_ASSIGN_OR_RETURN((*outs)[0], (*outs)[0].ToDevice(DeviceType::kCpu));
  for (size_t i = 0; i < opts_.hints.size(); ++i) {
    Tensor& sv = (*outs)[outs->size() - opts_.hints.size() + i];
    WH_ASSIGN_OR_RETURN(sv, sv.ToDevice(DeviceType::kCpu));
  }
  double hint_loss = 0;
  for (size_t i = 0; i < opts_.hints.size(); ++i) {
    const Tensor& sv = (*outs)[outs->size() - opts_.hints.size() + i];
    if (sv.dims() != features[i].dims())
      return InvalidArgument("hint '" + opts_.hints[i].first + "' = '" + opts_.hints[i].second + "': the student's " +
                             DimsToString(sv.dims()) + " and the teacher's " + DimsToString(features[i].dims()) +
                             " differ");
    double sse = 0;
    for (int64_t k = 0; k < sv.numel(); ++k) {
      const double d = static_cast<double>(sv.data<float>()[k]) - features[i].data<float>()[k];
      sse += d * d;
    }
    hint_loss += opts_.hint_weight * sse / static_cast<double>(std::max<int64_t>(1, sv.numel()));
  }
  // The loss: (1 - alpha) CE + alpha T^2 KL(p_teacher || softmax(z / T)), batch means.
  const float* z = (*outs)[0].data<float>();
  std::vector<float> s, q;
  Softmax(z, B, C, 1.f, &s);
  StepResult r;
  r.samples = B;
  double ce = 0, kl = 0;
  for (int64_t i = 0; i < B; ++i) {
    int64_t best = 0;
    for (int64_t c = 0; c < C; ++c) {
      const size_t k = static_cast<size_t>(i * C + c);
      if (z[k] > z[i * C + best]) best = c;
      if (alpha < 1 && onehot[k] > 0) ce -= onehot[k] * std::log(std::max(s[k], 1e-30f));
    }
    if (labels.defined()) r.correct += best == labels.data<int64_t>()[i];
  }
  if (alpha > 0) {
    Softmax(z, B, C, T, &q);
    for (size_t k = 0; k < q.size(); ++k)
      if (p_teacher[k] > 0) kl += p_teacher[k] * (std::log(p_teacher[k]) - std::log(std::max(q[k], 1e-30f)));
  }
  r.loss = ((1.0 - alpha) * ce + alpha * T * T * kl) / static_cast<double>(B) + hint_loss;
  return r;
}

StatusOr<StepResult> Trainer::Gradients(const Tensor& x, const Tensor& labels, std::vector<Tensor>* grads,
                                        const Tensor& teacher_logits) {
  return GradientsNotifying(x, labels, grads, teacher_logits, nullptr);
}

StatusOr<StepResult> Trainer::GradientsNotifying(const Tensor& x, const Tensor& labels, std::vector<Tensor>* grads,
                                                 const Tensor& teacher_logits,
                                                 const std::function<void(size_t, const Tensor&)>* ready) {
  std::vector<Tensor> outs;
  WH_ASSIGN_OR_RETURN(StepResult r, Forward(x, labels, teacher_logits, &outs, ready));
  // Outputs: logits, one gradient per param, then the updated model state (running statistics).
  const size_t P = params_.size();
  grads->assign(outs.begin() + 1, outs.begin() + 1 + static_cast<std::ptrdiff_t>(P));
  pending_state_.assign(outs.begin() + 1 + static_cast<std::ptrdiff_t>(P),
                        outs.end() - static_cast<std::ptrdiff_t>(opts_.hints.size()));
  return r;
}

float Trainer::LearningRate(int64_t step, int64_t total) const {
  float lr = StepRate(opts_.lr) * lr_factor_;
  const int64_t warm = static_cast<int64_t>(std::llround(opts_.warmup_fraction * static_cast<double>(total)));
  if (step < warm) return lr * static_cast<float>(step + 1) / static_cast<float>(warm);
  if (opts_.cosine && total > warm)
    lr *= 0.5f * (1.f + std::cos(3.14159265358979f * static_cast<float>(step - warm) / static_cast<float>(total - warm)));
  return lr;
}

StatusOr<StepResult> Trainer::Step(const Tensor& x, const Tensor& labels, int64_t step, int64_t total_steps,
                                   const Tensor& teacher_logits) {
  return StepAt(x, labels, LearningRate(step, total_steps), teacher_logits);
}

StatusOr<StepResult> Trainer::StepAt(const Tensor& x, const Tensor& labels, float lr, const Tensor& teacher_logits) {
  WH_RETURN_IF_ERROR(ToBackendDevice());  // a restored checkpoint's (or snapshot's) host tensors
  std::vector<Tensor> grads;
  StepResult r;
  const int64_t rows = x.defined() && x.rank() > 0 ? x.dim(0) : 0;
  const bool averaging = Distributed() && opts_.average_every > 0;
  if (Distributed() && !averaging) {
    WH_ASSIGN_OR_RETURN(r, ReducedGradients(x, labels, teacher_logits, &grads));
  } else if (averaging && rows == 0) {  // a global batch's tail shorter than the rank count: no local step
    for (const Tensor& v : values_) {
      Tensor z(DType::kFloat32, v.dims());
      std::fill(z.data<float>(), z.data<float>() + z.numel(), 0.f);
      grads.push_back(std::move(z));
    }
  } else {
    WH_ASSIGN_OR_RETURN(r, Gradients(x, labels, &grads, teacher_logits));
  }
  // The optimizer runs where the params live; a gradient a CPU kernel computed moves there.
  const ParamUpdates& up = *ParamUpdatesFor(device_);
  const int threads = train_->options().num_threads;  // the Session's, with 0 resolved to all cores
  double norm2 = 0;
  for (Tensor& g : grads) {
    WH_ASSIGN_OR_RETURN(g, g.ToDevice(device_));
    double sum = 0;
    WH_RETURN_IF_ERROR(up.sum_squares(g.data<float>(), g.numel(), threads, &sum));
    norm2 += sum;
  }
  if (averaging) {
    // Each rank's gradients are its own here: one that is not finite makes the summed loss NaN,
    // so that every rank sees the divergence and they all roll back alike.
    if (!std::isfinite(norm2)) r.loss = std::numeric_limits<double>::quiet_NaN();
    const auto c0 = std::chrono::steady_clock::now();
    WH_RETURN_IF_ERROR(ReduceStats(rows, &r));
    comm_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    if (!std::isfinite(r.loss)) norm2 = r.loss;
  }
  if (!std::isfinite(norm2) || !std::isfinite(r.loss)) {
    r.finite = false;
    return r;
  }
  WH_RETURN_IF_ERROR(ApplyUpdate(grads, std::sqrt(norm2), lr));
  // The step's running statistics become the model's (never touched by the optimizer).
  // A device output is the trainer's own buffer already; a host one may share the arena's.
  for (size_t i = 0; i < state_values_.size() && i < pending_state_.size(); ++i)
    state_values_[i] = pending_state_[i].device() == DeviceType::kCpu ? pending_state_[i].Clone() : pending_state_[i];
  return r;
}

Status Trainer::ApplyUpdate(const std::vector<Tensor>& grads, double norm, float lr) {
  const ParamUpdates& up = *ParamUpdatesFor(device_);
  const int threads = train_->options().num_threads;
  UpdateHyper h;
  h.adamw = opts_.optimizer == OptimizerKind::kAdamW;
  h.clip = opts_.clip_norm > 0 && norm > opts_.clip_norm ? static_cast<float>(opts_.clip_norm / norm) : 1.f;
  ++adam_t_;
  h.first = adam_t_ == 1;
  h.momentum = opts_.momentum;
  h.nesterov = opts_.nesterov;
  h.beta1 = opts_.beta1;
  h.beta2 = opts_.beta2;
  h.eps = opts_.adam_eps;
  h.bc1 = 1.f - std::pow(opts_.beta1, static_cast<float>(adam_t_));
  h.bc2 = 1.f - std::pow(opts_.beta2, static_cast<float>(adam_t_));
  for (size_t k = 0; k < values_.size(); ++k) {
    const float scale = k < lr_scale_.size() ? lr_scale_[k] : 1.f;
    if (scale == 0.f) continue;  // frozen: no step, no weight decay, no momentum
    h.lr = lr * scale;
    h.weight_decay = values_[k].rank() >= 2 ? opts_.weight_decay : 0.f;  // none on biases
    WH_RETURN_IF_ERROR(up.update(h, values_[k].data<float>(), grads[k].data<float>(), m_[k].data<float>(),
                                 v_[k].data<float>(), values_[k].numel(), threads));
  }
  return Status::Ok();
}

StatusOr<StepResult> Trainer::StepRows(const Dataset& data, const std::vector<int64_t>& rows, float lr) {
  int64_t b0 = 0, b1 = static_cast<int64_t>(rows.size());
  if (Distributed()) RankRows(0, b1, opts_.comm->rank(), opts_.comm->size(), &b0, &b1);
  const Tensor x = GatherRows(data.inputs, rows, b0, b1);
  const Tensor y = data.has_labels() ? GatherRows(data.labels, rows, b0, b1) : Tensor();
  Tensor tz;  // with data parallelism the teacher runs (the shared cache needs the epoch's order)
  if (!Distributed() && opts_.cache_teacher && opts_.alpha > 0 && teacher_ && opts_.hints.empty() && b1 > b0) {
    int64_t cached = 0;
    WH_ASSIGN_OR_RETURN(tz, TeacherLogits(data, std::vector<int64_t>(rows.begin() + b0, rows.begin() + b1), x, &cached));
  }
  return StepAt(x, y, lr, tz);
}

Trainer::State Trainer::Snapshot() const {
  State s;
  for (const Tensor& t : values_) s.values.push_back(HostSnapshot(t));
  for (const Tensor& t : m_) s.m.push_back(HostSnapshot(t));
  for (const Tensor& t : v_) s.v.push_back(HostSnapshot(t));
  for (const Tensor& t : state_values_) s.model_state.push_back(HostSnapshot(t));
  s.adam_steps = adam_t_;
  return s;
}

void Trainer::Restore(const State& s) {
  // Host copies of the snapshot's own (it may be restored again); the next step moves them.
  for (size_t i = 0; i < values_.size(); ++i) values_[i] = s.values[i].Clone();
  for (size_t i = 0; i < m_.size(); ++i) m_[i] = s.m[i].Clone();
  for (size_t i = 0; i < v_.size(); ++i) v_[i] = s.v[i].Clone();
  for (size_t i = 0; i < state_values_.size(); ++i) state_values_[i] = s.model_state[i].Clone();
  adam_t_ = s.adam_steps;
}

StatusOr<Tensor> Trainer::EpochTeacherLogits(const Dataset& data, const std::vector<int64_t>& order, int64_t s,
                                             const Tensor& x, int64_t* cached) {
  const bool augment = opts_.crop_padding > 0 || opts_.hflip;
  if (!opts_.cache_teacher || augment || opts_.alpha <= 0 || !teacher_ || !opts_.hints.empty()) return Tensor();
  const int64_t n = data.size(), g0 = s * opts_.batch, g1 = std::min(n, g0 + opts_.batch);
  int64_t b0 = g0, b1 = g1;
  if (Distributed()) {  // every rank, rows or none: the logits are shared
    RankRows(g0, g1, opts_.comm->rank(), opts_.comm->size(), &b0, &b1);
    return SharedTeacherLogits(data, order, g0, g1, b0, b1, x, cached);
  }
  if (x.dim(0) == 0) return Tensor();
  return TeacherLogits(data, std::vector<int64_t>(order.begin() + b0, order.begin() + b1), x, cached);
}

StatusOr<EpochStats> Trainer::TrainEpoch(const Dataset& data, int epoch,
                                         const std::function<void(const Progress&)>& progress,
                                         const std::function<void(const Rollback&)>& on_rollback) {
  const int64_t n = data.size(), steps = StepsPerEpoch(n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(opts_.seed * 1000003ULL + static_cast<uint64_t>(epoch));
  std::shuffle(order.begin(), order.end(), rng);
  EpochStats st;
  st.epoch = epoch;
  const auto t0 = std::chrono::steady_clock::now();
  comm_s_ = 0;
  buckets_ = buckets_overlapped_ = 0;
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  const int64_t total = steps * opts_.epochs;
  const bool augment = opts_.crop_padding > 0 || opts_.hflip;
  if (augment && (data.inputs.dtype() != DType::kFloat32 || data.inputs.rank() < 3))
    return InvalidArgument("image augmentation needs float32 images [N, ..., H, W]; the training data is " +
                           std::string(DTypeName(data.inputs.dtype())) + " " + DimsToString(data.inputs.dims()));
  auto make = [&](int64_t s) {
    int64_t b0 = s * opts_.batch, b1 = std::min(n, b0 + opts_.batch);  // this rank's rows of global batch s
    if (Distributed()) RankRows(b0, b1, opts_.comm->rank(), opts_.comm->size(), &b0, &b1);
    Prefetcher::Batch b(GatherRows(data.inputs, order, b0, b1),
                        data.has_labels() ? GatherRows(data.labels, order, b0, b1) : Tensor());
    if (augment) AugmentImages(&b.first, opts_.crop_padding, opts_.hflip, opts_.seed, epoch, s);
    return b;
  };
  // The last healthy snapshot, with the guard and the epoch's tallies as they were then.
  struct Kept {
    State state;
    DivergenceGuard guard;
    int64_t step;
    double loss_sum;
    int64_t correct, seen;
  };
  std::optional<Kept> kept;
  auto keep = [&](int64_t next) { kept = Kept{Snapshot(), guard_, next, loss_sum, correct, seen}; };
  if (opts_.divergence_guard) keep(0);
  std::optional<Prefetcher> loader;
  loader.emplace(0, steps, make);
  for (int64_t s = 0; s < steps;) {
    const Prefetcher::Batch batch = loader->Next(&st.data_wait_s);
    WH_ASSIGN_OR_RETURN(Tensor tz, EpochTeacherLogits(data, order, s, batch.first, &st.teacher_cached));
    WH_ASSIGN_OR_RETURN(StepResult r, Step(batch.first, batch.second, static_cast<int64_t>(epoch) * steps + s, total, tz));
    if (Distributed() && opts_.average_every > 0 && ((s + 1) % opts_.average_every == 0 || s + 1 == steps)) {
      const auto c0 = std::chrono::steady_clock::now();
      WH_RETURN_IF_ERROR(AverageModels());
      comm_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    }
    if (!opts_.divergence_guard && !r.finite)
      return Internal("the gradients are not finite (loss " + std::to_string(r.loss) + ")");
    if (opts_.divergence_guard && guard_.Diverged(r.loss, r.finite)) {
      Rollback rb;
      rb.epoch = epoch;
      rb.step = s + 1;
      rb.loss = guard_.last_seen();
      rb.was = guard_.reference();
      rb.to_step = kept->step;
      rb.lr_before = peak_lr();
      rb.gave_up = rollbacks_ >= opts_.max_rollbacks;
      if (!rb.gave_up) {
        lr_factor_ *= opts_.rollback_lr_factor;
        ++rollbacks_;
      }
      rb.lr_after = peak_lr();
      Restore(kept->state);
      guard_ = kept->guard;
      s = kept->step;
      loss_sum = kept->loss_sum;
      correct = kept->correct;
      seen = kept->seen;
      st.rollbacks.push_back(rb);
      if (on_rollback) on_rollback(rb);
      if (rb.gave_up) {
        st.gave_up = true;
        break;
      }
      loader.reset();  // its thread joined before the next one starts
      loader.emplace(s, steps, make);
      continue;
    }
    ++s;
    loss_sum += r.loss * static_cast<double>(r.samples);
    correct += r.correct;
    seen += r.samples;
    if (opts_.divergence_guard && opts_.snapshot_every > 0 && s % opts_.snapshot_every == 0 && s < steps &&
        guard_.Healthy())
      keep(s);
    if (progress) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      Progress p;
      p.epoch = epoch;
      p.step = s;
      p.steps = steps;
      p.loss = loss_sum / static_cast<double>(std::max<int64_t>(1, seen));
      p.accuracy = data.has_labels() ? static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(1, seen)) : -1;
      p.samples_per_s = static_cast<double>(seen) / std::max(secs, 1e-9);
      p.eta_s = static_cast<double>(std::max<int64_t>(0, n - seen)) / std::max(p.samples_per_s, 1e-9);
      progress(p);
    }
  }
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.loss = loss_sum / static_cast<double>(std::max<int64_t>(1, seen));
  // (A run that gave up at the epoch's first step kept no step: no accuracy to speak of.)
  st.train_accuracy = data.has_labels() && seen > 0 ? static_cast<double>(correct) / static_cast<double>(seen) : -1;
  st.samples_per_s = static_cast<double>(seen) / std::max(st.seconds, 1e-9);
  st.comm_s = comm_s_;
  st.buckets = buckets_;
  st.buckets_overlapped = buckets_overlapped_;
  st.lr_end = peak_lr();
  return st;
}

void Trainer::CacheFor(const Dataset& data) {
  if (cache_for_ == data.inputs.raw_data() && static_cast<int64_t>(cache_filled_.size()) == data.size()) return;
  cache_for_ = data.inputs.raw_data();
  cache_classes_ = 0;
  teacher_cache_.clear();
  cache_filled_.assign(static_cast<size_t>(data.size()), 0);
}

Tensor Trainer::CachedLogits(const int64_t* rows, int64_t count) const {
  Tensor t(DType::kFloat32, {count, cache_classes_});
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(t.data<float>() + i * cache_classes_, teacher_cache_.data() + rows[i] * cache_classes_,
                sizeof(float) * static_cast<size_t>(cache_classes_));
  return t;
}

StatusOr<Tensor> Trainer::TeacherLogits(const Dataset& data, const std::vector<int64_t>& rows, const Tensor& x,
                                        int64_t* cached) {
  const int64_t n = data.size(), B = static_cast<int64_t>(rows.size());
  CacheFor(data);
  bool all = cache_classes_ > 0;
  for (int64_t r : rows) all = all && cache_filled_[static_cast<size_t>(r)];
  if (all) {
    *cached += B;
    return CachedLogits(rows.data(), B);
  }
  WH_ASSIGN_OR_RETURN(std::vector<Tensor> tout, teacher_->Run({{teacher_->inputs()[0].name, x}}));
  Tensor tz = tout[0];
  const int64_t C = tz.numel() / std::max<int64_t>(1, B);
  // At most 1 GiB of logits; larger outputs (e.g. per-pixel classes) are not cached.
  if (tz.dtype() == DType::kFloat32 && C * B == tz.numel() && C > 0 && n * C <= (int64_t{1} << 28)) {
    if (cache_classes_ == 0) {
      cache_classes_ = C;
      teacher_cache_.assign(static_cast<size_t>(n * C), 0.f);
    }
    if (C == cache_classes_)
      for (int64_t i = 0; i < B; ++i) {
        const int64_t r = rows[static_cast<size_t>(i)];
        std::memcpy(teacher_cache_.data() + r * C, tz.data<float>() + i * C, sizeof(float) * static_cast<size_t>(C));
        cache_filled_[static_cast<size_t>(r)] = 1;
      }
  }
  return tz;
}

std::optional<Tensor> Trainer::Latent(const std::string& name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i] == name) return HostValues(values_[i]);
  return std::nullopt;
}

Status Trainer::ToBackendDevice() {
  for (std::vector<Tensor>* ts : {&values_, &m_, &v_, &state_values_})
    for (Tensor& t : *ts) {
      if (t.device() == device_) continue;
      WH_ASSIGN_OR_RETURN(t, t.ToDevice(device_));
    }
  return Status::Ok();
}

Graph Trainer::CurrentModel() const {
  Graph g = student_;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor value = *Latent(params_[i]);  // read only: may share the param's buffer
    const QuantizedParam* q = nullptr;
    for (const QuantizedParam& c : quantized_)
      if (c.latent == params_[i]) q = &c;
    const int v = g.FindValue(q ? q->stored : params_[i]);
    if (v < 0) continue;
    if (!q) {
      g.value(v).initializer = values_[i].device() == DeviceType::kCpu ? value.Clone() : value;  // a snapshot
      continue;
    }
    // Re-estimated scales: a live weight's from its latent values; a bias beside it keeps its
    // scale's ratio to the weight's (input scale x weight scale).
    QuantizedParam now = *q;
    std::string scale_name;
    if (!q->live_scale.empty()) {
      now.scale = LiveScale(value, *q);
      scale_name = q->stored_scale;
    } else if (!q->bias_of.empty() && Latent(q->bias_of)) {
      const QuantizedParam* w = nullptr;
      for (const QuantizedParam& c : quantized_)
        if (c.latent == q->bias_of) w = &c;
      const Tensor ws = LiveScale(*Latent(q->bias_of), *w);
      now.scale = q->scale.Clone();
      for (int64_t c = 0; c < now.scale.numel(); ++c) {
        const int64_t wc = ws.numel() <= 1 ? 0 : c;
        if (wc < ws.numel()) now.scale.data<float>()[c] *= ws.data<float>()[wc] / q->weight_scale0.data<float>()[wc];
      }
      // The bias's own scale initializer (the one its DequantizeLinear reads).
      for (const Node& n : g.nodes())
        if (n.op_type == "DequantizeLinear" && !n.inputs.empty() && n.inputs[0] == v && n.inputs.size() > 1) {
          scale_name = g.value(n.inputs[1]).name;
          if (Readers(g, n.inputs[1]) != 1) scale_name.clear(), now.scale = q->scale;
        }
    }
    g.value(v).initializer = QuantizeStored(value, now);
    if (!scale_name.empty()) g.value(g.FindValue(scale_name)).initializer = now.scale.Clone();
  }
  for (size_t i = 0; i < state_names_.size(); ++i) {
    const int v = g.FindValue(state_names_[i]);
    if (v < 0) continue;
    g.value(v).initializer = HostSnapshot(state_values_[i]);
  }
  // Binarized layers: the latent weights' signs packed again, alpha as trained.
  for (const BinaryParam& b : binary_) {
    const std::optional<Tensor> w = Latent(b.latent);
    const std::optional<Tensor> a = Latent(b.alpha);
    const int bv = g.FindValue(b.bits), av = g.FindValue(b.alpha_stored);
    if (!w || bv < 0) continue;
    const int64_t words = BinaryWords(b.k);
    Tensor bits(DType::kUInt64, {b.n, words});
    std::vector<float> row(static_cast<size_t>(b.k));
    for (int64_t r = 0; r < b.n; ++r) {
      for (int64_t i = 0; i < b.k; ++i) row[static_cast<size_t>(i)] = w->data<float>()[b.transposed ? i * b.n + r : r * b.k + i];
      PackSigns(row.data(), b.k, bits.data<uint64_t>() + r * words);
    }
    g.value(bv).initializer = bits;
    if (a && av >= 0) {
      Tensor alpha(DType::kFloat32, {b.n});
      std::copy(a->data<float>(), a->data<float>() + b.n, alpha.data<float>());
      g.value(av).initializer = alpha;
    }
  }
  return g;
}

StatusOr<double> Trainer::Evaluate(const Dataset& data, int64_t batch) const {
  if (!data.has_labels()) return InvalidArgument("evaluation data needs labels");
  SessionOptions so;
  so.num_threads = opts_.threads;
  so.backend = opts_.backend;
  so.precision = opts_.precision;
  WH_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::FromGraph(CurrentModel(), so));
  int64_t correct = 0;
  const std::string in = s->inputs()[0].name;
  // With data parallelism each rank counts its share of the rows, and the counts are summed.
  int64_t r0 = 0, r1 = data.size();
  if (Distributed()) RankRows(0, data.size(), opts_.comm->rank(), opts_.comm->size(), &r0, &r1);
  for (int64_t b0 = r0; b0 < r1; b0 += batch) {
    const int64_t b1 = std::min(r1, b0 + batch);
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> out, s->Run({{in, SliceBatch(data.inputs, b0, b1)}}));
    const Tensor& z = out[0];
    const int64_t C = z.numel() / (b1 - b0);
    for (int64_t i = 0; i < b1 - b0; ++i) {
      const float* zi = z.data<float>() + i * C;
      correct += std::max_element(zi, zi + C) - zi == data.labels.data<int64_t>()[b0 + i];
    }
  }
  if (Distributed()) {
    double sum = static_cast<double>(correct);
    WH_RETURN_IF_ERROR(opts_.comm->AllReduceSum(&sum, 1));
    correct = static_cast<int64_t>(std::llround(sum));
  }
  return static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(1, data.size()));
}

}  // namespace whittle::training
