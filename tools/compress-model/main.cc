// compress-model: apply compression passes to an ONNX model, in the order given, and report what
// they did. The work is passes/pipeline (load, evaluate, passes, evaluate, benchmark, --finetune's
// distillation from the original, report, atomic write); this file parses flags, shows progress,
// and prints the report. On any error nothing is written at -o (nor at the report paths), Ctrl-C
// included.
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/atomic_file.h"
#include "passes/pass_registry.h"
#include "passes/pipeline.h"
#include "passes/pipeline_args.h"
#include "passes/report/finetune_report.h"
#include "passes/report/report.h"
#include "runtime/training/communicator.h"
#include "runtime/training/finetune.h"
#include "runtime/training/trainer.h"
#include "tools/common/cli.h"
#include "tools/common/progress.h"

namespace {

using whittle::Status;

int Fail(const std::string& msg) { return whittle::cli::Fail("compress-model", msg); }

// Shows the pipeline's progress on stderr.
class ProgressObserver : public whittle::PipelineObserver {
 public:
  explicit ProgressObserver(whittle::cli::Progress* p) : p_(p) {}
  void Progress(const std::string& stage, int64_t done, int64_t total) override { p_->Update(stage, done, total); }
  void StepProgress(const std::string& stage, int64_t step, int64_t steps, const std::string& detail) override {
    p_->Update(stage, step, steps, detail);
  }
  void Line(const std::string& text) override { p_->Line(text); }
  void Clear() override { p_->Clear(); }

 private:
  whittle::cli::Progress* p_;
};

std::string PassFlagHelp() {
  std::string s = "Pass options (each pass flag takes a SPEC of comma-separated key=value options; repeat a flag to add "
                  "options, e.g. --svd energy=0.95 --svd layer=/fc1/Gemm:rank=16; passes run in the order given):\n";
  for (const std::string& name : whittle::PassNames()) s += std::string("\n") + whittle::PassHelp(name) + "\n";
  return s;
}

}  // namespace

namespace {
int Main(int argc, char** argv);
}  // namespace

int main(int argc, char** argv) { return whittle::cli::GuardedMain("compress-model", Main, argc, argv); }

namespace {
int Main(int argc, char** argv) {
  CLI::App app{
      "compress-model: apply compression passes to an ONNX model, in the order given, and report\n"
      "params, MACs, file size, accuracy and latency before and after.\n\n"
      "Examples:\n"
      "  compress-model mlp.onnx -o small.onnx --svd ratio=0.5 --calibration-data fashion-mnist:train\n"
      "  compress-model cnn.onnx -o small.onnx --prune ratio=0.3 --svd energy=0.95,mode=channel \\\n"
      "      --eval-data fashion-mnist:test --report report.html --report-json report.json\n"
      "  compress-model mlp.onnx -o small.onnx --svd ratio=0.5 --finetune epochs=2,lr=0.02 \\\n"
      "      --train-data fashion-mnist:train --eval-data fashion-mnist:test\n"
      "  compress-model cnn.onnx -o small.onnx --target size --max-drop 0.5 --calibration-data fashion-mnist:train \\\n"
      "      --eval-data fashion-mnist:test --sensitivity-cache cnn.sens.json --report report.html\n\n"
      "Data specs: " +
      std::string(whittle::DatasetSpecHelp())};
  app.set_version_flag("--version", "compress-model (Whittle) 0.1.0");
  app.footer(PassFlagHelp() + "\n" + whittle::training::FinetuneSpecHelp(whittle::training::TrainOptions{}));

  std::string model, output, eval_spec, calib_spec, report_json, report_html;
  int64_t eval_limit = -1, calib_samples = 500, bench_batch = 64;
  int threads = 1, stop_after = -1, bench_iterations = 20, bench_rounds = 2;
  double bench_time = 1.0;
  uint64_t seed = 1234;
  bool no_bench = false, quiet = false, portable = false, portable_dense = false;

  app.add_option("model", model, "ONNX model to compress (required)")->type_name("IN.onnx");
  app.add_option("-o,--output", output, "Where to write the compressed model (required; written only on success)")
      ->type_name("OUT.onnx")
      ->required();
  std::map<CLI::Option*, std::string> pass_flags;
  std::map<std::string, std::vector<std::string>> pass_specs;
  for (const std::string& name : whittle::PassNames()) {
    CLI::Option* opt = app.add_option("--" + name, pass_specs[name],
                                      "Run the " + name + " pass with SPEC (optional; options below); repeatable")
                           ->expected(0, 1)
                           ->type_name("SPEC")
                           ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                           ->group("Passes");
    pass_flags[opt] = name;
  }
  app.add_option("--eval-data", eval_spec, "Measure top-1 accuracy of the original and the result on this labelled data")
      ->type_name("SPEC");
  app.add_option("--eval-limit", eval_limit, "Use only the first N samples of --eval-data")->check(CLI::PositiveNumber);
  app.add_option("--calibration-data", calib_spec, "Samples for data-driven criteria (ratio=, criterion=activation)")
      ->type_name("SPEC");
  app.add_option("--calibration-samples", calib_samples, "Use the first N samples of --calibration-data")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads for evaluation, benchmarks and --finetune (0 = all cores)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed for randomized algorithms (randomized SVD)")->capture_default_str();
  whittle::cli::ResourceLimits limits;
  whittle::cli::AddResourceLimitOptions(app, limits);
  std::string external_data;
  whittle::cli::AddExternalDataOption(app, external_data);
  app.add_option("--bench-batch", bench_batch, "Batch size of the latency benchmark")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--bench-time", bench_time, "Minimum seconds of timed runs per model and round")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--bench-iterations", bench_iterations, "Minimum timed runs per model and round")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--bench-rounds", bench_rounds, "Alternating rounds per model; the best median counts")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--no-bench", no_bench, "Skip the latency benchmark");
  app.add_flag("--portable", portable,
               "Write only standard ONNX ops: the ai.whittle ops of --cluster (and the other Whittle-only forms) are "
               "lowered to standard ones that ONNX Runtime runs (larger and slower in Whittle's runtime); circulant "
               "layers use the DFT op (opset 17)");
  app.add_flag("--portable-dense", portable_dense,
               "With --portable: circulant layers as the expanded dense MatMul instead of the DFT form");
  app.add_option("--report-json", report_json, "Write the report as JSON to FILE ('-' = stdout instead of the tables)")
      ->type_name("FILE");
  app.add_option("--report", report_html, "Write a self-contained HTML report (tables and charts) to FILE.html")
      ->type_name("FILE.html");
  app.add_option("--stop-after", stop_after, "Run only the first N passes (to bisect a bad rewrite)")
      ->check(CLI::NonNegativeNumber);
  std::vector<std::string> input_shape_specs;
  app.add_option("--input-shape", input_shape_specs,
                 "Pin the free dims of input NAME for MAC counts and the passes' decisions when no data gives "
                 "them (NAME=1,3,224,224; repeatable; the written model keeps its free dims)")
      ->type_name("NAME=DIMS");
  std::string finetune_spec, train_spec;
  int64_t train_limit = -1;
  app.add_option("--finetune", finetune_spec,
                 "After the passes, fine-tune the compressed model by distillation with IN.onnx as the teacher "
                 "(finetune-model's engine) on --train-data, then write it; the reports give the accuracy before "
                 "and after (SPEC: epochs=N,lr=X,batch=B,optimizer=sgd|adamw,temperature=T,alpha=A,no-labels=1,"
                 "seed=S; lr=auto picks the rates by a range test; see below)")
      ->type_name("SPEC");
  app.add_option("--train-data", train_spec, "Training data of --finetune (required with it)")->type_name("SPEC");
  app.add_option("--train-limit", train_limit, "Use only the first N samples of --train-data")->check(CLI::PositiveNumber);
  double rank_timeout = 600;
  app.add_option("--rank-timeout", rank_timeout,
                 "Under mpirun (--finetune on several ranks): the job fails, naming the rank, when a rank has not "
                 "joined a collective this many seconds after another; 0: wait forever")
      ->check(CLI::Range(0.0, 1e7))
      ->capture_default_str();
  std::string target, passes_list, metric, sensitivity_cache;
  double max_drop = -1;
  int search_evals = 8;
  int64_t latency_batch = 1;
  app.add_option("--target", target,
                 "Accuracy-aware search: find the smallest (size: bytes of weights), fastest (latency: measured on "
                 "this machine at --latency-batch) or cheapest (macs) per-layer mix of --passes whose drop on "
                 "--eval-data stays within --max-drop; needs --calibration-data (each layer's choices are measured "
                 "there). Pass flags given with it (--int8 calibration=percentile:99.99) set those passes' options")
      ->check(CLI::IsMember({"size", "latency", "macs"}))
      ->group("Accuracy-aware search");
  app.add_option("--max-drop", max_drop,
                 "With --target: the largest drop allowed, in percentage points of --metric on --eval-data")
      ->check(CLI::Range(0.0, 100.0))
      ->group("Accuracy-aware search");
  app.add_option("--passes", passes_list,
                 "With --target: the passes the search may mix per layer, comma-separated from int8, int4, svd, "
                 "prune, cluster, binarize, circulant (default: the pass flags given, else int8,int4,svd,prune,cluster)")
      ->type_name("LIST")
      ->group("Accuracy-aware search");
  app.add_option("--metric", metric,
                 "With --target: top1 (accuracy against the labels; the default with labelled --eval-data), "
                 "top1-agreement (top-1 equal to the original model's, per output position; the default without "
                 "labels), top1-sequence (the share of samples whose top-1 equals the original's at every position: "
                 "for a CTC recognizer, lines read the same), top1-ctc (the share of samples whose greedy CTC "
                 "decoding, class 0 the blank, equals the original's: the lines a recognizer reads that stay the "
                 "same; top1-ctc:ignore=C1,C2,... also drops those classes from the lines, e.g. a space class), cosine "
                 "(x100) or mse (100 x (1 - relative squared error)) of the first output")
      ->type_name("METRIC")
      ->group("Accuracy-aware search");
  app.add_option("--sensitivity-cache", sensitivity_cache,
                 "With --target: keep the per-layer measurements in FILE; a later run on the same model, data and "
                 "options (any budget or target) reuses them")
      ->type_name("FILE")
      ->group("Accuracy-aware search");
  app.add_option("--search-evals", search_evals,
                 "With --target: whole configurations evaluated on --eval-data at most (each fine-tuned first "
                 "with --finetune)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str()
      ->group("Accuracy-aware search");
  app.add_option("--latency-batch", latency_batch, "With --target latency: the batch size whose latency counts")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->group("Accuracy-aware search");
  app.add_flag("-q,--quiet", quiet, "No progress on stderr and no tables on stdout (errors only)");
  // Launched by mpirun with several ranks: --finetune trains data-parallel (synchronous SGD, the
  // global batch split over the ranks); every rank runs the passes, rank 0 alone benchmarks,
  // reports and writes.
  auto world = whittle::training::JoinLaunchedJob(&argc, &argv);
  if (!world.ok()) return Fail(world.status().message());
  const whittle::training::Communicator* comm = world->get();
  const int rank = comm ? comm->rank() : 0;
  if (auto code = whittle::cli::ParseCommandLine(app, argc, argv, "compress-model")) return *code;
  if (comm) comm->set_timeout(rank_timeout);
  if (auto st = whittle::cli::ApplyResourceLimits(limits); !st.ok()) return Fail(st.message());
  auto external_threshold = whittle::cli::ParseExternalDataThreshold(external_data);
  if (!external_threshold.ok()) return Fail(external_threshold.status().message());

  if (model.empty()) {
    // `--svd model.onnx -o out.onnx`: the optional spec took the model's name.
    for (const auto& [name, list] : pass_specs)
      for (const std::string& spec : list)
        if (!spec.empty() && spec.find('=') == std::string::npos)
          return Fail("no input model given; --" + name + " took '" + spec +
                      "' as its spec (put the model first, or write --" + name + "=SPEC)");
    return Fail("no input model given (compress-model IN.onnx -o OUT.onnx --PASS [SPEC] ...)");
  }

  // Passes in command-line order; consecutive repeats of one flag merge into one pass.
  std::vector<whittle::PassArg> pass_args;
  std::map<std::string, size_t> seen;
  for (CLI::Option* opt : app.parse_order()) {
    auto it = pass_flags.find(opt);
    if (it == pass_flags.end()) continue;
    const std::string& name = it->second;
    pass_args.push_back({name, pass_specs[name].at(seen[name]++)});
  }
  auto parsed_steps = whittle::ParsePipelineSteps(pass_args);
  if (!parsed_steps.ok()) return Fail(parsed_steps.status().message());
  std::vector<whittle::PipelineStep> specs = std::move(parsed_steps).value();
  const bool searching = !target.empty();
  std::optional<whittle::search::SearchOptions> search;
  if (!searching) {
    for (const char* flag : {"--max-drop", "--passes", "--metric", "--sensitivity-cache", "--search-evals",
                             "--latency-batch"})
      if (app.count(flag)) return Fail(std::string(flag) + " is only used with --target size|latency|macs");
  } else {
    auto so = whittle::MakeSearchOptions(
        {target, max_drop, metric, passes_list, sensitivity_cache, search_evals, latency_batch, stop_after}, specs);
    if (!so.ok()) return Fail(so.status().message());
    search = std::move(so).value();
    specs.clear();
  }
  if (specs.empty() && !searching) {
    std::string flags;
    for (const std::string& n : whittle::PassNames()) flags += (flags.empty() ? "--" : ", --") + n;
    return Fail("no pass given: add at least one of " + flags + ", or --target with --max-drop (see --help)");
  }

  if (Status s = whittle::CheckPipelineSteps(specs); !s.ok()) return Fail(s.message());

  const bool finetune = app.count("--finetune") > 0;
  whittle::training::TrainOptions train_options;
  train_options.threads = threads;
  if (finetune) {
    if (train_spec.empty()) return Fail("--finetune needs --train-data SPEC (the data to fine-tune on)");
    auto parsed = whittle::training::ParseFinetuneSpec(finetune_spec, train_options);
    if (!parsed.ok()) return Fail(parsed.status().message());
    train_options = *parsed;
  } else if (!train_spec.empty() || train_limit > 0) {
    return Fail(std::string(train_spec.empty() ? "--train-limit" : "--train-data") + " is only used with --finetune");
  }
  if (comm && searching) return Fail("--target runs in one process (not under mpirun)");
  if (comm && !finetune)
    return Fail("launched as one of " + std::to_string(comm->size()) +
                " ranks without --finetune: only fine-tuning runs on several ranks (run the passes alone)");
  if (comm && train_options.backend != whittle::Backend::kCpu)
    return Fail("--finetune on " + std::to_string(comm->size()) + " ranks runs on the CPU (the NCCL path is not built yet)");
  if (comm && train_options.batch < comm->size())
    return Fail("--finetune batch=" + std::to_string(train_options.batch) + " is the global batch: it needs at least one "
                "sample per rank (" + std::to_string(comm->size()) + " ranks)");
  train_options.comm = comm;

  const bool json_stdout = report_json == "-";
  for (const auto& [path, flag] : std::vector<std::pair<std::string, std::string>>{
           {output, "-o"}, {json_stdout ? std::string() : report_json, "--report-json"}, {report_html, "--report"}}) {
    if (path.empty() && flag != "-o") continue;
    Status s = whittle::cli::CheckOutputPath(path, flag);
    if (!s.ok()) return Fail(s.message());
    if (flag != "-o" && path == output) return Fail(flag + " " + path + " is the same file as -o");
  }
  if (!report_json.empty() && report_json == report_html) return Fail("--report-json and --report name the same file");

  // Without labels, accuracy is top-1 agreement with the original model (RunPipeline).
  auto eval_data = whittle::cli::LoadDataFlag({"--eval-data", eval_spec, eval_limit, /*need_labels=*/false});
  if (!eval_data.ok()) return Fail(eval_data.status().message());
  auto calib_data = whittle::cli::LoadDataFlag({"--calibration-data", calib_spec, calib_samples});
  if (!calib_data.ok()) return Fail(calib_data.status().message());
  auto train_data = whittle::cli::LoadDataFlag({"--train-data", train_spec, train_limit, train_options.use_labels});
  if (!train_data.ok()) return Fail(train_data.status().message());

  auto input_shapes = whittle::cli::ParseInputShapes(input_shape_specs);
  if (!input_shapes.ok()) return Fail(input_shapes.status().message());

  whittle::PipelineOptions po;
  po.input_shapes = *input_shapes;
  po.model_path = model;
  po.output_path = output;
  po.steps = std::move(specs);
  po.eval_data = eval_spec.empty() ? nullptr : &*eval_data;
  po.eval_spec = eval_spec;
  po.calibration = calib_spec.empty() ? nullptr : &*calib_data;
  po.calibration_spec = calib_spec;
  po.threads = threads;
  po.seed = seed;
  po.stop_after = stop_after;
  po.bench = !no_bench;
  po.portable = portable || portable_dense;
  po.portable_dense = portable_dense;
  po.external_data_threshold = *external_threshold;
  po.bench_batch = bench_batch;
  po.bench_seconds = bench_time;
  po.bench_iterations = bench_iterations;
  po.bench_rounds = bench_rounds;
  po.report_json_path = json_stdout ? "" : report_json;
  po.report_html_path = report_html;

  po.search = search;
  if (finetune) po.finetune = whittle::PipelineFinetune{train_options, &*train_data, finetune_spec, train_spec};
  if (comm) {
    std::string id;
    for (int i = 1; i < argc; ++i) id += std::string(argv[i]) + '\0';
    id += std::to_string(train_data->size());
    if (Status st = whittle::training::CheckSameLaunch(*comm, id); !st.ok()) return Fail(st.message());
  }
  if (rank != 0) {  // the one writer is rank 0
    po.write = false;
    po.bench = false;
    po.report_json_path.clear();
    po.report_html_path.clear();
    quiet = true;
  }

  whittle::RemoveTempFilesOnSignal();
  whittle::cli::Progress progress(!quiet);
  ProgressObserver observer(&progress);
  auto result = whittle::RunPipeline(po, &observer);
  progress.Clear();
  if (!result.ok()) {
    const std::string why = result.status().message();
    const int code = Fail(comm && why.rfind("rank ", 0) != 0 ? "rank " + std::to_string(rank) + ": " + why : why);
    if (comm) comm->Abort(code);  // the other ranks may wait in a collective for this one
    return code;
  }
  if (rank != 0) return 0;
  const whittle::CompressionReport& report = result->report;
  const whittle::FinetuneReport* ft = result->finetune ? &*result->finetune : nullptr;

  if (json_stdout) {
    std::cout << whittle::ToJson(report, ft).dump(2) << "\n" << std::flush;
  } else if (!quiet) {
    std::cout << whittle::ToText(report, ft) << "wrote " << output << "\n" << std::flush;
  }
  return 0;
}

}  // namespace
