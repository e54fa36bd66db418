#include "passes/pipeline.h"

#include <chrono>
#include <cstdio>
#include <memory>
#include <utility>

#include "lib/data/file_util.h"
#include "lib/ir/format.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/lowering.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "passes/search/sensitivity.h"
#include "runtime/evaluate.h"
#include "runtime/training/finetune.h"
#include "whittle/session.h"

namespace whittle {
namespace {

PipelineObserver& Quiet() {
  static PipelineObserver none;
  return none;
}

// Forwards to a pass and tells the observer which pass is running and how long it took.
class ObservedPass : public Pass {
 public:
  ObservedPass(std::unique_ptr<Pass> inner, std::string* current, PipelineObserver* obs)
      : inner_(std::move(inner)), current_(current), obs_(obs) {}
  std::string name() const override { return inner_->name(); }
  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override {
    *current_ = inner_->name();
    obs_->Progress("[" + *current_ + "] running", 0, 0);
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<PassReport> r = inner_->Run(g, ctx);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.ok()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f", s);
      obs_->Line("[" + *current_ + "] done in " + buf + " s");
    } else {
      obs_->Clear();
    }
    return r;
  }

 private:
  std::unique_ptr<Pass> inner_;
  std::string* current_;
  PipelineObserver* obs_;
};

StatusOr<double> Accuracy(const Graph& g, const Dataset& data, int threads, const std::string& what,
                          PipelineObserver& obs) {
  SessionOptions so;
  so.num_threads = threads;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(g, so));
  auto r = EvaluateTop1(*session, data, 256,
                        [&](int64_t done, int64_t total) { obs.Progress("[eval] " + what, done, total); });
  obs.Clear();
  if (!r.ok()) return r.status().WithContext("evaluating the " + what);
  return r->accuracy;
}

struct BenchFigures {
  double p50_ms = -1, throughput = -1;
};

// Alternates the two models for `rounds` rounds and keeps each one's best median, so that a
// burst of load on a shared machine does not decide the comparison.
Status BenchBoth(const Graph& before, const Graph& after, const BenchOptions& opts, const Dataset* samples,
                 int threads, int rounds, BenchFigures* fb, BenchFigures* fa, PipelineObserver& obs) {
  SessionOptions so;
  so.num_threads = threads;
  WH_ASSIGN_OR_RETURN(auto sb, Session::FromGraph(before, so));
  WH_ASSIGN_OR_RETURN(auto sa, Session::FromGraph(after, so));
  for (int r = 0; r < rounds; ++r) {
    for (int which = 0; which < 2; ++which) {
      const std::string model = which == 0 ? "original" : "compressed";
      obs.Progress("[bench] batch " + std::to_string(opts.batches[0]) + ", " + model + " model, round", r + 1, rounds);
      auto res = Benchmark(which == 0 ? *sb : *sa, opts, samples);
      if (!res.ok()) return res.status().WithContext("benchmarking the " + model + " model");
      BenchFigures& f = which == 0 ? *fb : *fa;
      const BenchResult& b = res->at(0);
      if (f.p50_ms < 0 || b.p50_ms < f.p50_ms) {
        f.p50_ms = b.p50_ms;
        f.throughput = b.throughput;
      }
    }
  }
  obs.Clear();
  return Status::Ok();
}

