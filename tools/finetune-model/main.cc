// finetune-model: recovers a compressed model's accuracy by distillation from its original, from
// the two ONNX files alone (runtime/training). The output keeps the student's graph — factorized
// layers stay two layers, pruned layers stay narrow — with retrained weights.
#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/atomic_file.h"
#include "lib/ir/device.h"
#include "lib/ir/format.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/report/finetune_report.h"
#include "runtime/evaluate.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/communicator.h"
#include "runtime/training/finetune.h"
#include "runtime/training/trainer.h"
#include "tools/common/cli.h"
#include "tools/common/progress.h"

namespace {

using whittle::Fmt;
using whittle::Status;
using whittle::training::FinetuneHistory;
using whittle::training::Trainer;

int Fail(const std::string& msg) { return whittle::cli::Fail("finetune-model", msg); }

// Progress on stderr.
class ProgressObserver : public whittle::training::FinetuneObserver {
 public:
  ProgressObserver(whittle::cli::Progress* p, bool quiet) : p_(p), quiet_(quiet) {}
  void Progress(const std::string& stage, int64_t step, int64_t steps, const std::string& detail) override {
    p_->Update(stage, step, steps, detail);
  }
  void Line(const std::string& text) override {
    if (!quiet_) p_->Line(text);
  }

 private:
  whittle::cli::Progress* p_;
  bool quiet_;
};

// The divergence guard's and lr=auto's doing (issue 45) in --json: every rollback, whether
// training gave up, the peak rate at the end, and the range test's rate per group of params.
void AddGuardJson(const FinetuneHistory& h, bool lr_auto, nlohmann::json* j) {
  nlohmann::json rollbacks = nlohmann::json::array();
  for (const whittle::training::Rollback& r : h.rollbacks) {
    nlohmann::json rj{{"epoch", r.epoch + 1}, {"step", r.step}, {"to_step", r.to_step},
                      {"lr_before", r.lr_before}, {"lr_after", r.lr_after}, {"gave_up", r.gave_up}};
    rj["loss"] = std::isfinite(r.loss) ? nlohmann::json(r.loss) : nlohmann::json(nullptr);  // null: not finite
    rj["was"] = r.was;
    rollbacks.push_back(rj);
  }
  (*j)["rollbacks"] = rollbacks;
  (*j)["gave_up"] = h.gave_up;
  (*j)["lr_final"] = h.lr_final;
  (*j)["lr_auto"] = nullptr;
  if (!lr_auto) return;
  nlohmann::json groups = nlohmann::json::object();
  for (const whittle::training::GroupRate& g : h.lr_auto)
    groups[g.kind] = {{"lr", g.lr}, {"params", g.params}, {"lr_at_min", g.lr_at_min},
                      {"start_loss", g.start_loss}, {"min_loss", g.min_loss}, {"steps", g.steps}};
  (*j)["lr_auto"] = groups;
}

}  // namespace

namespace {
int Main(int argc, char** argv);
}  // namespace

int main(int argc, char** argv) { return whittle::cli::GuardedMain("finetune-model", Main, argc, argv); }

