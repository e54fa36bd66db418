#include "passes/finetune_model.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "lib/ir/atomic_file.h"
#include "lib/ir/device.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "runtime/backend_name.h"
#include "runtime/evaluate.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/communicator.h"

namespace whittle {

using training::FinetuneHistory;

namespace {

// The CLI checks these names with its validators; other callers (Python) get the same words.
Status ApplyChoices(const FinetuneFlags& f, training::TrainOptions* o) {
  auto backend = ParseBackend(f.device);
  if (!backend.ok()) return backend.status().WithContext("--device");
  if (*backend == Backend::kReference) return InvalidArgument("--device " + f.device + ": fine-tuning runs on cpu or cuda");
  o->backend = *backend;
  auto precision = ParsePrecision(f.precision);
  if (!precision.ok()) return precision.status().WithContext("--precision");
  o->precision = *precision;
  if (f.optimizer != "sgd" && f.optimizer != "adamw")
    return InvalidArgument("--optimizer " + f.optimizer + ": expected sgd or adamw");
  if (f.batchnorm != "train" && f.batchnorm != "frozen")
    return InvalidArgument("--batchnorm " + f.batchnorm + ": expected train or frozen");
  return Status::Ok();
}

// The divergence guard's and lr=auto's doing (issue 45) in --json: every rollback, whether
// training gave up, the peak rate at the end, and the range test's rate per group of params.
void AddGuardJson(const FinetuneHistory& h, bool lr_auto, nlohmann::json* j) {
  nlohmann::json rollbacks = nlohmann::json::array();
  for (const training::Rollback& r : h.rollbacks) {
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
  for (const training::GroupRate& g : h.lr_auto)
    groups[g.kind] = {{"lr", g.lr}, {"params", g.params}, {"lr_at_min", g.lr_at_min},
                      {"start_loss", g.start_loss}, {"min_loss", g.min_loss}, {"steps", g.steps}};
  (*j)["lr_auto"] = groups;
}

}  // namespace

Status ApplyFinetuneFlags(const FinetuneFlags& f, training::TrainOptions* o) {
  o->use_labels = !f.no_labels;
  o->divergence_guard = !f.no_rollback;
  if (f.lr == "auto") {
    o->lr_auto = true;
  } else {
    char* end = nullptr;
    const double lr = f.lr.empty() ? 0 : std::strtod(f.lr.c_str(), &end);
    if (f.lr.empty() || end != f.lr.c_str() + f.lr.size() || !(lr > 0) || !std::isfinite(lr))
      return InvalidArgument("--lr " + f.lr + ": expected a number > 0 or auto");
    o->lr = static_cast<float>(lr);
  }
  if (Status s = ApplyChoices(f, o); !s.ok()) return s;
  if (o->precision != Precision::kFp32 && o->backend != Backend::kCuda)
    return InvalidArgument("--precision " + f.precision + " needs --device cuda (the CPU computes in fp32)");
  o->scale_lr = !f.no_lr_scaling;
  o->cosine = !f.no_cosine;
  o->cache_teacher = !f.no_teacher_cache;
  o->bn_training = f.batchnorm == "train";
  o->refresh_weight_scales = !f.fixed_scales;
  for (const std::string& h : f.hints) {
    const size_t eq = h.find('=');
    const std::string sname = h.substr(0, eq), tname = eq == std::string::npos ? sname : h.substr(eq + 1);
    if (sname.empty() || tname.empty()) return InvalidArgument("--hint " + h + ": expected STUDENT_TENSOR[=TEACHER_TENSOR]");
    o->hints.emplace_back(sname, tname);
  }
  if (!f.hints.empty() && !f.has_teacher) return InvalidArgument("--hint needs --teacher");
  o->optimizer = f.optimizer == "adamw" ? training::OptimizerKind::kAdamW : training::OptimizerKind::kSgd;
  if (f.resume && f.checkpoint_dir.empty()) return InvalidArgument("--resume needs --checkpoint-dir");
  if (!f.has_teacher && (f.no_labels || o->alpha > 0))
    return InvalidArgument("--teacher is needed for distillation (or give --alpha 0 to train on the labels alone)");
  return Status::Ok();
}

StatusOr<FinetuneModels> LoadFinetuneModels(const std::string& student_path, const std::string& teacher_path) {
  RegisterAllOps();
  auto student = LoadModel(student_path);
  if (!student.ok()) return student.status();
  FinetuneModels m{std::move(*student), std::nullopt};
  if (!teacher_path.empty()) {
    auto t = LoadModel(teacher_path);
    if (!t.ok()) return t.status();
    m.teacher = std::move(*t);
  }
  return m;
}

StatusOr<std::unique_ptr<FinetuneJob>> PrepareFinetune(FinetuneModels models, const FinetuneModelOptions& o,
                                                       const Dataset& train, training::FinetuneObserver* observer) {
  auto job = std::make_unique<FinetuneJob>();
  job->models = std::move(models);
  std::optional<training::Checkpoint> checkpoint;
  if (o.resume) {
    auto c = training::ReadCheckpoint(o.checkpoint_dir);
    if (!c.ok()) return c.status();
    checkpoint = std::move(*c);
    if (checkpoint) job->models.student = std::move(checkpoint->model);
  }
  const training::Communicator* comm = o.train.comm;
  if (comm) {
    // A bad launch (ranks given different models, data or options) is refused before any step:
    // every rank compares its command line and what it loaded with rank 0's.
    const std::string id = o.launch_id + std::to_string(job->models.student.values().size()) + "/" +
                           std::to_string(train.size());
    if (Status st = training::CheckSameLaunch(*comm, id); !st.ok()) return st;
  }
  const Graph* teacher = job->models.teacher ? &*job->models.teacher : nullptr;
  auto trainer = training::Trainer::Create(job->models.student, teacher, o.train);
  if (!trainer.ok()) return trainer.status();
  job->trainer = std::move(*trainer);
  job->run.epochs = o.train.epochs;
  if (checkpoint) {
    auto resumed = training::ResumeFinetune(std::move(*checkpoint), *job->trainer, o.train.epochs);
    if (!resumed.ok()) return resumed.status();
    job->run = std::move(*resumed);
  }
  if (!observer) return job;
  const int64_t batch = o.train.batch;
  if (comm)
    observer->Line("data-parallel: " + std::to_string(comm->size()) + " ranks, global batch " + std::to_string(batch) +
                   " (" + std::to_string(batch / comm->size()) + "-" +
                   std::to_string((batch + comm->size() - 1) / comm->size()) + " samples per rank)");
  if (job->run.first_epoch > 0) observer->Line("resuming after epoch " + std::to_string(job->run.first_epoch));
  if (o.train.backend != Backend::kCpu) {
    std::string list;
    for (const std::string& n : job->trainer->fallback_nodes()) list += (list.empty() ? "" : ", ") + n;
    observer->Line(std::to_string(job->trainer->fallback_nodes().size()) + " node(s) of the training graph run on the CPU" +
                   (list.empty() ? "" : ": " + list));
  }
  return job;
}

StatusOr<Graph> RunFinetuneJob(FinetuneJob& job, const FinetuneModelOptions& o, const Dataset& train,
                               const Dataset* eval, training::FinetuneObserver* observer) {
  training::CheckpointWriter checkpoints(o.checkpoint_dir, observer);  // with a checkpoint dir
  training::FinetuneObserver* obs = observer;
  const int rank = o.train.comm ? o.train.comm->rank() : 0;
  if (!o.checkpoint_dir.empty() && rank == 0) obs = &checkpoints;
  return training::RunFinetune(*job.trainer, train, eval, std::move(job.run), &job.history, obs);
}

StatusOr<FinetuneModelResult> WriteFinetuneOutput(const FinetuneJob& job, const Graph& model,
                                                  const FinetuneModelOptions& o, const Dataset& train,
                                                  const Dataset* eval) {
  const training::Trainer& t = *job.trainer;
  const FinetuneHistory& h = job.history;
  FinetuneModelResult r;
  r.history = h;
  r.params = t.params().size();
  r.fallback_nodes = t.fallback_nodes();
  FinetuneReport& rep = r.report;
  if (!o.report_html_path.empty()) {
    rep.command_line = o.command_line;
    rep.student = o.student_path;
    rep.teacher = o.teacher_path;
    rep.output = o.output_path;
    rep.train_data = o.train_spec;
    rep.train_samples = train.size();
    rep.eval_data = o.eval_spec;
    rep.eval_samples = eval ? eval->size() : 0;
    rep.options = o.train;
    rep.options.lr = t.lr();  // lr=auto's pick (the largest group's)
    rep.history = h;
    rep.output_accuracy = h.result_accuracy();
    if (job.models.teacher && eval) {
      SessionOptions so;
      so.num_threads = o.train.threads;
      so.backend = o.train.backend;
      so.precision = o.train.precision;
      auto session = Session::FromGraph(*job.models.teacher, so);
      if (!session.ok()) return session.status().WithContext("evaluating the teacher");
      auto acc = EvaluateTop1(**session, *eval);
      if (!acc.ok()) return acc.status().WithContext("evaluating the teacher");
      rep.teacher_accuracy = acc->accuracy;
    }
  }
  // The model is staged first so that the report can give its size; both are committed only when
  // everything succeeded.
  SaveOptions save;
  save.external_data_threshold = o.external_data_threshold;
  if (save.external_data_threshold < 0 && HasExternalData(o.student_path))
    save.external_data_threshold = kAutoExternalDataThreshold;  // external data in, external data out
  auto staged = StageModel(model, o.output_path, save);
  if (!staged.ok()) return staged.status();
  rep.output_params = ComputeCost(model).params;
  rep.output_file_bytes = (*staged)->total_bytes();  // with its external data
  if (!o.report_html_path.empty()) {
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - o.start).count();
    if (Status s = WriteFileAtomically(o.report_html_path, FinetuneHtml(rep)); !s.ok()) return s;
  }
  if (Status s = (*staged)->Commit(); !s.ok()) return s;
  return r;
}

nlohmann::json FinetuneModelJson(const FinetuneModelOptions& o, const FinetuneModelResult& r) {
  const FinetuneHistory& h = r.history;
  const bool cuda = o.train.backend == Backend::kCuda;
  nlohmann::json j{{"student", o.student_path}, {"teacher", o.teacher_path}, {"output", o.output_path},
                   {"epochs", EpochsJson(h)}, {"params", r.params},
                   {"device", BackendName(o.train.backend)}, {"precision", PrecisionName(o.train.precision)},
                   {"fallback_nodes", r.fallback_nodes}};
  j["accuracy_before"] = h.before >= 0 ? nlohmann::json(h.before) : nlohmann::json(nullptr);
  j["best_eval_accuracy"] = h.best >= 0 ? nlohmann::json(h.best) : nlohmann::json(nullptr);
  j["best_epoch"] = h.best_epoch >= 0 ? nlohmann::json(h.best_epoch + 1) : nlohmann::json(nullptr);
  j["kept_student"] = h.kept_student;
  AddGuardJson(h, o.train.lr_auto, &j);
  j["teacher_accuracy"] = r.report.teacher_accuracy >= 0 ? nlohmann::json(r.report.teacher_accuracy) : nlohmann::json(nullptr);
  j["output_params"] = r.report.output_params;
  j["output_file_bytes"] = r.report.output_file_bytes;
  if (cuda) j["device_peak_bytes"] = DeviceMemoryInUse(DeviceType::kCuda).peak_bytes;
  if (!o.report_html_path.empty()) j["report"] = o.report_html_path;
  return j;
}

}  // namespace whittle