// Pins free non-batch dims of the graph inputs (from options.input_shapes, else from a data
// sample) so that shapes, MACs and the passes' decisions see real sizes; returns what it did.
StatusOr<std::vector<std::string>> PinInputDims(Graph& g, const PipelineOptions& o) {
  std::vector<std::string> notes;
  for (const auto& [name, dims] : o.input_shapes) {
    const int id = g.FindValue(name);
    bool is_input = false;
    for (int in : g.inputs()) is_input |= in == id;
    if (!is_input) return InvalidArgument("--input-shape: the model has no input named '" + name + "'");
  }
  const Dataset* sample = o.eval_data && o.eval_data->size() ? o.eval_data
                          : o.calibration && o.calibration->size() ? o.calibration
                                                                   : nullptr;
  bool changed = false;
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    Value& v = g.value(g.inputs()[k]);
    if (!v.shape) continue;
    std::optional<Dims> want;
    std::string from;
    if (auto it = o.input_shapes.find(v.name); it != o.input_shapes.end()) {
      want = it->second;
      from = "--input-shape";
    } else if (const Tensor* t = sample ? sample->ForInput(v.name, k) : nullptr) {
      // Calibration and evaluation data of other sizes (a decoder's sequence lengths) both have
      // to run: the free dims then stay free.
      const Tensor* c = o.calibration && o.calibration != sample ? o.calibration->ForInput(v.name, k) : nullptr;
      // Dims past the first: the batch's, or in calls: data a call's (whose first axis counts calls).
      const int ta = sample->calls ? 1 : 0, ca = o.calibration && o.calibration->calls ? 1 : 0;
      Dims a(t->dims().begin() + ta + (t->rank() > ta ? 1 : 0), t->dims().end());
      Dims b = c ? Dims(c->dims().begin() + ca + (c->rank() > ca ? 1 : 0), c->dims().end()) : a;
      if (a != b) {
        notes.push_back("input '" + v.name + "': --eval-data gives " + DimsToString(t->dims()) +
                        ", --calibration-data " + DimsToString(c->dims()) + "; its free dims stay free");
        continue;
      }
      want = sample->calls ? Dims(t->dims().begin() + 1, t->dims().end()) : t->dims();
      from = "the data";
    }
    if (!want) {
      bool free = false;
      for (size_t i = 1; i < v.shape->size(); ++i) free |= !(*v.shape)[i].known();
      if (free)
        notes.push_back("input '" + v.name + "' has free dims " + SymShapeToString(*v.shape) +
                        ": MACs of layers whose size depends on them are not counted (give --input-shape or data)");
      continue;
    }
    if (want->size() != v.shape->size())
      return InvalidArgument("input '" + v.name + "' has rank " + std::to_string(v.shape->size()) + ", " + from +
                             " gives " + DimsToString(*want));
    bool pinned = false;
    for (size_t i = 1; i < want->size(); ++i) {
      Dim& d = (*v.shape)[i];
      if (d.known()) {
        if (d.value != (*want)[i])
          return InvalidArgument("input '" + v.name + "' has dim " + std::to_string(i) + " = " +
                                 std::to_string(d.value) + ", " + from + " gives " + DimsToString(*want));
        continue;
      }
      d = Dim((*want)[i]);
      pinned = true;
    }
    if (pinned) {
      changed = true;
      notes.push_back("input '" + v.name + "' taken as " + SymShapeToString(*v.shape) + " (free dims from " + from +
                      ") for the MAC counts and the passes' decisions; the written model keeps its free dims");
    }
  }
  if (changed) WH_RETURN_IF_ERROR(CheckPassOutput(g));
  return notes;
}

// One sample (batch 1) for every graph input: the first data row for it when there is data, zeros
// otherwise; nullopt when an input still has a free non-batch dim.
std::optional<std::map<std::string, Tensor>> OneSample(const Graph& g, const PipelineOptions& o) {
  const Dataset* data = o.eval_data && o.eval_data->size() ? o.eval_data
                        : o.calibration && o.calibration->size() ? o.calibration
                                                                 : nullptr;
  std::map<std::string, Tensor> feeds;
  // A decoder fed token ids alone: its mask, positions and empty past are made as for a batch.
  if (data) {
    std::vector<IoInfo> ins;
    bool free = false;
    for (int id : g.inputs()) {
      const Value& v = g.value(id);
      if (!v.shape || v.dtype == DType::kUndefined) return std::nullopt;
      ins.push_back(IoInfo{v.name, v.dtype, *v.shape});
      for (size_t i = 1; i < v.shape->size(); ++i) free |= !(*v.shape)[i].known();
    }
    if (free || data->calls) {  // calls: a call is as the data gives it
      auto batch = BatchFeeds(*data, ins, 0, 1);
      if (batch.ok()) return std::move(batch).value();
    }
  }
  for (size_t k = 0; k < g.inputs().size(); ++k) {
    const Value& v = g.value(g.inputs()[k]);
    if (!v.shape || v.dtype == DType::kUndefined) return std::nullopt;
    Dims dims;
    for (size_t i = 0; i < v.shape->size(); ++i) {
      if (i == 0) dims.push_back(1);
      else if ((*v.shape)[i].known()) dims.push_back((*v.shape)[i].value);
      else return std::nullopt;
    }
    const Tensor* t = data ? data->ForInput(v.name, k) : nullptr;
    if (t && t->rank() == static_cast<int>(dims.size())) {
      auto x = ConformToInput(SliceBatch(*t, 0, 1), IoInfo{v.name, v.dtype, *v.shape});
      if (x.ok() && x->dims() == dims) {
        feeds[v.name] = *x;
        continue;
      }
    }
    feeds[v.name] = Tensor(v.dtype, dims);
  }
  return feeds;
}

// Shows the fine-tuning's progress through the pipeline's observer, under a [finetune] tag.
class FinetuneProgress : public training::FinetuneObserver {
 public:
  explicit FinetuneProgress(PipelineObserver* obs) : obs_(obs) {}
  void Progress(const std::string& stage, int64_t step, int64_t steps, const std::string& detail) override {
    obs_->StepProgress("[finetune] " + stage, step, steps, detail);
  }
  void Line(const std::string& text) override { obs_->Line("[finetune] " + text); }

 private:
  PipelineObserver* obs_;
};

// Distills out->graph from the original model (o.model_path) as o.finetune asks, evaluates the
// result, and fills out->finetune; out->graph becomes the model to write. The figures of the
// written file are the caller's to add.
Status Finetune(const PipelineOptions& o, PipelineResult* out, PipelineObserver& obs) {
  const PipelineFinetune& f = *o.finetune;
  CompressionReport& report = out->report;
  const auto t0 = std::chrono::steady_clock::now();
  WH_ASSIGN_OR_RETURN(Graph teacher, LoadModel(o.model_path));
  auto trainer = training::Trainer::Create(out->graph, &teacher, f.options);
  if (!trainer.ok()) return trainer.status().WithContext("--finetune");
  training::FinetuneRun run;
  run.epochs = f.options.epochs;
  run.evaluate_before = false;  // the pipeline measured the compressed model already
  run.history.before = report.after.accuracy;  // the model to beat (-1 without eval data)
  FinetuneProgress progress(&obs);
  FinetuneReport& ft = out->finetune.emplace();
  auto tuned = training::RunFinetune(**trainer, *f.train_data, o.eval_data, std::move(run), &ft.history, &progress);
  obs.Clear();
  if (!tuned.ok()) return tuned.status();
  ft.history.before = report.after.accuracy;
  if (o.eval_data) {
    // Measured as the other two accuracies, without a progress line of its own.
    WH_ASSIGN_OR_RETURN(ft.output_accuracy, Accuracy(*tuned, *o.eval_data, o.threads, "fine-tuned model", Quiet()));
    report.after.accuracy = ft.output_accuracy;
  }
  out->graph = std::move(*tuned);
  ft.spec = f.spec;
  ft.student = "compressed " + o.model_path;
  ft.teacher = o.model_path;
  ft.output = o.output_path;
  ft.train_data = f.train_spec;
  ft.train_samples = f.train_data->size();
  ft.eval_data = o.eval_data ? o.eval_spec : "";
  ft.eval_samples = o.eval_data ? o.eval_data->size() : 0;
  ft.options = f.options;
  ft.teacher_accuracy = report.before.accuracy;
  ft.output_params = report.after.params;
  ft.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::Ok();
}