namespace {
int Main(int argc, char** argv) {
  CLI::App app{
      "finetune-model: recover a compressed model's accuracy by distillation from the original model\n"
      "(the teacher), from the ONNX files alone. The output keeps the student's structure.\n\n"
      "Examples:\n"
      "  finetune-model cnn.pruned.onnx --teacher cnn.onnx --train-data fashion-mnist:train \\\n"
      "      --eval-data fashion-mnist:test -o cnn.pruned.ft.onnx --epochs 3\n"
      "  finetune-model mlp.svd.onnx --teacher mlp.onnx --train-data fashion-mnist:train --no-labels -o out.onnx\n\n"
      "Loss: (1 - alpha) * cross-entropy(labels) + alpha * T^2 * KL(teacher || student) at temperature T.\n"
      "Defaults one can turn off: --lr is for batch 256 and scaled with --batch (--no-lr-scaling), warmed up\n"
      "over 5 % of the steps then cosine-decayed (--no-cosine), no weight decay on biases, gradients clipped\n"
      "to norm 5 (--clip 0), a divergence rolled back to the last healthy state at a tenth of the rate, at\n"
      "most 3 times (--max-rollbacks, --no-rollback). --lr auto picks the rates by a range test first.\n\n"
      "Data specs: " +
      std::string(whittle::DatasetSpecHelp())};
  app.set_version_flag("--version", "finetune-model (Whittle) 0.1.0");
  std::string student_path, teacher_path, train_spec, eval_spec, out_path, optimizer = "sgd", ckpt_dir, report;
  whittle::training::TrainOptions o;
  int64_t train_limit = -1, eval_limit = -1;
  bool no_labels = false, json = false, resume = false, no_lr_scaling = false, no_cosine = false, quiet = false;
  bool no_teacher_cache = false, fixed_scales = false;
  std::string batchnorm = "train", device = "cpu", precision = "fp32";
  std::vector<std::string> hints;
  app.add_option("student", student_path, "The compressed model to fine-tune (ONNX)")->required();
  app.add_option("--teacher", teacher_path, "The original model (ONNX); needed unless --alpha 0");
  app.add_option("--train-data", train_spec, "Training data (spec below)")->required();
  app.add_option("--eval-data", eval_spec, "Evaluated after every epoch; the best epoch's model is kept");
  app.add_option("-o,--output", out_path, "Output ONNX file")->required();
  app.add_option("--epochs", o.epochs, "Epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", o.batch, "Batch size")->check(CLI::PositiveNumber)->capture_default_str();
  std::string lr_flag = whittle::Fmt("%g", o.lr);
  app.add_option("--lr", lr_flag,
                 "Learning rate (for batch 256 unless --no-lr-scaling), or auto: a range test before epoch 1 picks "
                 "a rate per group of params (codebooks, low-rank factors, circulant, binary, the rest)")
      ->type_name("X|auto")
      ->capture_default_str();
  app.add_flag("--no-lr-scaling", no_lr_scaling, "Use --lr as given, whatever the batch");
  app.add_flag("--no-cosine", no_cosine, "Constant learning rate after the warm-up");
  app.add_option("--optimizer", optimizer, "sgd (momentum 0.9) or adamw")->check(CLI::IsMember({"sgd", "adamw"}))->capture_default_str();
  app.add_flag("--nesterov", o.nesterov, "Nesterov momentum (sgd)");
  app.add_option("--weight-decay", o.weight_decay, "Weight decay (default 5e-4 sgd, 0.01 adamw; never on biases)")->check(CLI::NonNegativeNumber);
  app.add_option("--temperature", o.temperature, "Distillation temperature T")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--alpha", o.alpha, "Weight of the distillation term (0..1)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_flag("--no-labels", no_labels, "Learn from the teacher alone (alpha = 1; the data needs no labels)");
  app.add_option("--label-smoothing", o.label_smoothing, "Label smoothing of the cross-entropy")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  bool no_rollback = false;
  app.add_option("--max-rollbacks", o.max_rollbacks,
                 "A divergence (a loss or gradient that is not finite, or a loss climbing to 4x its lowest) rolls "
                 "training back to its last healthy state at a tenth of the rate; the divergence after this many "
                 "rollbacks ends training there (the best of the student before and the epochs is kept)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  app.add_flag("--no-rollback", no_rollback, "No divergence guard: a gradient that is not finite is an error");
  app.add_option("--clip", o.clip_norm, "Clip gradients to this global norm (0: off)")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--seed", o.seed, "Seed of the data order")->capture_default_str();
  app.add_option("--threads", o.threads, "Intra-op threads (0 = all cores)")->check(CLI::NonNegativeNumber)->capture_default_str();
  whittle::cli::ResourceLimits limits;
  whittle::cli::AddResourceLimitOptions(app, limits);
  std::string external_data;
  whittle::cli::AddExternalDataOption(app, external_data);
  app.add_option("--device", device,
                 "Where the forward and backward passes, the teacher and the optimizer run: cpu, or cuda (the first "
                 "GPU that CUDA_VISIBLE_DEVICES lets the process see; params, "
                 "gradients and optimizer state stay on the GPU; nodes without a CUDA kernel run on the CPU)")
      ->check(whittle::cli::BackendCheck({whittle::Backend::kCpu, whittle::Backend::kCuda}))
      ->capture_default_str();
  app.add_option("--precision", precision,
                 "With --device cuda: arithmetic of the float products: fp32, or tf32/fp16/bf16 on tensor cores "
                 "(mixed precision: tensors, gradients and master weights stay fp32)")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}))->capture_default_str();
  app.add_option("--train-limit", train_limit, "Use only the first N training samples")->check(CLI::PositiveNumber);
  app.add_option("--eval-limit", eval_limit, "Use only the first N evaluation samples")->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-dir", ckpt_dir, "Write a checkpoint after every epoch into this directory");
  app.add_flag("--resume", resume, "Continue from the last checkpoint in --checkpoint-dir");
  app.add_flag("--json", json,
               "Print one JSON object on stdout: the per-epoch history, device, precision, fallback_nodes (training graph nodes on the CPU), accuracy_before (the student before epoch 1), "
               "best_eval_accuracy, best_epoch, teacher_accuracy (with --report), output_params, output_file_bytes, rollbacks (each "
               "divergence: epoch, step, loss, was, to_step, lr_before, lr_after, gave_up), gave_up, lr_final (the peak "
               "rate at the end), lr_auto (with --lr auto: per group of params its lr, params, lr_at_min, start_loss, "
               "min_loss, steps)");
  app.add_option("--report", report,
                 "Write a self-contained HTML report to FILE.html (written only on success): the command, inputs, "
                 "options, the per-epoch table, loss and accuracy charts, the student's accuracy before and the "
                 "teacher's on --eval-data, the output's params and size")
      ->type_name("FILE.html");
  app.add_option("--crop-padding", o.crop_padding,
                 "Augment images [N, ..., H, W]: a random crop of the image zero-padded by P on every side")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_flag("--hflip", o.hflip, "Augment images: a horizontal flip with probability 1/2");
  app.add_flag("--no-teacher-cache", no_teacher_cache,
               "Run the teacher on every batch even without augmentation (by default its logits, C floats per "
               "sample, are kept from the first epoch)");
  app.add_option("--batchnorm", batchnorm,
                 "BatchNormalization while training: train (batch statistics, running statistics updated) or frozen")
      ->check(CLI::IsMember({"train", "frozen"}))->capture_default_str();
  app.add_flag("--fixed-scales", fixed_scales,
               "INT8 (QDQ) students: keep the model's weight scales (by default they are re-estimated from the "
               "weights at every step and written out)");
  app.add_option("--hint", hints,
                 "Feature (hint) loss between a student tensor and the teacher's tensor of the same shape: "
                 "STUDENT_TENSOR[=TEACHER_TENSOR] (value names; repeatable)");
  app.add_option("--hint-weight", o.hint_weight, "Weight of each hint loss, weight * mean((s - t)^2)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  std::string sync = "ssgd";
  app.add_option("--sync", sync,
                 "Under mpirun with several ranks: ssgd (the ranks' gradients summed every step: one global batch) "
                 "or average:K (model averaging: each rank steps on its share, the models averaged every K steps)")
      ->capture_default_str();
  double rank_timeout = 600, bucket_mb = 4;
  app.add_option("--rank-timeout", rank_timeout,
                 "Under mpirun: the job fails, naming the rank, when a rank has not joined a collective this many "
                 "seconds after another (hung or stopped); 0: wait forever. It must exceed the longest work one "
                 "rank does alone (rank 0 writes checkpoints)")
      ->check(CLI::Range(0.0, 1e7))
      ->capture_default_str();
  app.add_option("--bucket-mb", bucket_mb,
                 "Under mpirun with --sync ssgd: gradients are all-reduced in buckets of about this many MiB, each "
                 "started as soon as the backward pass computed it")
      ->check(CLI::Range(0.001, 65536.0))
      ->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "No progress on stderr");
  // Launched by mpirun with several ranks: synchronous data parallelism, rank 0 the one writer
  // (progress, checkpoints, report, output); the others train their share of every batch.
  auto world = whittle::training::JoinLaunchedJob(&argc, &argv);
  if (!world.ok()) return Fail(world.status().message());
  const whittle::training::Communicator* comm = world->get();
  const int rank = comm ? comm->rank() : 0;
  if (auto code = whittle::cli::ParseCommandLine(app, argc, argv, "finetune-model")) return *code;
  o.comm = comm;
  o.bucket_bytes = static_cast<int64_t>(bucket_mb * 1048576.0);
  if (comm) comm->set_timeout(rank_timeout);
  if (auto k = whittle::training::ParseSync(sync); k.ok()) {
    o.average_every = *k;
  } else {
    return Fail("--sync " + k.status().message());
  }
  if (comm && device != "cpu")
    return Fail("--device " + device + " with " + std::to_string(comm->size()) +
                " ranks: data-parallel training runs on the CPU (the NCCL path is not built yet)");
  if (comm && o.batch < comm->size())
    return Fail("--batch " + std::to_string(o.batch) + " is the global batch: it needs at least one sample per rank (" +
                std::to_string(comm->size()) + " ranks)");
  if (rank != 0) {
    quiet = true;
    json = false;
    report.clear();
  }
  if (auto st = whittle::cli::ApplyResourceLimits(limits); !st.ok()) return Fail(st.message());
  auto external_threshold = whittle::cli::ParseExternalDataThreshold(external_data);
  if (!external_threshold.ok()) return Fail(external_threshold.status().message());
  whittle::RemoveTempFilesOnSignal();
  o.use_labels = !no_labels;
  o.divergence_guard = !no_rollback;
  if (lr_flag == "auto") {
    o.lr_auto = true;
  } else {
    char* end = nullptr;
    const double lr = lr_flag.empty() ? 0 : std::strtod(lr_flag.c_str(), &end);
    if (lr_flag.empty() || end != lr_flag.c_str() + lr_flag.size() || !(lr > 0) || !std::isfinite(lr))
      return Fail("--lr " + lr_flag + ": expected a number > 0 or auto");
    o.lr = static_cast<float>(lr);
  }
  o.backend = *whittle::ParseBackend(device);  // cpu or cuda (checked above)
  o.precision = *whittle::ParsePrecision(precision);  // one of the four (checked above)
  if (o.precision != whittle::Precision::kFp32 && device != "cuda")
    return Fail("--precision " + precision + " needs --device cuda (the CPU computes in fp32)");
  o.scale_lr = !no_lr_scaling;
  o.cosine = !no_cosine;
  o.cache_teacher = !no_teacher_cache;
  o.bn_training = batchnorm == "train";
  o.refresh_weight_scales = !fixed_scales;
  for (const std::string& h : hints) {
    const size_t eq = h.find('=');
    const std::string sname = h.substr(0, eq), tname = eq == std::string::npos ? sname : h.substr(eq + 1);
    if (sname.empty() || tname.empty()) return Fail("--hint " + h + ": expected STUDENT_TENSOR[=TEACHER_TENSOR]");
    o.hints.emplace_back(sname, tname);
  }
  if (!hints.empty() && teacher_path.empty()) return Fail("--hint needs --teacher");
  o.optimizer = optimizer == "adamw" ? whittle::training::OptimizerKind::kAdamW : whittle::training::OptimizerKind::kSgd;
  if (resume && ckpt_dir.empty()) return Fail("--resume needs --checkpoint-dir");
  if (teacher_path.empty() && (no_labels || o.alpha > 0))
    return Fail("--teacher is needed for distillation (or give --alpha 0 to train on the labels alone)");
  if (Status st = whittle::cli::CheckOutputPath(out_path, "-o"); !st.ok()) return Fail(st.message());
  if (!report.empty()) {
    if (Status st = whittle::cli::CheckOutputPath(report, "--report"); !st.ok()) return Fail(st.message());
    if (report == out_path) return Fail("--report " + report + " is the same file as -o");
  }
  const auto t_start = std::chrono::steady_clock::now();

  whittle::RegisterAllOps();
  auto student = whittle::LoadModel(student_path);
  if (!student.ok()) return Fail(student.status().message());
  std::optional<whittle::Graph> teacher;
  if (!teacher_path.empty()) {
    auto t = whittle::LoadModel(teacher_path);
    if (!t.ok()) return Fail(t.status().message());
    teacher = std::move(*t);
  }
  auto train = whittle::cli::LoadDataFlag({"--train-data", train_spec, train_limit, !no_labels});
  if (!train.ok()) return Fail(train.status().message());
  whittle::Dataset eval;
  if (!eval_spec.empty()) {
    auto e = whittle::cli::LoadDataFlag({"--eval-data", eval_spec, eval_limit, true});
    if (!e.ok()) return Fail(e.status().message());
    eval = std::move(*e);
  }

  std::optional<whittle::training::Checkpoint> checkpoint;
  if (resume) {
    auto c = whittle::training::ReadCheckpoint(ckpt_dir);
    if (!c.ok()) return Fail(c.status().message());
    checkpoint = std::move(*c);
    if (checkpoint) student = std::move(checkpoint->model);
  }
  if (comm) {
    // A bad launch (ranks given different models, data or options) is refused before any step:
    // every rank compares its command line and what it loaded with rank 0's.
    std::string id;
    for (int i = 1; i < argc; ++i) id += std::string(argv[i]) + '\0';
    id += std::to_string(student->values().size()) + "/" + std::to_string(train->size());
    if (Status st = whittle::training::CheckSameLaunch(*comm, id); !st.ok()) return Fail(st.message());
  }
  auto trainer_or = Trainer::Create(*student, teacher ? &*teacher : nullptr, o);
  if (!trainer_or.ok()) return Fail(trainer_or.status().message());
  Trainer& t = **trainer_or;
  whittle::training::FinetuneRun run;
  run.epochs = o.epochs;
  if (checkpoint) {
    auto resumed = whittle::training::ResumeFinetune(std::move(*checkpoint), t, o.epochs);
    if (!resumed.ok()) return Fail(resumed.status().message());
    run = std::move(*resumed);
  }
  const int first_epoch = run.first_epoch;

  whittle::cli::Progress progress(!quiet);
  if (!quiet && comm)
    progress.Line("data-parallel: " + std::to_string(comm->size()) + " ranks, global batch " + std::to_string(o.batch) +
                  " (" + std::to_string(o.batch / comm->size()) + "-" + std::to_string((o.batch + comm->size() - 1) / comm->size()) +
                  " samples per rank)");
  if (!quiet && first_epoch > 0) progress.Line("resuming after epoch " + std::to_string(first_epoch));
  if (!quiet && o.backend != whittle::Backend::kCpu) {
    std::string list;
    for (const std::string& n : t.fallback_nodes()) list += (list.empty() ? "" : ", ") + n;
    progress.Line(std::to_string(t.fallback_nodes().size()) + " node(s) of the training graph run on the CPU" +
                  (list.empty() ? "" : ": " + list));
  }
  ProgressObserver observer(&progress, quiet);
  whittle::training::CheckpointWriter checkpoints(ckpt_dir, &observer);  // with --checkpoint-dir
  whittle::training::FinetuneObserver* obs = &observer;
  if (!ckpt_dir.empty() && rank == 0) obs = &checkpoints;
  FinetuneHistory h;
  auto out = whittle::training::RunFinetune(t, *train, eval_spec.empty() ? nullptr : &eval, std::move(run), &h, obs);
  if (!out.ok()) {
    const std::string why = out.status().message();
    const int code = Fail(comm && why.rfind("rank ", 0) != 0 ? "rank " + std::to_string(rank) + ": " + why : why);
    if (comm) comm->Abort(code);  // the other ranks may wait in a collective for this one
    return code;
  }
  if (rank != 0) return 0;  // every rank holds the same weights; rank 0 writes them

  whittle::FinetuneReport rep;
  if (!report.empty()) {
    rep.command_line = whittle::CommandLine(argc, argv);
    rep.student = student_path;
    rep.teacher = teacher_path;
    rep.output = out_path;
    rep.train_data = train_spec;
    rep.train_samples = train->size();
    rep.eval_data = eval_spec;
    rep.eval_samples = eval_spec.empty() ? 0 : eval.size();
    rep.options = o;
    rep.options.lr = t.lr();  // lr=auto's pick (the largest group's)
    rep.history = h;
    rep.output_accuracy = h.result_accuracy();
    if (teacher && !eval_spec.empty()) {
      whittle::SessionOptions so;
      so.num_threads = o.threads;
      so.backend = o.backend;
      so.precision = o.precision;
      auto session = whittle::Session::FromGraph(*teacher, so);
      if (!session.ok()) return Fail(session.status().WithContext("evaluating the teacher").message());
      auto r = whittle::EvaluateTop1(**session, eval);
      if (!r.ok()) return Fail(r.status().WithContext("evaluating the teacher").message());
      rep.teacher_accuracy = r->accuracy;
    }
  }
  // The model is staged first so that the report can give its size; both are committed only when
  // everything succeeded.
  whittle::SaveOptions save;
  save.external_data_threshold = *external_threshold;
  if (save.external_data_threshold < 0 && whittle::HasExternalData(student_path))
    save.external_data_threshold = whittle::kAutoExternalDataThreshold;  // external data in, external data out
  auto staged = whittle::StageModel(*out, out_path, save);
  if (!staged.ok()) return Fail(staged.status().message());
  rep.output_params = whittle::ComputeCost(*out).params;
  rep.output_file_bytes = (*staged)->total_bytes();  // with its external data
  if (!report.empty()) {
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
    if (Status s = whittle::WriteFileAtomically(report, whittle::FinetuneHtml(rep)); !s.ok()) return Fail(s.message());
  }
  if (Status s = (*staged)->Commit(); !s.ok()) return Fail(s.message());
  if (json) {
    nlohmann::json j{{"student", student_path}, {"teacher", teacher_path}, {"output", out_path},
                     {"epochs", whittle::EpochsJson(h)}, {"params", t.params().size()},
                     {"device", device},     {"precision", precision}, {"fallback_nodes", t.fallback_nodes()}};
    j["accuracy_before"] = h.before >= 0 ? nlohmann::json(h.before) : nlohmann::json(nullptr);
    j["best_eval_accuracy"] = h.best >= 0 ? nlohmann::json(h.best) : nlohmann::json(nullptr);
    j["best_epoch"] = h.best_epoch >= 0 ? nlohmann::json(h.best_epoch + 1) : nlohmann::json(nullptr);
    j["kept_student"] = h.kept_student;
    AddGuardJson(h, o.lr_auto, &j);
    j["teacher_accuracy"] = rep.teacher_accuracy >= 0 ? nlohmann::json(rep.teacher_accuracy) : nlohmann::json(nullptr);
    j["output_params"] = rep.output_params;
    j["output_file_bytes"] = rep.output_file_bytes;
    if (device == "cuda") j["device_peak_bytes"] = whittle::DeviceMemoryInUse(whittle::DeviceType::kCuda).peak_bytes;
    if (!report.empty()) j["report"] = report;
    std::printf("%s\n", j.dump().c_str());
  } else if (!quiet) {
    std::string what;
    if (h.kept_student) {
      // Not silent: the run did not help, and what was written is the student as it came.
      progress.Line("no epoch beat the student before fine-tuning (eval accuracy " + Fmt("%.4f", h.before) +
                    "; best epoch " + std::to_string(h.best_epoch + 1) + ": " + Fmt("%.4f", h.best) +
                    "): the student is written unchanged (a lower --lr, or --lr auto, may help)");
      what = " (the student unchanged, eval accuracy " + Fmt("%.4f", h.before) + ")";
    } else if (h.best >= 0) {
      what = " (epoch " + std::to_string(h.best_epoch + 1) + ", eval accuracy " + Fmt("%.4f", h.best);
      if (h.before >= 0) what += "; before fine-tuning " + Fmt("%.4f", h.before);
      what += ")";
    }
    progress.Line("wrote " + out_path + what + (report.empty() ? "" : " and " + report));
    if (device == "cuda")  // what the run held on the GPU at its highest, through Whittle's buffers
      progress.Line("device memory: " +
                    Fmt("%.2f", static_cast<double>(whittle::DeviceMemoryInUse(whittle::DeviceType::kCuda).peak_bytes) /
                                    (1024.0 * 1024.0)) +
                    " MiB at the peak (parameters, gradients, optimizer state, activations; not the CUDA context or "
                    "cuBLAS's own)");
  }
  return 0;
}

}  // namespace
