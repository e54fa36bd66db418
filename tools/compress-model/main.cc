// compress-model: apply compression passes to an ONNX model, in the order given, and report what
// they did. The logic lives in passes/ (PassManager, the passes, CompressionReport) and runtime/
// (evaluation, benchmark); this file parses flags, shows progress, prints the report, and makes
// sure that on any error nothing is written at -o: the model is saved to a temporary file beside
// it and renamed into place only after evaluation, benchmarking and the reports have succeeded.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/data/file_util.h"
#include "lib/onnx/model_io.h"
#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "passes/report/report.h"
#include "runtime/evaluate.h"
#include "whittle/session.h"
#include "tools/compress-model/progress.h"

namespace {

using whittle::Status;
using whittle::StatusOr;
using whittle::cli::Progress;

int Fail(const std::string& msg) {
  std::string one_line = msg;
  std::replace(one_line.begin(), one_line.end(), '\n', ' ');
  std::fprintf(stderr, "compress-model: error: %s\n", one_line.c_str());
  return 1;
}

// The temporary output, removed on every exit path that does not commit it — including Ctrl-C.
char g_temp_path[4096] = {0};

void RemoveTempOnSignal(int sig) {
  if (g_temp_path[0] != '\0') ::unlink(g_temp_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

class TempOutput {
 public:
  explicit TempOutput(const std::string& final_path) {
    const size_t slash = final_path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "" : final_path.substr(0, slash + 1);
    const std::string base = slash == std::string::npos ? final_path : final_path.substr(slash + 1);
    path_ = dir + "." + base + ".compress-model-" + std::to_string(::getpid()) + ".tmp";
    if (path_.size() < sizeof(g_temp_path)) std::strcpy(g_temp_path, path_.c_str());
    std::signal(SIGINT, RemoveTempOnSignal);
    std::signal(SIGTERM, RemoveTempOnSignal);
  }
  ~TempOutput() {
    if (!committed_) ::unlink(path_.c_str());
    g_temp_path[0] = '\0';
  }
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;
  const std::string& path() const { return path_; }
  Status Commit(const std::string& final_path) {
    if (::rename(path_.c_str(), final_path.c_str()) != 0)
      return whittle::IoError("cannot rename " + path_ + " to " + final_path + ": " + std::strerror(errno));
    committed_ = true;
    return Status::Ok();
  }

 private:
  std::string path_;
  bool committed_ = false;
};

int64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// Fails early (before any long work) when an output path cannot be written.
Status CheckOutputPath(const std::string& path, const std::string& flag) {
  if (path.empty()) return whittle::InvalidArgument(flag + " needs a file name");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return whittle::NotFound(flag + " " + path + ": directory " + dir + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) return whittle::IoError(flag + " " + path + ": directory " + dir + " is not writable");
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return whittle::InvalidArgument(flag + " " + path + " is a directory, expected a file name");
  return Status::Ok();
}

// Forwards to a pass and tells the progress display which pass is running.
class ProgressPass : public whittle::Pass {
 public:
  ProgressPass(std::unique_ptr<whittle::Pass> inner, std::string* current, Progress* progress)
      : inner_(std::move(inner)), current_(current), progress_(progress) {}
  std::string name() const override { return inner_->name(); }
  StatusOr<whittle::PassReport> Run(whittle::Graph& g, const whittle::PassContext& ctx) override {
    *current_ = inner_->name();
    progress_->Update("[" + *current_ + "] running", 0, 0);
    const auto t0 = std::chrono::steady_clock::now();
    StatusOr<whittle::PassReport> r = inner_->Run(g, ctx);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r.ok()) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2f", s);
      progress_->Line("[" + *current_ + "] done in " + buf + " s");
    } else {
      progress_->Clear();
    }
    return r;
  }

 private:
  std::unique_ptr<whittle::Pass> inner_;
  std::string* current_;
  Progress* progress_;
};

StatusOr<double> Accuracy(const whittle::Graph& g, const whittle::Dataset& data, int threads, const std::string& what,
                          Progress* progress) {
  whittle::SessionOptions so;
  so.num_threads = threads;
  WH_ASSIGN_OR_RETURN(auto session, whittle::Session::FromGraph(g, so));
  auto r = whittle::EvaluateTop1(*session, data.inputs, data.labels, 256, [&](int64_t done, int64_t total) {
    progress->Update("[eval] " + what, done, total);
  });
  progress->Clear();
  if (!r.ok()) return r.status().WithContext("evaluating the " + what);
  return r->accuracy;
}

struct BenchFigures {
  double p50_ms = -1, throughput = -1;
};

// Alternates the two models for `rounds` rounds and keeps each one's best median, so that a
// burst of load on a shared machine does not decide the comparison.
Status BenchBoth(const whittle::Graph& before, const whittle::Graph& after, const whittle::BenchOptions& opts,
                 const whittle::Tensor* samples, int threads, int rounds, BenchFigures* fb, BenchFigures* fa,
                 Progress* progress) {
  whittle::SessionOptions so;
  so.num_threads = threads;
  WH_ASSIGN_OR_RETURN(auto sb, whittle::Session::FromGraph(before, so));
  WH_ASSIGN_OR_RETURN(auto sa, whittle::Session::FromGraph(after, so));
  for (int r = 0; r < rounds; ++r) {
    for (int which = 0; which < 2; ++which) {
      progress->Update(std::string("[bench] batch ") + std::to_string(opts.batches[0]) + ", " +
                           (which == 0 ? "original" : "compressed") + " model, round",
                       r + 1, rounds);
      auto res = whittle::Benchmark(which == 0 ? *sb : *sa, opts, samples);
      if (!res.ok())
        return res.status().WithContext(std::string("benchmarking the ") + (which == 0 ? "original" : "compressed") +
                                        " model");
      BenchFigures& f = which == 0 ? *fb : *fa;
      const whittle::BenchResult& b = res->at(0);
      if (f.p50_ms < 0 || b.p50_ms < f.p50_ms) {
        f.p50_ms = b.p50_ms;
        f.throughput = b.throughput;
      }
    }
  }
  progress->Clear();
  return Status::Ok();
}

std::string PassFlagHelp() {
  std::string s = "Pass options (each pass flag takes a SPEC of comma-separated key=value options; repeat a flag to add "
                  "options, e.g. --svd energy=0.95 --svd layer=fc1:rank=16; passes run in the order given):\n";
  for (const std::string& name : whittle::PassNames()) s += std::string("\n") + whittle::PassHelp(name) + "\n";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "compress-model: apply compression passes to an ONNX model, in the order given, and report\n"
      "params, MACs, file size, accuracy and latency before and after.\n\n"
      "Examples:\n"
      "  compress-model mlp.onnx -o small.onnx --svd ratio=0.5 --calibration-data fashion-mnist:train\n"
      "  compress-model cnn.onnx -o small.onnx --prune ratio=0.3 --svd energy=0.95,mode=channel \\\n"
      "      --eval-data fashion-mnist:test --report report.html --report-json report.json\n\n"
      "Data specs: " +
      std::string(whittle::DatasetSpecHelp())};
  app.set_version_flag("--version", "compress-model (Whittle) 0.1.0");
  app.footer(PassFlagHelp());