void SetCost(const Graph& g, ModelFigures* f) {
  const GraphCost c = ComputeCost(g);
  f->params = c.params;
  f->param_bytes = c.param_bytes;
  f->macs = c.macs;
}

// Shows the search's progress through the pipeline's observer.
class SearchProgress : public search::SearchObserver {
 public:
  explicit SearchProgress(PipelineObserver* obs) : obs_(obs) {}
  void Progress(const std::string& stage, int64_t done, int64_t total, const std::string& detail) override {
    obs_->StepProgress(stage, done, total, detail);
  }
  void Line(const std::string& text) override { obs_->Line(text); }
  void Clear() override { obs_->Clear(); }

 private:
  PipelineObserver* obs_;
};

// What the cached sensitivities depend on: the model's bytes, the calibration data, the families,
// the user's options per pass and the seed (the search adds the calibration metric).
StatusOr<std::string> SearchFingerprint(const PipelineOptions& o, const search::SearchOptions& so) {
  WH_ASSIGN_OR_RETURN(std::string model, ReadFileBytes(o.model_path));
  std::string f = "model " + search::HashBytes(model.data(), model.size());
  const Dataset& c = *o.calibration;
  f += " calibration " + std::to_string(c.size()) + " " + search::HashBytes(c.inputs.raw_data(), c.inputs.nbytes());
  for (const auto& [name, t] : c.named) f += " " + name + " " + search::HashBytes(t.raw_data(), t.nbytes());
  if (c.has_labels()) f += " labels " + search::HashBytes(c.labels.raw_data(), c.labels.nbytes());
  for (const std::string& fam : so.families) f += " " + fam;
  for (const auto& [pass, spec] : so.base) f += " --" + pass + " " + spec;
  f += " seed " + std::to_string(o.seed);  // the search adds the metric its sensitivities were scored by
  return f;
}

struct SearchOutcome {
  std::vector<PassReport> passes;
};

// Runs the accuracy-aware search (o.search) from `original`: out->graph becomes the chosen model,
// out->report.search what was tried, and with o.finetune out->finetune the chosen model's
// fine-tuning (every candidate is fine-tuned before it is evaluated).
StatusOr<SearchOutcome> SearchConfiguration(const Graph& original, const PipelineOptions& o, PipelineResult* out,
                               PipelineObserver& obs) {
  search::SearchOptions so = *o.search;
  so.calibration = o.calibration;
  so.eval = o.eval_data;
  so.threads = o.threads;
  so.seed = o.seed;
  if (!so.calibration) return InvalidArgument("--target needs --calibration-data (each layer's choices are measured on it)");
  if (!so.eval) return InvalidArgument("--target needs --eval-data (the budget is measured on it)");
  WH_ASSIGN_OR_RETURN(so.fingerprint, SearchFingerprint(o, so));
  std::map<std::string, FinetuneReport> tuned;
  if (o.finetune) {
    so.recover = [&](const Graph& candidate, const std::string& key) -> StatusOr<Graph> {
      PipelineResult r;
      r.graph = candidate;
      r.report.before.accuracy = out->report.before.accuracy;
      WH_ASSIGN_OR_RETURN(r.report.after.accuracy,
                          Accuracy(candidate, *o.eval_data, o.threads, "candidate before fine-tuning", obs));
      WH_RETURN_IF_ERROR(Finetune(o, &r, obs));
      tuned[key] = std::move(*r.finetune);
      return std::move(r.graph);
    };
  }
  SearchProgress progress(&obs);
  WH_ASSIGN_OR_RETURN(search::SearchResult found, search::RunSearch(original, so, &progress));
  out->graph = std::move(found.graph);
  if (auto it = tuned.find(found.key); it != tuned.end()) out->finetune = std::move(it->second);
  out->report.search = std::move(found.report);
  return SearchOutcome{std::move(found.passes)};
}

}  // namespace

Status CheckPipelineSteps(const std::vector<PipelineStep>& steps) {
  for (const PipelineStep& s : steps) WH_RETURN_IF_ERROR(MakePass(s.pass, s.options).status());
  return Status::Ok();
}

