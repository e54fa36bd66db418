// run-model: run, evaluate, benchmark and profile an ONNX model on Whittle's runtime.
// All logic lives in runtime/ (Session, EvaluateTop1, Benchmark); this file parses flags,
// prints tables or one JSON object, and turns every failure into one line and a non-zero exit.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "lib/data/dataset.h"
#include "kernels/backend_module.h"
#include "kernels/coverage.h"
#include "lib/data/npy.h"
#include "lib/data/npz.h"
#include "lib/ops/op_def.h"
#include "runtime/evaluate.h"
#include "runtime/session_internal.h"
#include "tools/common/cli.h"
#include "tools/common/progress.h"
#include "whittle/decoder.h"
#include "whittle/session.h"

namespace {

using whittle::Status;

int Fail(const std::string& msg) { return whittle::cli::Fail("run-model", msg); }

// --generate N: prefill the prompt (input_ids=FILE.npy from --input, int64 [n] or [1, n]; else
// the ids 1..8), then N greedy decode steps on whittle::Decoder. Reports prefill and decode
// tokens/s (decode: the median step) and the generated ids; --output-dir gets generated_ids.npy
// (int64 [N + 1]: the prefill's token, then one per step) and logits.npy ([N + 1, vocab]).
// no_cache: every step runs the whole sequence again from an empty cache (the check that the cache
// changes nothing). profile: per-op-type and per-node times summed over the decode steps (each
// node timed; the step times then include that cost).
int Generate(const whittle::Session& session, int64_t steps, bool no_cache, bool copy_cache, bool profile,
             const std::map<std::string, whittle::Tensor>& feeds, const std::string& output_dir, bool json,
             nlohmann::json& out) {
  std::vector<int64_t> prompt{1, 2, 3, 4, 5, 6, 7, 8};
  for (const auto& [name, t] : feeds) {
    if (name != "input_ids") return Fail("--generate takes only --input input_ids=FILE.npy, got '" + name + "'");
    if (t.dtype() != whittle::DType::kInt64 || t.numel() < 1 || t.rank() > 2 || (t.rank() == 2 && t.dim(0) != 1))
      return Fail("--generate: input_ids must be int64 [n] or [1, n], got " + std::string(whittle::DTypeName(t.dtype())) +
                  " " + whittle::DimsToString(t.dims()));
    prompt.assign(t.data<int64_t>(), t.data<int64_t>() + t.numel());
  }
  auto dec = whittle::Decoder::Create(session, /*in_place=*/!copy_cache);
  if (!dec.ok()) return Fail("--generate: " + dec.status().message());
  for (int64_t id : prompt)
    if (id < 0 || id >= (*dec)->vocab_size())
      return Fail("--generate: prompt id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string((*dec)->vocab_size()));
  using Clock = std::chrono::steady_clock;
  auto argmax = [](const std::vector<float>& v) {
    return static_cast<int64_t>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  std::vector<std::vector<float>> logits;
  std::vector<int64_t> ids;
  const auto t0 = Clock::now();
  auto first = (*dec)->Prefill(prompt);
  const double prefill_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!first.ok()) return Fail("--generate: prefill: " + first.status().message());
  ids.push_back(argmax(*first));
  logits.push_back(std::move(*first));
  std::vector<double> step_s;
  struct Sum {
    std::string op_type;
    double ms = 0;
    int64_t calls = 0;
  };
  std::map<std::string, Sum> by_type, by_node;
  double profiled_ms = 0;
  for (int64_t i = 0; i < steps; ++i) {
    const auto ts = Clock::now();
    std::vector<int64_t> all = prompt;
    if (no_cache) all.insert(all.end(), ids.begin(), ids.end());
    whittle::RunStats stats;
    whittle::RunStats* sp = profile ? &stats : nullptr;
    auto l = no_cache ? (*dec)->Prefill(all, sp) : (*dec)->Step(ids.back(), sp);
    step_s.push_back(std::chrono::duration<double>(Clock::now() - ts).count());
    if (!l.ok()) return Fail("--generate: decode step " + std::to_string(i) + ": " + l.status().message());
    for (const auto& nt : stats.nodes) {
      Sum& t = by_type[nt.op_type];
      t.op_type = nt.op_type;
      t.ms += nt.ms;
      ++t.calls;
      Sum& n = by_node[nt.name];
      n.op_type = nt.op_type;
      n.ms += nt.ms;
      ++n.calls;
      profiled_ms += nt.ms;
    }
    ids.push_back(argmax(*l));
    logits.push_back(std::move(*l));
  }
  std::vector<double> sorted = step_s;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
  const double prefill_tps = static_cast<double>(prompt.size()) / prefill_s;
  const double decode_tps = median > 0 ? 1.0 / median : 0.0;
  out["generate"] = {{"prompt_tokens", prompt.size()}, {"steps", steps}, {"cache", !no_cache}, {"prefill_seconds", prefill_s},
                     {"prefill_tokens_per_s", prefill_tps}, {"decode_median_ms", 1e3 * median},
                     {"decode_tokens_per_s", decode_tps}, {"generated_ids", ids},
                     {"cache_in_place", (*dec)->cache_in_place()}};
  if (!json) {
    std::printf("generate: %zu prompt tokens, %lld decode steps, %s%d cache tensors\n", prompt.size(),
                static_cast<long long>(steps), no_cache ? "--no-cache (whole sequence per step), " : "",
                (*dec)->num_layers_cached());
    if (!no_cache && (*dec)->num_layers_cached() > 0)
      std::printf("  cache: %s\n", (*dec)->cache_in_place()
                                        ? "grown in place (no step copies the past)"
                                        : ("copied into each step's present.* outputs: " + (*dec)->cache_copied_why()).c_str());
    std::printf("  prefill: %.2f ms (%.1f tokens/s)\n", 1e3 * prefill_s, prefill_tps);
    std::printf("  decode:  %.3f ms per token, median of %zu steps (%.2f tokens/s)\n", 1e3 * median, step_s.size(),
                decode_tps);
    std::printf("  generated ids:");
    for (int64_t id : ids) std::printf(" %lld", static_cast<long long>(id));
    std::printf("\n");
  }
  if (profile) {
    auto sorted_by_ms = [](const std::map<std::string, Sum>& m) {
      std::vector<std::pair<std::string, Sum>> v(m.begin(), m.end());
      std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
      return v;
    };
    const auto types = sorted_by_ms(by_type), nodes = sorted_by_ms(by_node);
    const double per_step = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
    nlohmann::json pt = nlohmann::json::array(), pn = nlohmann::json::array();
    for (const auto& [t, e] : types)
      pt.push_back({{"op_type", t}, {"ms_per_step", e.ms * per_step}, {"share", profiled_ms > 0 ? e.ms / profiled_ms : 0},
                    {"calls", e.calls}});
    for (const auto& [n, e] : nodes)
      pn.push_back({{"node", n}, {"op_type", e.op_type}, {"ms_per_step", e.ms * per_step},
                    {"share", profiled_ms > 0 ? e.ms / profiled_ms : 0}});
    out["generate"]["profile"] = {{"steps", steps}, {"by_op_type", pt}, {"by_node", pn}};
    if (!json) {
      std::printf("\nprofile over %lld decode steps: time per op type (ms per step)\n", static_cast<long long>(steps));
      std::printf("%-28s %12s %8s %8s\n", "op type", "ms/step", "share", "nodes");
      for (const auto& [t, e] : types)
        std::printf("%-28s %12.3f %7.1f%% %8lld\n", t.c_str(), e.ms * per_step, profiled_ms > 0 ? 100 * e.ms / profiled_ms : 0.0,
                    static_cast<long long>(e.calls / std::max<int64_t>(steps, 1)));
      std::printf("\nslowest nodes (ms per step)\n");
      for (size_t i = 0; i < nodes.size() && i < 20; ++i)
        std::printf("%-48s %-24s %10.3f\n", nodes[i].first.c_str(), nodes[i].second.op_type.c_str(),
                    nodes[i].second.ms * per_step);
    }
  }
  if (!output_dir.empty()) {
    ::mkdir(output_dir.c_str(), 0755);
    const int64_t vocab = (*dec)->vocab_size(), rows = static_cast<int64_t>(logits.size());
    whittle::Tensor l(whittle::DType::kFloat32, {rows, vocab});
    for (int64_t r = 0; r < rows; ++r)
      std::copy(logits[static_cast<size_t>(r)].begin(), logits[static_cast<size_t>(r)].end(), l.data<float>() + r * vocab);
    for (const auto& [file, t] : {std::pair<std::string, whittle::Tensor>{"generated_ids.npy",
                                      whittle::Tensor::FromVector<int64_t>({rows}, ids)},
                                  {"logits.npy", l}}) {
      Status s = whittle::WriteNpy(output_dir + "/" + file, t);
      if (!s.ok()) return Fail(s.message());
    }
  }
  if (json) std::cout << out.dump() << std::endl;
  return 0;
}

std::string SafeFileName(const std::string& name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (s.empty() || s == "." || s == "..") s = "output";
  return s;
}

whittle::StatusOr<std::vector<int64_t>> ParseBatches(const std::string& spec) {
  std::vector<int64_t> r;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t pos = 0;
      long long v = std::stoll(item, &pos);
      if (pos != item.size() || v <= 0 || v > (1 << 20)) throw std::invalid_argument(item);
      r.push_back(v);
    } catch (...) {
      return whittle::InvalidArgument("--batch expects positive integers separated by commas, got '" + spec + "'");
    }
  }
  if (r.empty()) return whittle::InvalidArgument("--batch is empty");
  return r;
}