  std::string model, output, eval_spec, calib_spec, report_json, report_html;
  int64_t eval_limit = -1, calib_samples = 500, bench_batch = 64;
  int threads = 1, stop_after = -1, bench_iterations = 20, bench_rounds = 2;
  double bench_time = 1.0;
  uint64_t seed = 1234;
  bool no_bench = false, quiet = false;

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
  app.add_option("--threads", threads, "Intra-op threads for evaluation and benchmarks (0 = all cores)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed for randomized algorithms (randomized SVD)")->capture_default_str();
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
  app.add_option("--report-json", report_json, "Write the report as JSON to FILE ('-' = stdout instead of the tables)")
      ->type_name("FILE");
  app.add_option("--report", report_html, "Write a self-contained HTML report (tables and charts) to FILE.html")
      ->type_name("FILE.html");
  app.add_option("--stop-after", stop_after, "Run only the first N passes (to bisect a bad rewrite)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-q,--quiet", quiet, "No progress on stderr and no tables on stdout (errors only)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "compress-model: error: %s (see --help)\n", e.what());
    return 2;
  }

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
  struct PassSpec {
    std::string name;
    whittle::PassOptions options;
  };
  std::vector<PassSpec> specs;
  std::map<std::string, size_t> seen;
  for (CLI::Option* opt : app.parse_order()) {
    auto it = pass_flags.find(opt);
    if (it == pass_flags.end()) continue;
    const std::string& name = it->second;
    const std::string spec = pass_specs[name].at(seen[name]++);
    auto parsed = whittle::PassOptions::Parse(name, spec);
    if (!parsed.ok()) return Fail(parsed.status().message());
    if (!specs.empty() && specs.back().name == name) {
      Status s = specs.back().options.Merge(*parsed);
      if (!s.ok()) return Fail(s.message());
    } else {
      specs.push_back({name, std::move(parsed).value()});
    }
  }
  if (specs.empty()) {
    std::string flags;
    for (const std::string& n : whittle::PassNames()) flags += (flags.empty() ? "--" : ", --") + n;
    return Fail("no pass given: add at least one of " + flags + " (see --help)");
  }