// Eval data without labels (token ids for a decoder): the original model's top-1 (per position
// for a sequence output) become the labels, so "accuracy" is top-1 agreement with the original.
StatusOr<Dataset> LabelledByOriginal(const Graph& g, const Dataset& data, int threads) {
  SessionOptions so;
  so.num_threads = threads;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(g, so));
  Dataset d = data;
  WH_ASSIGN_OR_RETURN(d.labels, PredictTop1(*session, data));
  return d;
}

StatusOr<PipelineResult> RunPipeline(const PipelineOptions& options, PipelineObserver* observer) {
  PipelineObserver& obs = observer ? *observer : Quiet();
  PipelineOptions o = options;
  Dataset agreement;  // unlabelled eval data with the original model's top-1 as labels
  if (o.output_path.empty()) return InvalidArgument("no output path given");
  if (o.finetune && !o.finetune->train_data) return InvalidArgument("fine-tuning needs training data");
  std::string current_pass;
  PassManager pm;
  for (const PipelineStep& s : o.steps) {
    WH_ASSIGN_OR_RETURN(std::unique_ptr<Pass> pass, MakePass(s.pass, s.options));
    pm.Add(std::make_unique<ObservedPass>(std::move(pass), &current_pass, &obs));
  }
  if (o.stop_after >= 0) pm.set_stop_after(o.stop_after);

  const auto t_start = std::chrono::steady_clock::now();
  WH_ASSIGN_OR_RETURN(Graph original, LoadModel(o.model_path));
  if (Status s = InferShapes(original); !s.ok()) return s.WithContext(o.model_path);
  std::vector<std::optional<SymShape>> declared;
  for (int id : original.inputs()) declared.push_back(original.value(id).shape);
  WH_ASSIGN_OR_RETURN(std::vector<std::string> pin_notes, PinInputDims(original, o));
  auto declared_changed = [&](const Graph& g) {
    for (size_t k = 0; k < g.inputs().size() && k < declared.size(); ++k)
      if (g.value(g.inputs()[k]).shape != declared[k]) return true;
    return false;
  };

  PipelineResult out;
  CompressionReport& report = out.report;
  report.input_path = o.model_path;
  report.notes = pin_notes;
  report.output_path = o.output_path;
  report.threads = o.threads;
  report.eval_data = o.eval_data ? o.eval_spec : "";
  report.eval_samples = o.eval_data ? o.eval_data->size() : 0;
  if (o.eval_data && !o.eval_data->has_labels()) {
    auto d = LabelledByOriginal(original, *o.eval_data, o.threads);
    if (!d.ok()) return d.status().WithContext("labelling --eval-data " + o.eval_spec + " by the original model");
    agreement = std::move(d).value();
    o.eval_data = &agreement;
    report.notes.push_back("--eval-data " + o.eval_spec +
                           " has no labels: accuracy is top-1 agreement with the original model" +
                           (agreement.labels.rank() > 1 ? " at every position (" +
                                                               std::to_string(agreement.labels.numel()) + " predictions)"
                                                         : std::string()));
  }
  report.calibration_data = o.calibration ? o.calibration_spec : "";
  report.calibration_samples = o.calibration ? o.calibration->size() : 0;
  // The model file and its external data (the file alone is smaller when it has some).
  report.before.file_bytes = FileSizeOf(o.model_path);
  auto on_disk = ModelBytesOnDisk(o.model_path);
  const bool input_external = on_disk.ok() && *on_disk > report.before.file_bytes;
  if (on_disk.ok()) report.before.file_bytes = *on_disk;
  // Dims inference cannot resolve are taken from one sample run through the model.
  const auto sample = OneSample(original, o);
  // With no data the sample is made up (zeros, batch 1), which a model may refuse (a zero split
  // size, an index out of range): the cost model then goes without it, saying so. A sample of the
  // user's data must run.
  const bool made_up = !(o.eval_data && o.eval_data->size()) && !(o.calibration && o.calibration->size());
  bool noted = false;
  auto observe = [&](Graph& g, const std::map<std::string, Tensor>& feeds) -> Status {
    Status st = ObserveShapes(g, feeds).WithContext("running one sample for the cost model");
    if (st.ok() || !made_up) return st;
    if (!std::exchange(noted, true))
      report.notes.push_back("the cost model ran without a sample: a made-up one (zeros, batch 1) failed (" + st.message() +
                             "); give --eval-data or --calibration-data for dims that inference leaves unknown");
    return Status::Ok();
  };
  if (sample) WH_RETURN_IF_ERROR(observe(original, *sample));
  SetCost(original, &report.before);
  if (o.eval_data) {
    WH_ASSIGN_OR_RETURN(report.before.accuracy, Accuracy(original, *o.eval_data, o.threads, "original model", obs));
  }

  PassContext ctx;
  ctx.calibration = o.calibration;
  ctx.num_threads = o.threads;
  ctx.seed = o.seed;
  ctx.progress = [&](const std::string& stage, int64_t done, int64_t total) {
    // Passes may name themselves in the stage ("svd: ..."); the bracket already does.
    const std::string own = current_pass + ": ";
    obs.Progress("[" + current_pass + "] " + (stage.rfind(own, 0) == 0 ? stage.substr(own.size()) : stage), done,
                 total);
  };
  out.graph = original;
  if (o.search) {
    WH_ASSIGN_OR_RETURN(SearchOutcome found, SearchConfiguration(original, o, &out, obs));
    report.passes = std::move(found.passes);
  } else {
    auto reports = pm.Run(&out.graph, ctx);
    obs.Clear();
    if (!reports.ok()) return reports.status();
    report.passes = std::move(reports).value();
  }
  if (o.portable) {
    WH_ASSIGN_OR_RETURN(std::string lowered, LowerCompressedOps(out.graph, o.portable_dense));
    if (!lowered.empty()) report.notes.push_back(lowered);
  }
  if (report.passes.size() < pm.size())
    obs.Line("--stop-after " + std::to_string(o.stop_after) + ": ran " + std::to_string(report.passes.size()) + " of " +
             std::to_string(pm.size()) + " passes");

  // Made again: pruning attention heads changes a decoder's declared cache dims.
  const auto sample_after = sample ? OneSample(out.graph, o) : std::nullopt;
  if (sample_after) WH_RETURN_IF_ERROR(observe(out.graph, *sample_after));
  SetCost(out.graph, &report.after);
  if (o.eval_data) {
    WH_ASSIGN_OR_RETURN(report.after.accuracy, Accuracy(out.graph, *o.eval_data, o.threads, "compressed model", obs));
  }
  if (o.eval_data == &agreement) {
    // Without labels the outputs themselves are compared too (cosine, largest difference).
    SessionOptions so;
    so.num_threads = o.threads;
    WH_ASSIGN_OR_RETURN(auto sa, Session::FromGraph(original, so));
    WH_ASSIGN_OR_RETURN(auto sb, Session::FromGraph(out.graph, so));
    obs.Progress("[eval] outputs vs the original", 0, 1);
    auto c = CompareOutputs(*sa, *sb, agreement);
    obs.Clear();
    if (!c.ok()) return c.status().WithContext("comparing the compressed model's outputs with the original's");
    if (c->values > 0) {
      report.output_cosine = c->cosine;
      report.output_max_abs = c->max_abs;
    }
  }
  if (o.bench) {
    BenchOptions bo;
    bo.batches = {o.bench_batch};
    bo.warmup = 3;
    bo.min_iterations = o.bench_iterations;
    bo.min_seconds = o.bench_seconds;
    bo.input_shapes = o.input_shapes;
    const Dataset* samples = o.eval_data && o.eval_data->size()       ? o.eval_data
                             : o.calibration && o.calibration->size() ? o.calibration
                                                                      : nullptr;
    BenchFigures fb, fa;
    WH_RETURN_IF_ERROR(BenchBoth(original, out.graph, bo, samples, o.threads, o.bench_rounds, &fb, &fa, obs));
    std::vector<IoInfo> ins;  // the batch Benchmark ran: one call (calls: data), the model's own, or --bench-batch
    for (int id : out.graph.inputs())
      if (!out.graph.value(id).is_constant() && out.graph.value(id).shape)
        ins.push_back(IoInfo{out.graph.value(id).name, out.graph.value(id).dtype, *out.graph.value(id).shape});
    report.bench_batch = samples && samples->calls ? 1 : FixedBatch(ins) > 0 ? FixedBatch(ins) : o.bench_batch;
    report.before.latency_p50_ms = fb.p50_ms;
    report.before.throughput = fb.throughput;
    report.after.latency_p50_ms = fa.p50_ms;
    report.after.throughput = fa.throughput;
  }

  // The written model keeps the inputs' declared dims.
  if (declared_changed(original)) {
    // Only the free dims go back: a known one may have been changed by a pass (a KV cache's
    // head count after head pruning).
    for (size_t k = 0; k < out.graph.inputs().size() && k < declared.size(); ++k) {
      auto& now = out.graph.value(out.graph.inputs()[k]).shape;
      if (!declared[k] || !now || now->size() != declared[k]->size()) {
        now = declared[k];
        continue;
      }
      for (size_t i = 0; i < now->size(); ++i)
        if (!(*declared[k])[i].known()) (*now)[i] = (*declared[k])[i];
    }
    WH_RETURN_IF_ERROR(CheckPassOutput(out.graph).WithContext("restoring the inputs' declared dims"));
  }

  if (o.finetune && !o.search) WH_RETURN_IF_ERROR(Finetune(o, &out, obs));

  // Everything that can fail happens before the output is renamed into place.
  SaveOptions save;
  save.external_data_threshold = o.external_data_threshold;
  if (save.external_data_threshold < 0 && input_external) {
    // A model that came with external data leaves with it: its tensors are then memory-mapped
    // when the output is loaded (an inline model is read, parsed and copied: about three times
    // its size at its peak).
    save.external_data_threshold = kAutoExternalDataThreshold;
    report.notes.push_back("the input keeps its tensors in external data, so the output does too (tensors of " +
                           std::to_string(kAutoExternalDataThreshold) +
                           " bytes or more in OUT.onnx.data; --external-data-threshold sets another size)");
  }
  if (!o.write) return out;
  WH_ASSIGN_OR_RETURN(std::unique_ptr<StagedModel> staged, StageModel(out.graph, o.output_path, save));
  report.after.file_bytes = staged->total_bytes();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  FinetuneReport* ft = out.finetune ? &*out.finetune : nullptr;
  if (ft) {
    ft->output_file_bytes = report.after.file_bytes;
    std::string line = "[finetune] done in " + Fmt("%.2f", ft->seconds) + " s";
    if (ft->history.before >= 0 && ft->output_accuracy >= 0)
      line += ": accuracy " + Fmt("%.4f", ft->history.before) + " -> " + Fmt("%.4f", ft->output_accuracy);
    obs.Line(line);
    if (ft->history.kept_student)
      obs.Line("[finetune] no epoch beat the compressed model before fine-tuning (" + Fmt("%.4f", ft->history.before) +
               "; best epoch " + Fmt("%.4f", ft->history.best) + "): it is written unchanged");
  }
  if (!o.report_json_path.empty())
    WH_RETURN_IF_ERROR(WriteFileAtomically(o.report_json_path, ToJson(report, ft).dump(2) + "\n"));
  if (!o.report_html_path.empty()) WH_RETURN_IF_ERROR(WriteFileAtomically(o.report_html_path, ToHtml(report, ft)));
  WH_RETURN_IF_ERROR(staged->Commit());
  return out;
}

}  // namespace whittle
