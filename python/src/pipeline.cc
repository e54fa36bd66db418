// whittle._whittle.compress and .finetune: compress-model's and finetune-model's work through the
// code the CLIs call (passes/pipeline_args.h + RunPipeline, passes/finetune_model.h), with the
// GIL released while it runs. Each returns the report the CLI writes as JSON, as a string (the
// Python wrapper parses it). Arguments arrive normalized by whittle/__init__.py: passes as
// (name, spec) pairs, data as None, ("spec", SPEC) or ("arrays", inputs, labels or None, name),
// options as a dict of every key.
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/data/dataset.h"
#include "passes/finetune_model.h"
#include "passes/pipeline.h"
#include "passes/pipeline_args.h"
#include "passes/report/finetune_report.h"
#include "passes/report/report.h"
#include "python/src/bindings.h"
#include "runtime/training/finetune.h"

namespace whittle::python {

namespace {

template <class T>
T Opt(const py::dict& opts, const char* key, T def) {
  if (!opts.contains(key) || opts[key].is_none()) return def;
  return opts[key].cast<T>();
}

// A data argument, its arrays copied while the GIL is held; loaded later without it.
struct DataArg {
  bool given = false, arrays = false;
  std::string spec;  // a spec, or the arrays' name for messages and the report
  Tensor inputs, labels;
};

DataArg ParseDataArg(const std::string& what, const py::object& arg) {
  DataArg d;
  if (arg.is_none()) return d;
  const py::tuple t = arg.cast<py::tuple>();
  d.given = true;
  if (t[0].cast<std::string>() == "spec") {
    d.spec = t[1].cast<std::string>();
    return d;
  }
  d.arrays = true;
  d.inputs = Unwrap(TensorFromArray(what, t[1]));
  if (!t[2].is_none()) d.labels = Unwrap(TensorFromArray(what + " labels", t[2]));
  d.spec = t[3].cast<std::string>();
  return d;
}

// As the CLIs' data flags (tools/common/cli.h LoadDataFlag): an empty Dataset when not given;
// errors name the argument and say why.
StatusOr<Dataset> LoadData(const std::string& what, const DataArg& d, int64_t limit, bool need_labels) {
  if (!d.given) return Dataset{};
  return CheckDataArgument(d.arrays ? MakeDataset(d.inputs, d.labels, d.spec, limit) : LoadDataset(d.spec, limit), what,
                           d.spec, need_labels);
}

// verbose=True: the permanent lines the CLIs print (on stderr), without the progress bars.
class PipelineLines : public PipelineObserver {
 public:
  void Line(const std::string& text) override { std::cerr << text << "\n" << std::flush; }
};
class FinetuneLines : public training::FinetuneObserver {
 public:
  void Line(const std::string& text) override { std::cerr << text << "\n" << std::flush; }
};

StatusOr<std::map<std::string, Dims>> InputShapes(const py::dict& opts) {
  std::map<std::string, Dims> shapes;
  if (!opts.contains("input_shapes") || opts["input_shapes"].is_none()) return shapes;
  for (auto [name, dims] : opts["input_shapes"].cast<py::dict>()) {
    const std::string n = name.cast<std::string>();
    for (int64_t d : dims.cast<std::vector<int64_t>>())
      if (d <= 0) return InvalidArgument("input_shapes['" + n + "']: dims must be positive");
    shapes[n] = dims.cast<std::vector<int64_t>>();
  }
  return shapes;
}

// The steps, or the search that replaces them (compress-model's order of checks).
void PlanPasses(const std::vector<std::pair<std::string, std::string>>& passes, const py::dict& opts,
                PipelineOptions* po) {
  std::vector<PassArg> args;
  for (const auto& [pass, spec] : passes) args.push_back({pass, spec});
  std::vector<PipelineStep> steps = Unwrap(ParsePipelineSteps(args));
  const std::string target = Opt<std::string>(opts, "target", "");
  if (!target.empty()) {
    SearchArgs sa;
    sa.target = target;
    sa.max_drop = Opt<double>(opts, "max_drop", -1);
    sa.metric = Opt<std::string>(opts, "metric", "");
    sa.passes = Opt<std::string>(opts, "search_passes", "");
    sa.sensitivity_cache = Opt<std::string>(opts, "sensitivity_cache", "");
    sa.max_evals = Opt<int>(opts, "search_evals", 8);
    sa.latency_batch = Opt<int64_t>(opts, "latency_batch", 1);
    sa.stop_after = Opt<int>(opts, "stop_after", -1);
    po->search = Unwrap(MakeSearchOptions(sa, steps));
    steps.clear();
  }
  if (steps.empty() && !po->search)
    Throw(InvalidArgument("no pass given: passes=[...] needs at least one of svd, prune, int8, int4, cluster, binarize, "
                          "circulant (or target= with max_drop=)"));
  Check(CheckPipelineSteps(steps));
  po->steps = std::move(steps);
}

std::string Compress(const std::string& model, const std::string& output,
                     const std::vector<std::pair<std::string, std::string>>& passes, const py::object& calibration,
                     const py::object& eval, const py::object& train, const py::dict& opts) {
  PipelineOptions po;
  PlanPasses(passes, opts, &po);
  const int threads = Opt<int>(opts, "threads", 1);
  training::TrainOptions train_options;
  train_options.threads = threads;
  const bool finetune = opts.contains("finetune") && !opts["finetune"].is_none();
  const std::string finetune_spec = Opt<std::string>(opts, "finetune", "");
  const DataArg train_arg = ParseDataArg("train", train);
  const int64_t train_limit = Opt<int64_t>(opts, "train_limit", -1);
  if (finetune) {
    if (!train_arg.given) Throw(InvalidArgument("finetune= needs train= (the data to fine-tune on)"));
    train_options = Unwrap(training::ParseFinetuneSpec(finetune_spec, train_options));
  } else if (train_arg.given || train_limit > 0) {
    Throw(InvalidArgument(std::string(train_arg.given ? "train=" : "train_limit=") + " is only used with finetune="));
  }
  const DataArg eval_arg = ParseDataArg("eval", eval), calib_arg = ParseDataArg("calibration", calibration);
  po.model_path = model;
  po.output_path = output;
  po.input_shapes = Unwrap(InputShapes(opts));
  po.threads = threads;
  po.seed = Opt<uint64_t>(opts, "seed", 1234);
  po.stop_after = Opt<int>(opts, "stop_after", -1);
  po.bench = Opt<bool>(opts, "bench", true);
  po.portable = Opt<bool>(opts, "portable", false) || Opt<bool>(opts, "portable_dense", false);
  po.portable_dense = Opt<bool>(opts, "portable_dense", false);
  po.external_data_threshold = Opt<int64_t>(opts, "external_data_threshold", -1);
  po.bench_batch = Opt<int64_t>(opts, "bench_batch", 64);
  po.bench_seconds = Opt<double>(opts, "bench_time", 1.0);
  po.bench_iterations = Opt<int>(opts, "bench_iterations", 20);
  po.bench_rounds = Opt<int>(opts, "bench_rounds", 2);
  po.report_json_path = Opt<std::string>(opts, "report_json", "");
  po.report_html_path = Opt<std::string>(opts, "report", "");
  const int64_t eval_limit = Opt<int64_t>(opts, "eval_limit", -1);
  const int64_t calib_samples = Opt<int64_t>(opts, "calibration_samples", 500);
  PipelineLines lines;
  PipelineObserver* observer = Opt<bool>(opts, "verbose", false) ? &lines : nullptr;
  return Unwrap(WithoutGil([&]() -> StatusOr<std::string> {
    // Without labels, accuracy is top-1 agreement with the original model (RunPipeline).
    auto eval_data = LoadData("eval", eval_arg, eval_limit, /*need_labels=*/false);
    if (!eval_data.ok()) return eval_data.status();
    auto calib_data = LoadData("calibration", calib_arg, calib_samples, false);
    if (!calib_data.ok()) return calib_data.status();
    auto train_data = LoadData("train", train_arg, train_limit, train_options.use_labels);
    if (!train_data.ok()) return train_data.status();
    po.eval_data = eval_arg.given ? &*eval_data : nullptr;
    po.eval_spec = eval_arg.spec;
    po.calibration = calib_arg.given ? &*calib_data : nullptr;
    po.calibration_spec = calib_arg.spec;
    if (finetune) po.finetune = PipelineFinetune{train_options, &*train_data, finetune_spec, train_arg.spec};
    auto result = RunPipeline(po, observer);
    if (!result.ok()) return result.status();
    return ToJson(result->report, result->finetune ? &*result->finetune : nullptr).dump();
  }));
}

training::TrainOptions TrainOptionsOf(const py::dict& opts) {
  training::TrainOptions o;
  o.epochs = Opt<int>(opts, "epochs", o.epochs);
  o.batch = Opt<int64_t>(opts, "batch", o.batch);
  o.nesterov = Opt<bool>(opts, "nesterov", o.nesterov);
  o.weight_decay = Opt<float>(opts, "weight_decay", o.weight_decay);
  o.temperature = Opt<float>(opts, "temperature", o.temperature);
  o.alpha = Opt<float>(opts, "alpha", o.alpha);
  o.label_smoothing = Opt<float>(opts, "label_smoothing", o.label_smoothing);
  o.max_rollbacks = Opt<int>(opts, "max_rollbacks", o.max_rollbacks);
  o.clip_norm = Opt<float>(opts, "clip", o.clip_norm);
  o.seed = Opt<uint64_t>(opts, "seed", o.seed);
  o.threads = Opt<int>(opts, "threads", o.threads);
  o.crop_padding = Opt<int>(opts, "crop_padding", o.crop_padding);
  o.hflip = Opt<bool>(opts, "hflip", o.hflip);
  o.hint_weight = Opt<float>(opts, "hint_weight", o.hint_weight);
  return o;
}

FinetuneFlags FinetuneFlagsOf(const py::dict& opts, bool has_teacher) {
  FinetuneFlags f;
  f.lr = Opt<std::string>(opts, "lr", f.lr);
  f.optimizer = Opt<std::string>(opts, "optimizer", f.optimizer);
  f.device = Opt<std::string>(opts, "device", f.device);
  f.precision = Opt<std::string>(opts, "precision", f.precision);
  f.batchnorm = Opt<std::string>(opts, "batchnorm", f.batchnorm);
  f.hints = Opt<std::vector<std::string>>(opts, "hints", {});
  f.no_labels = Opt<bool>(opts, "no_labels", false);
  f.no_rollback = !Opt<bool>(opts, "rollback", true);
  f.no_lr_scaling = !Opt<bool>(opts, "lr_scaling", true);
  f.no_cosine = !Opt<bool>(opts, "cosine", true);
  f.no_teacher_cache = !Opt<bool>(opts, "teacher_cache", true);
  f.fixed_scales = Opt<bool>(opts, "fixed_scales", false);
  f.has_teacher = has_teacher;
  f.resume = Opt<bool>(opts, "resume", false);
  f.checkpoint_dir = Opt<std::string>(opts, "checkpoint_dir", "");
  return f;
}

std::string Finetune(const std::string& student, const std::string& output, const std::string& teacher,
                     const py::object& train, const py::object& eval, const py::dict& opts) {
  FinetuneModelOptions fo;
  fo.student_path = student;
  fo.teacher_path = teacher;
  fo.output_path = output;
  fo.train = TrainOptionsOf(opts);
  const FinetuneFlags flags = FinetuneFlagsOf(opts, !teacher.empty());
  Check(ApplyFinetuneFlags(flags, &fo.train));
  fo.checkpoint_dir = flags.checkpoint_dir;
  fo.resume = flags.resume;
  fo.report_html_path = Opt<std::string>(opts, "report", "");
  fo.command_line = Opt<std::string>(opts, "command_line", "");
  fo.external_data_threshold = Opt<int64_t>(opts, "external_data_threshold", -1);
  const DataArg train_arg = ParseDataArg("train", train), eval_arg = ParseDataArg("eval", eval);
  if (!train_arg.given) Throw(InvalidArgument("train= is required (the data to fine-tune on)"));
  fo.train_spec = train_arg.spec;
  fo.eval_spec = eval_arg.spec;
  const int64_t train_limit = Opt<int64_t>(opts, "train_limit", -1), eval_limit = Opt<int64_t>(opts, "eval_limit", -1);
  FinetuneLines lines;
  training::FinetuneObserver* observer = Opt<bool>(opts, "verbose", false) ? &lines : nullptr;
  return Unwrap(WithoutGil([&]() -> StatusOr<std::string> {
    auto models = LoadFinetuneModels(student, teacher);
    if (!models.ok()) return models.status();
    auto train_data = LoadData("train", train_arg, train_limit, !flags.no_labels);
    if (!train_data.ok()) return train_data.status();
    auto eval_data = LoadData("eval", eval_arg, eval_limit, true);
    if (!eval_data.ok()) return eval_data.status();
    const Dataset* eval_ptr = eval_arg.given ? &*eval_data : nullptr;
    auto job = PrepareFinetune(std::move(*models), fo, *train_data, observer);
    if (!job.ok()) return job.status();
    auto out = RunFinetuneJob(**job, fo, *train_data, eval_ptr, observer);
    if (!out.ok()) return out.status();
    auto written = WriteFinetuneOutput(**job, *out, fo, *train_data, eval_ptr);
    if (!written.ok()) return written.status();
    return FinetuneModelJson(fo, *written).dump();
  }));
}

}  // namespace

void BindPipeline(py::module_& m) {
  m.def("compress", &Compress, py::arg("model"), py::arg("output"), py::arg("passes"), py::arg("calibration"),
        py::arg("eval"), py::arg("train"), py::arg("options"));
  m.def("finetune", &Finetune, py::arg("student"), py::arg("output"), py::arg("teacher"), py::arg("train"),
        py::arg("eval"), py::arg("options"));
}

}  // namespace whittle::python