  Progress progress(!quiet);
  std::string current_pass;
  whittle::PassManager pm;
  for (PassSpec& p : specs) {
    auto pass = whittle::MakePass(p.name, p.options);
    if (!pass.ok()) return Fail(pass.status().message());
    pm.Add(std::make_unique<ProgressPass>(std::move(pass).value(), &current_pass, &progress));
  }
  if (stop_after >= 0) pm.set_stop_after(stop_after);

  const bool json_stdout = report_json == "-";
  for (const auto& [path, flag] : std::vector<std::pair<std::string, std::string>>{
           {output, "-o"}, {json_stdout ? std::string() : report_json, "--report-json"}, {report_html, "--report"}}) {
    if (path.empty() && flag != "-o") continue;
    Status s = CheckOutputPath(path, flag);
    if (!s.ok()) return Fail(s.message());
    if (flag != "-o" && path == output) return Fail(flag + " " + path + " is the same file as -o");
  }
  if (!report_json.empty() && report_json == report_html) return Fail("--report-json and --report name the same file");

  const auto t_start = std::chrono::steady_clock::now();
  auto loaded = whittle::LoadModel(model);
  if (!loaded.ok()) return Fail(loaded.status().message());
  whittle::Graph original = std::move(loaded).value();
  if (Status s = whittle::InferShapes(original); !s.ok()) return Fail(model + ": " + s.message());

  whittle::Dataset eval_data, calib_data;
  if (!eval_spec.empty()) {
    auto ds = whittle::LoadDataset(eval_spec, eval_limit);
    if (!ds.ok()) return Fail("--eval-data: " + ds.status().message());
    if (!ds->has_labels()) return Fail("--eval-data " + eval_spec + " has no labels; accuracy needs labelled data");
    if (ds->size() == 0) return Fail("--eval-data " + eval_spec + " has no samples");
    eval_data = std::move(ds).value();
  }
  if (!calib_spec.empty()) {
    auto ds = whittle::LoadDataset(calib_spec, calib_samples);
    if (!ds.ok()) return Fail("--calibration-data: " + ds.status().message());
    if (ds->size() == 0) return Fail("--calibration-data " + calib_spec + " has no samples");
    calib_data = std::move(ds).value();
  }