// --list-ops: the kernel coverage table from the registry's declarations (kernels/coverage.h),
// opsets from each op's schema on.
[[noreturn]] void ListOps(bool json) {
  whittle::RegisterAllOps();
  whittle::RegisterAllKernels();
  // The CUDA column comes from the module's declarations: load it where it can be.
  std::string why;
  if (!whittle::CudaBackendLoaded(&why) && !why.empty()) std::fprintf(stderr, "run-model: %s\n", why.c_str());
  std::fputs(whittle::KernelCoverage(whittle::KernelRegistry::Global(), json, [](const std::string& d, const std::string& op) {
               const whittle::OpDef* def = whittle::OpRegistry::Global().Find(d, op);
               return def ? def->since_opset : 1;
             }).c_str(),
             stdout);
  std::fflush(stdout);
  std::exit(0);
}

}  // namespace

namespace {
int Main(int argc, char** argv);
}  // namespace

int main(int argc, char** argv) { return whittle::cli::GuardedMain("run-model", Main, argc, argv); }

namespace {
int Main(int argc, char** argv) {
  CLI::App app{
      "run-model: run, evaluate and benchmark an ONNX model on Whittle's runtime.\n\n"
      "Examples:\n"
      "  run-model model.onnx --input image=x.npy --output-dir out/\n"
      "  run-model model.onnx --eval-data fashion-mnist:test --limit 1000\n"
      "  run-model model.onnx --bench --batch 1,64 --threads 2 --profile --json\n"
      "  run-model bert.onnx --bench --batch 1,8 --input-shape input_ids=1,128 --input-shape attention_mask=1,128\n"
      "  run-model decoder.onnx --generate 32 --input input_ids=prompt.npy --threads 2\n\n"
      "Data specs: " +
      std::string(whittle::DatasetSpecHelp())};
  app.set_version_flag("--version", "run-model (Whittle) 0.1.0");
  std::string model;
  std::vector<std::string> input_specs;
  std::string output_dir, eval_spec, batch_spec = "1,64", provider, device = "cpu", agree_with,
              precision = "fp32";
  int64_t limit = -1, eval_batch = 256, generate = 0;
  int threads = 1, warmup = 10, iterations = 20;
  double min_time = 1.0;
  bool no_cache = false, copy_cache = false;
  bool bench = false, profile = false, json = false, no_optimize = false, cuda_graphs = false, page_locked = false,
       page_locked_output = false;
  app.add_option("model", model, "ONNX model file")->required();
  app.add_option("--input", input_specs,
                 "Feed input NAME from a NumPy file (NAME=FILE.npy); repeatable. With --bench (and no --eval-data) "
                 "the benchmark's batches are made of these rows, cycled")
      ->type_name("NAME=FILE.npy");
  std::vector<std::string> input_shape_specs;
  app.add_option("--input-shape", input_shape_specs,
                 "With --bench: the dims of an input with free non-batch dims, e.g. a sequence length "
                 "(NAME=1,128; dim 0 is replaced by each --batch size; repeatable). Inputs without it take their "
                 "dims from the model, else from the data")
      ->type_name("NAME=DIMS");
  app.add_option("--output-dir", output_dir, "Write each model output as DIR/<output name>.npy");
  app.add_option("--generate", generate,
                 "Decoder LLMs (input_ids, past_key_values.* -> logits, present.*): prefill the prompt (--input "
                 "input_ids=FILE.npy, default ids 1..8), then N greedy decode steps feeding the KV cache back; "
                 "reports prefill and decode tokens/s and the ids (--output-dir: generated_ids.npy, logits.npy)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--no-cache", no_cache,
               "With --generate: run the whole sequence again at every step instead of feeding the KV cache "
               "(slow; checks that the cache changes nothing)");
  app.add_flag("--copy-cache", copy_cache,
               "With --generate: feed each step's present.* outputs back as tensors (the past copied per step) even "
               "where the caches can grow in place (a comparison)");
  app.add_option("--eval-data", eval_spec, "Report top-1 accuracy on a labelled data set (spec above)");
  app.add_option("--limit", limit, "Use only the first N samples of --eval-data")->check(CLI::PositiveNumber);
  app.add_option("--eval-batch", eval_batch, "Batch size for evaluation")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--bench", bench,
               "Benchmark latency (p50/p90/p99) and throughput per batch size; on a device also its memory "
               "(held before the batch size's runs, and at the peak during them)");
  app.add_option("--batch", batch_spec, "Batch sizes for --bench, comma-separated")->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads (0 = all cores)")->check(CLI::NonNegativeNumber)->capture_default_str();
  whittle::cli::ResourceLimits limits;
  whittle::cli::AddResourceLimitOptions(app, limits);
  app.add_option("--warmup", warmup, "Warm-up runs per batch size")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--iterations", iterations, "Minimum timed runs per batch size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--min-time", min_time, "Minimum seconds of timed runs per batch size")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_flag("--profile", profile,
               "Print time per op type and per node (share of the total) and, on a device, which nodes ran on the CPU: "
               "fallbacks (no kernel there; inputs and outputs copied) and shape arithmetic (on the host by design). "
               "With --generate: time per op type and per node in each decode step");
  app.add_flag("--json", json, "Print one JSON object on stdout instead of tables");
  const std::vector<whittle::Backend> all_backends = {whittle::Backend::kCpu, whittle::Backend::kCuda,
                                                      whittle::Backend::kReference};
  app.add_option("--device", device,
                 "Where and with which kernels the model runs: cpu (fast kernels), cuda (the first GPU that "
                 "CUDA_VISIBLE_DEVICES lets the process see) or reference (plain loops on the CPU)")
      ->check(whittle::cli::BackendCheck(all_backends))->capture_default_str();
  // The old name of `--device reference` (and `--device cpu`); not in --help.
  app.add_option("--provider", provider, "Deprecated: use --device")
      ->check(whittle::cli::BackendCheck({whittle::Backend::kCpu, whittle::Backend::kReference}))
      ->group("");
  app.add_option("--precision", precision,
                 "With --device cuda: arithmetic of float Gemm/MatMul/Conv: fp32, or tf32/fp16/bf16 on tensor cores "
                 "(operands rounded inside cuBLAS; float32 accumulation and tensors)")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}))->capture_default_str();
  app.add_flag("--cuda-graphs", cuda_graphs,
               "With --device cuda: replay each input shape's run as one CUDA graph once three runs have shown it "
               "stays on the device (dropped again where it is no faster); what each shape got is listed at the end");
  app.add_flag("--page-locked-input", page_locked,
               "With --bench on a device: feed the input from page-locked host memory (Session::NewHostTensor), "
               "uploaded without a staging copy, as a caller that refills one input buffer would");
  app.add_flag("--page-locked-output", page_locked_output,
               "With --bench on a device: take the outputs into page-locked host memory made once "
               "(Session::RunInto), written by the device directly behind one wait, as a caller with bound outputs");
  app.add_flag("--no-optimize", no_optimize, "Skip the runtime's graph rewrites (folding, fusion)");
  app.add_option("--agree-with", agree_with,
                 "With --eval-data: also run the model on cpu, reference (plain loops) or cuda (in fp32) and "
                 "report the share of samples whose top-1 class both give")
      ->check(whittle::cli::BackendCheck(all_backends));
  app.add_flag_callback("--list-ops", [&json] { ListOps(json); },
                        "Print the kernel coverage table (op x backend: opsets and input element types; --json: "
                        "one JSON array) and exit");
  if (auto code = whittle::cli::ParseCommandLine(app, argc, argv, "run-model")) return *code;

  if (!provider.empty()) {
    if (app.count("--device") > 0 && provider != device)
      return Fail("--provider " + provider + " and --device " + device +
                  " disagree; give only --device (--provider is its deprecated old name)");
    device = provider;
  }
  whittle::SessionOptions so;
  so.num_threads = threads;
  so.backend = *whittle::ParseBackend(device);  // one of the three (checked above)
  const bool on_cuda = so.backend == whittle::Backend::kCuda;
  so.optimize = !no_optimize;
  so.precision = *whittle::ParsePrecision(precision);  // one of the four (checked above)
  if (so.precision != whittle::Precision::kFp32 && !on_cuda)
    return Fail("--precision " + precision + " needs --device cuda (the CPU computes in fp32)");
  if (cuda_graphs && !on_cuda) return Fail("--cuda-graphs needs --device cuda");
  for (const auto& [set, flag] : {std::pair<bool, const char*>{page_locked, "--page-locked-input"},
                                  std::pair<bool, const char*>{page_locked_output, "--page-locked-output"}})
    if (set && (!bench || !on_cuda)) return Fail(std::string(flag) + " needs --bench and --device cuda");
  so.cuda_graphs = cuda_graphs;
  if (auto st = whittle::cli::ApplyResourceLimits(limits); !st.ok()) return Fail(st.message());
  auto input_shapes = whittle::cli::ParseInputShapes(input_shape_specs);
  if (!input_shapes.ok()) return Fail(input_shapes.status().message());
  if (!input_shapes->empty() && !bench && !profile) return Fail("--input-shape needs --bench");
  auto session_or = whittle::Session::Load(model, so);
  if (!session_or.ok()) return Fail(session_or.status().message());
  const whittle::Session& session = **session_or;

  nlohmann::json out = nlohmann::json::object();
  out["model"] = model;
  out["precision"] = precision;
  bool did_something = false;

  // Explicit inputs.
  std::map<std::string, whittle::Tensor> feeds;
  for (const std::string& spec : input_specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return Fail("--input expects NAME=FILE.npy, got '" + spec + "'");
    auto t = whittle::ReadNpy(spec.substr(eq + 1));
    if (!t.ok()) return Fail(t.status().message());
    feeds[spec.substr(0, eq)] = *t;
  }
  if (generate > 0) {
    if (bench || !eval_spec.empty()) return Fail("--generate does not combine with --bench or --eval-data");
    return Generate(session, generate, no_cache, copy_cache, profile, feeds, output_dir, json, out);
  }
  if (no_cache) return Fail("--no-cache needs --generate");
  if (!input_specs.empty() || !output_dir.empty()) {
    auto res = session.Run(feeds);
    if (!res.ok()) return Fail(res.status().message());
    nlohmann::json files = nlohmann::json::array();
    if (!output_dir.empty()) {
      ::mkdir(output_dir.c_str(), 0755);
      struct stat st{};
      if (::stat(output_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        return Fail("cannot create output directory '" + output_dir + "'");
      for (size_t i = 0; i < res->size(); ++i) {
        const whittle::Tensor& t = (*res)[i];
        const std::string base = output_dir + "/" + SafeFileName(session.outputs()[i].name);
        if (t.is_no_value()) {  // an optional without a value: nothing to write
          if (!json) std::printf("output %s: an optional without a value (no file)\n", session.outputs()[i].name.c_str());
          continue;
        }
        // A sequence: NAME.npz with its elements in order, named 0, 1, ...
        const std::string path = base + (t.is_sequence() ? ".npz" : ".npy");
        Status s = Status::Ok();
        if (t.is_sequence()) {
          std::vector<whittle::NpzArray> items;
          for (size_t k = 0; k < t.elements().size(); ++k) items.push_back({std::to_string(k), t.elements()[k]});
          s = whittle::WriteNpz(path, items);
        } else {
          s = whittle::WriteNpy(path, t);
        }
        if (!s.ok()) return Fail(s.message());
        files.push_back(path);
        if (!json)
          std::printf("wrote %s %s\n", path.c_str(),
                      t.is_sequence() ? ("(a sequence of " + std::to_string(t.elements().size()) + " tensors)").c_str()
                                      : whittle::DimsToString(t.dims()).c_str());
      }
    } else if (!json) {
      for (size_t i = 0; i < res->size(); ++i) {
        const whittle::Tensor& t = (*res)[i];
        if (!t.is_tensor())
          std::printf("output %s: %s\n", session.outputs()[i].name.c_str(),
                      t.is_sequence() ? ("a sequence of " + std::to_string(t.elements().size()) + " tensors").c_str()
                                      : "an optional without a value");
        else
          std::printf("output %s: %s %s\n", session.outputs()[i].name.c_str(), whittle::DTypeName(t.dtype()),
                      whittle::DimsToString(t.dims()).c_str());
      }
    }
    out["outputs"] = files;
    did_something = true;
  }

  if (!agree_with.empty() && eval_spec.empty()) return Fail("--agree-with needs --eval-data");
  // The benchmark's data: the evaluation's, else the --input arrays (by name), else none.
  std::optional<whittle::Dataset> sample_source;
  if (!feeds.empty()) {
    whittle::Dataset d;
    for (const auto& [name, t] : feeds) {
      if (t.rank() < 1) continue;
      d.named.emplace_back(name, t);
    }
    if (!d.named.empty()) {
      d.inputs = d.named[0].second;
      d.description = "--input";
      sample_source = std::move(d);
    }
  }
  if (!eval_spec.empty()) {
    auto ds = whittle::cli::LoadDataFlag({"--eval-data", eval_spec, limit, /*need_labels=*/false});
    if (!ds.ok()) return Fail(ds.status().message());
    sample_source = *ds;
    whittle::cli::Progress bar(!json);
    if (!ds->has_labels()) {
      // No labels: the data still runs (its decisions are what --agree-with compares).
      const auto t0 = std::chrono::steady_clock::now();
      auto pred = whittle::PredictTop1(session, *ds, eval_batch,
                                       [&](int64_t done, int64_t total) { bar.Update("running", done, total); });
      bar.Clear();
      if (!pred.ok()) return Fail(pred.status().message());
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out["samples"] = ds->size();
      out["eval_seconds"] = secs;
      if (!json)
        std::printf("ran %lld %s of %s in %.2f s (no labels: no accuracy%s)\n", static_cast<long long>(ds->size()),
                    ds->calls ? "calls" : "samples", eval_spec.c_str(), secs,
                    agree_with.empty() ? "; --agree-with DEVICE compares this device's decisions with another's" : "");
    }
    auto r = ds->has_labels()
                 ? whittle::EvaluateTop1(session, *ds, eval_batch,
                                         [&](int64_t done, int64_t total) { bar.Update("evaluating", done, total); })
                 : whittle::StatusOr<whittle::EvalResult>(whittle::EvalResult{});
    bar.Clear();
    if (!r.ok()) return Fail(r.status().message());
    if (ds->has_labels()) out["accuracy"] = r->accuracy;
    if (ds->has_labels()) out["samples"] = r->samples;
    if (ds->has_labels()) out["predictions"] = r->predictions;
    if (ds->has_labels()) out["correct"] = r->correct;
    if (ds->has_labels()) out["eval_seconds"] = r->seconds;
    if (!json && ds->has_labels())
      std::printf("accuracy: %.4f (%lld/%lld correct%s, %s) in %.2f s\n", r->accuracy, static_cast<long long>(r->correct),
                  static_cast<long long>(r->predictions), r->predictions != r->samples ? " positions" : "",
                  eval_spec.c_str(), r->seconds);
    did_something = true;
    if (!agree_with.empty()) {
      whittle::SessionOptions other = so;
      other.precision = whittle::Precision::kFp32;  // the comparison is against full precision
      other.backend = *whittle::ParseBackend(agree_with);  // checked above
      auto second = whittle::Session::Load(model, other);
      if (!second.ok()) return Fail("--agree-with " + agree_with + ": " + second.status().message());
      auto mine = whittle::PredictTop1(session, *ds, eval_batch);
      if (!mine.ok()) return Fail(mine.status().message());
      auto theirs = whittle::PredictTop1(**second, *ds, eval_batch,
                                         [&](int64_t done, int64_t total) { bar.Update("agreement", done, total); });
      bar.Clear();
      if (!theirs.ok()) return Fail("--agree-with " + agree_with + ": " + theirs.status().message());
      int64_t same = 0;
      for (int64_t i = 0; i < mine->numel(); ++i) same += mine->data<int64_t>()[i] == theirs->data<int64_t>()[i];
      const double share = mine->numel() ? static_cast<double>(same) / static_cast<double>(mine->numel()) : 1.0;
      // mine->numel() counts positions for a sequence output ([N, T] predictions).
      out["agreement"] = {{"with", agree_with}, {"share", share}, {"same", same}, {"samples", mine->numel()}};
      if (!json)
        std::printf("top-1 agreement with %s: %.4f (%lld/%lld %s)\n", agree_with.c_str(), share,
                    static_cast<long long>(same), static_cast<long long>(mine->numel()),
                    mine->rank() > 1 ? "positions" : "samples");
    }
  }

  if (bench || profile) {
    whittle::BenchOptions bo;
    auto batches = ParseBatches(batch_spec);
    if (!batches.ok()) return Fail(batches.status().message());
    bo.batches = *batches;
    bo.warmup = warmup;
    bo.min_iterations = iterations;
    bo.min_seconds = min_time;
    bo.profile = profile;
    bo.page_locked_input = page_locked;
    bo.page_locked_output = page_locked_output;
    bo.input_shapes = *input_shapes;
    whittle::ProfileResult prof;
    auto r = whittle::Benchmark(session, bo, sample_source ? &*sample_source : nullptr, &prof);
    if (!r.ok()) return Fail(r.status().message());
    nlohmann::json rows = nlohmann::json::array();
    if (!json) {
      std::printf("benchmark: %s, %d thread(s), device %s\n", model.c_str(), so.num_threads, device.c_str());
      std::printf("%8s %10s %10s %10s %10s %16s%s\n", "batch", "runs", "p50 ms", "p90 ms", "p99 ms", "samples/s",
                  on_cuda ? "   device MiB (before / peak)" : "");
    }
    constexpr double kMiB = 1024.0 * 1024.0;
    for (const auto& b : *r) {
      nlohmann::json row = {{"batch", b.batch}, {"iterations", b.iterations}, {"p50_ms", b.p50_ms}, {"p90_ms", b.p90_ms},
                            {"p99_ms", b.p99_ms}, {"mean_ms", b.mean_ms}, {"throughput", b.throughput}};
      if (b.device_peak_bytes >= 0) {
        row["device_before_bytes"] = b.device_before_bytes;
        row["device_peak_bytes"] = b.device_peak_bytes;
      }
      rows.push_back(row);
      if (json) continue;
      std::printf("%8lld %10d %10.4f %10.4f %10.4f %16.1f", static_cast<long long>(b.batch), b.iterations, b.p50_ms,
                  b.p90_ms, b.p99_ms, b.throughput);
      if (b.device_peak_bytes >= 0)
        std::printf("   %10.2f / %.2f", static_cast<double>(b.device_before_bytes) / kMiB,
                    static_cast<double>(b.device_peak_bytes) / kMiB);
      std::printf("\n");
    }
    out["bench"] = rows;
    out["threads"] = so.num_threads;
    if (profile) {
      nlohmann::json pt = nlohmann::json::array(), pn = nlohmann::json::array();
      for (const auto& e : prof.by_op_type)
        pt.push_back({{"op_type", e.op_type}, {"total_ms", e.total_ms}, {"share", e.share}, {"calls", e.calls}});
      for (const auto& e : prof.by_node)
        pn.push_back({{"node", e.name}, {"op_type", e.op_type}, {"device", e.device}, {"total_ms", e.total_ms},
                      {"share", e.share}, {"calls", e.calls}});
      out["profile"] = {{"runs", prof.runs}, {"by_op_type", pt}, {"by_node", pn},
                        {"cpu_fallback", session.fallback_nodes()}, {"host_shape_nodes", session.host_shape_nodes()}};
      if (!json) {
        std::printf("\nprofile over %d runs (all batch sizes): time per op type\n", prof.runs);
        std::printf("%-28s %12s %8s\n", "op type", "total ms", "share");
        for (const auto& e : prof.by_op_type) std::printf("%-28s %12.3f %7.1f%%\n", e.op_type.c_str(), e.total_ms, 100 * e.share);
        std::printf("\ntime per node\n%-36s %-24s %-6s %12s %8s\n", "node", "op type", "device", "total ms", "share");
        for (const auto& e : prof.by_node)
          std::printf("%-36s %-24s %-6s %12.3f %7.1f%%\n", e.name.c_str(), e.op_type.c_str(), e.device.c_str(),
                      e.total_ms, 100 * e.share);
        if (on_cuda) {
          std::printf("\n%zu node(s) without a %s kernel ran on the CPU (inputs and outputs copied):\n",
                      session.fallback_nodes().size(), device.c_str());
          for (const std::string& n : session.fallback_nodes()) std::printf("  %s\n", n.c_str());
          std::printf("%zu shape node(s) computed on the host by design (Shape and the arithmetic on its dims; "
                      "no device copies)\n",
                      session.host_shape_nodes().size());
        }
      }
    }
    did_something = true;
  }

  // What each input shape got (after an evaluation too, whose batches are one shape but the last).
  if (cuda_graphs && did_something) {
    out["cuda_graphs"] = session.device_graph_report();
    if (!json) {
      std::printf("\nCUDA graphs, per input shape:\n");
      for (const std::string& line : session.device_graph_report()) std::printf("  %s\n", line.c_str());
    }
  }
  if (!did_something && !json) {
    std::printf("model %s: %zu node(s) after runtime rewrites\n", model.c_str(), SessionGraph(session).nodes().size());
    for (const auto& i : session.inputs())
      std::printf("  input  %s: %s %s\n", i.name.c_str(), whittle::DTypeName(i.dtype), whittle::SymShapeToString(i.shape).c_str());
    for (const auto& o : session.outputs())
      std::printf("  output %s: %s %s\n", o.name.c_str(), whittle::DTypeName(o.dtype), whittle::SymShapeToString(o.shape).c_str());
    std::printf("(use --input, --eval-data or --bench; see --help)\n");
  }
  if (json) std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace
