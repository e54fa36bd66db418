// finetune-model: recovers a compressed model's accuracy by distillation from its original, from
// the two ONNX files alone (runtime/training). The output keeps the student's graph — factorized
// layers stay two layers, pruned layers stay narrow — with retrained weights. The work is
// passes/finetune_model (shared with the Python module); this file parses flags, shows progress
// and prints the result.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/atomic_file.h"
#include "lib/ir/device.h"
#include "lib/ir/format.h"
#include "passes/finetune_model.h"
#include "passes/report/finetune_report.h"
#include "runtime/training/communicator.h"
#include "runtime/training/finetune.h"
#include "runtime/training/trainer.h"
#include "tools/common/cli.h"
#include "tools/common/progress.h"

namespace {

using whittle::Fmt;
using whittle::Status;
using whittle::training::FinetuneHistory;

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
  whittle::FinetuneFlags flags;
  flags.lr = lr_flag;
  flags.optimizer = optimizer;
  flags.device = device;
  flags.precision = precision;
  flags.batchnorm = batchnorm;
  flags.hints = hints;
  flags.no_labels = no_labels;
  flags.no_rollback = no_rollback;
  flags.no_lr_scaling = no_lr_scaling;
  flags.no_cosine = no_cosine;
  flags.no_teacher_cache = no_teacher_cache;
  flags.fixed_scales = fixed_scales;
  flags.has_teacher = !teacher_path.empty();
  flags.resume = resume;
  flags.checkpoint_dir = ckpt_dir;
  if (Status st = whittle::ApplyFinetuneFlags(flags, &o); !st.ok()) return Fail(st.message());
  if (Status st = whittle::cli::CheckOutputPath(out_path, "-o"); !st.ok()) return Fail(st.message());
  if (!report.empty()) {
    if (Status st = whittle::cli::CheckOutputPath(report, "--report"); !st.ok()) return Fail(st.message());
    if (report == out_path) return Fail("--report " + report + " is the same file as -o");
  }
  whittle::FinetuneModelOptions fo;
  fo.start = std::chrono::steady_clock::now();
  fo.student_path = student_path;
  fo.teacher_path = teacher_path;
  fo.output_path = out_path;
  fo.train = o;
  fo.train_spec = train_spec;
  fo.eval_spec = eval_spec;
  fo.checkpoint_dir = ckpt_dir;
  fo.resume = resume;
  fo.report_html_path = report;
  fo.external_data_threshold = *external_threshold;

  auto models = whittle::LoadFinetuneModels(student_path, teacher_path);
  if (!models.ok()) return Fail(models.status().message());
  auto train = whittle::cli::LoadDataFlag({"--train-data", train_spec, train_limit, !no_labels});
  if (!train.ok()) return Fail(train.status().message());
  whittle::Dataset eval;
  if (!eval_spec.empty()) {
    auto e = whittle::cli::LoadDataFlag({"--eval-data", eval_spec, eval_limit, true});
    if (!e.ok()) return Fail(e.status().message());
    eval = std::move(*e);
  }
  const whittle::Dataset* eval_data = eval_spec.empty() ? nullptr : &eval;
  if (comm)
    for (int i = 1; i < argc; ++i) fo.launch_id += std::string(argv[i]) + '\0';
  if (!report.empty()) fo.command_line = whittle::CommandLine(argc, argv);

  whittle::cli::Progress progress(!quiet);
  ProgressObserver observer(&progress, quiet);
  auto job = whittle::PrepareFinetune(std::move(*models), fo, *train, &observer);
  if (!job.ok()) return Fail(job.status().message());
  auto out = whittle::RunFinetuneJob(**job, fo, *train, eval_data, &observer);
  if (!out.ok()) {
    const std::string why = out.status().message();
    const int code = Fail(comm && why.rfind("rank ", 0) != 0 ? "rank " + std::to_string(rank) + ": " + why : why);
    if (comm) comm->Abort(code);  // the other ranks may wait in a collective for this one
    return code;
  }
  if (rank != 0) return 0;  // every rank holds the same weights; rank 0 writes them

  auto written = whittle::WriteFinetuneOutput(**job, *out, fo, *train, eval_data);
  if (!written.ok()) return Fail(written.status().message());
  const FinetuneHistory& h = written->history;
  if (json) {
    std::printf("%s\n", whittle::FinetuneModelJson(fo, *written).dump().c_str());
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