  whittle::CompressionReport report;
  report.input_path = model;
  report.output_path = output;
  report.threads = threads;
  report.eval_data = eval_spec;
  report.eval_samples = eval_data.size();
  report.calibration_data = calib_spec;
  report.calibration_samples = calib_data.size();
  report.before.file_bytes = FileSize(model);
  const whittle::GraphCost cost_before = whittle::ComputeCost(original);
  report.before.params = cost_before.params;
  report.before.param_bytes = cost_before.param_bytes;
  report.before.macs = cost_before.macs;
  if (!eval_spec.empty()) {
    auto acc = Accuracy(original, eval_data, threads, "original model", &progress);
    if (!acc.ok()) return Fail(acc.status().message());
    report.before.accuracy = *acc;
  }

  whittle::PassContext ctx;
  ctx.calibration = calib_spec.empty() ? nullptr : &calib_data;
  ctx.num_threads = threads;
  ctx.seed = seed;
  ctx.progress = [&](const std::string& stage, int64_t done, int64_t total) {
    // Passes may name themselves in the stage ("svd: ..."); the bracket already does.
    const std::string own = current_pass + ": ";
    progress.Update("[" + current_pass + "] " + (stage.rfind(own, 0) == 0 ? stage.substr(own.size()) : stage), done,
                    total);
  };
  whittle::Graph result = original;
  auto reports = pm.Run(&result, ctx);
  progress.Clear();
  if (!reports.ok()) return Fail(reports.status().message());
  report.passes = std::move(reports).value();
  if (report.passes.size() < pm.size())
    progress.Line("--stop-after " + std::to_string(stop_after) + ": ran " + std::to_string(report.passes.size()) +
                  " of " + std::to_string(pm.size()) + " passes");

  const whittle::GraphCost cost_after = whittle::ComputeCost(result);
  report.after.params = cost_after.params;
  report.after.param_bytes = cost_after.param_bytes;
  report.after.macs = cost_after.macs;
  if (!eval_spec.empty()) {
    auto acc = Accuracy(result, eval_data, threads, "compressed model", &progress);
    if (!acc.ok()) return Fail(acc.status().message());
    report.after.accuracy = *acc;
  }
  if (!no_bench) {
    whittle::BenchOptions bo;
    bo.batches = {bench_batch};
    bo.warmup = 3;
    bo.min_iterations = bench_iterations;
    bo.min_seconds = bench_time;
    const whittle::Tensor* samples = eval_data.size() ? &eval_data.inputs : calib_data.size() ? &calib_data.inputs : nullptr;
    BenchFigures fb, fa;
    Status s = BenchBoth(original, result, bo, samples, threads, bench_rounds, &fb, &fa, &progress);
    if (!s.ok()) return Fail(s.message());
    report.bench_batch = bench_batch;
    report.before.latency_p50_ms = fb.p50_ms;
    report.before.throughput = fb.throughput;
    report.after.latency_p50_ms = fa.p50_ms;
    report.after.throughput = fa.throughput;
  }

  // Everything that can fail happens before the output is renamed into place.
  TempOutput temp(output);
  if (Status s = whittle::SaveModel(result, temp.path()); !s.ok()) return Fail(s.message());
  report.after.file_bytes = FileSize(temp.path());
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  const std::string json_text = report_json.empty() ? "" : whittle::ToJson(report).dump(2) + "\n";
  if (!report_json.empty() && !json_stdout) {
    if (Status s = whittle::WriteFileAtomically(report_json, json_text); !s.ok()) return Fail(s.message());
  }
  if (!report_html.empty()) {
    if (Status s = whittle::WriteFileAtomically(report_html, whittle::ToHtml(report)); !s.ok()) return Fail(s.message());
  }
  if (Status s = temp.Commit(output); !s.ok()) return Fail(s.message());

  if (json_stdout) {
    std::cout << json_text << std::flush;
  } else if (!quiet) {
    std::cout << whittle::ToText(report) << "wrote " << output << "\n" << std::flush;
  }
  return 0;
}
