// serve-model: Whittle's reference model server. Loads one or more ONNX models, puts each behind a
// BatchingSession (dynamic batching, bounded queue, deadlines) and answers HTTP/1.1 on a loopback
// address by default: predict (JSON, .npy, .npz), model metadata, health and Prometheus metrics.
// SIGHUP (or POST /v1/models/NAME:reload) reloads models without dropping requests; SIGTERM or
// SIGINT stops accepting, answers what is in flight and exits 0. Signals are taken by one thread
// in sigwait (they are blocked everywhere else), so no handler runs in signal context.
#include <CLI/CLI.hpp>

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "runtime/backend_name.h"
#include "tools/common/cli.h"
#include "tools/serve-model/http_server.h"
#include "tools/serve-model/metrics.h"
#include "tools/serve-model/model_registry.h"

namespace {

using whittle::Status;
using whittle::serve::LogLine;

int Fail(const std::string& msg) { return whittle::cli::Fail("serve-model", msg); }

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

// "cnn.onnx", "dir/cnn.onnx" -> "cnn".
std::string Stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  const size_t dot = base.rfind('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

// The positional MODEL arguments (PATH or NAME=PATH) and --name, as (name, path) pairs.
whittle::StatusOr<std::vector<whittle::serve::ModelSpec>> ModelSpecs(const std::vector<std::string>& args,
                                                                      const std::vector<std::string>& names) {
  if (names.size() > args.size())
    return whittle::InvalidArgument("more --name flags (" + std::to_string(names.size()) + ") than models (" +
                                    std::to_string(args.size()) + ")");
  std::vector<whittle::serve::ModelSpec> specs;
  for (size_t i = 0; i < args.size(); ++i) {
    whittle::serve::ModelSpec s;
    const size_t eq = args[i].find('=');
    if (eq != std::string::npos && eq > 0 && args[i].find('/') > eq) {
      s.name = args[i].substr(0, eq);
      s.path = args[i].substr(eq + 1);
      if (i < names.size()) return whittle::InvalidArgument("model " + args[i] + " is named twice (NAME= and --name)");
    } else {
      s.path = args[i];
      s.name = i < names.size() ? names[i] : Stem(args[i]);
    }
    if (!ValidName(s.name))
      return whittle::InvalidArgument("model name '" + s.name + "' (for " + s.path +
                                      ") must be 1 to 64 of A-Z a-z 0-9 . _ - (use --name)");
    specs.push_back(s);
  }
  return specs;
}

// The thread that takes SIGHUP, SIGTERM and SIGINT (blocked in every other thread). SIGUSR1 from
// main, with `quit` set, ends it once the server has stopped. A second SIGTERM or SIGINT while
// draining exits at once (status 1).
void SignalLoop(const sigset_t& set, whittle::serve::ModelServer& server, const std::atomic<bool>& quit) {
  bool stopping = false;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (sig == SIGUSR1) {
      if (quit.load()) return;
      continue;
    }
    if (sig == SIGHUP) {
      LogLine("SIGHUP: reloading every model");
      server.ReloadAll();
      continue;
    }
    if (stopping) {
      LogLine("second SIGTERM/SIGINT while draining: exiting now");
      std::_Exit(1);
    }
    stopping = true;
    LogLine(std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") +
            ": not accepting connections; answering the requests in flight, then exiting");
    server.Stop();
  }
}

int Main(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) { return whittle::cli::GuardedMain("serve-model", Main, argc, argv); }

namespace {

int Main(int argc, char** argv) {
  // Before any thread exists, so that every thread inherits the mask and only SignalLoop sees them.
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGHUP, SIGTERM, SIGINT, SIGUSR1}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-answer is a failed write, not the end

  CLI::App app{
      "serve-model: serve ONNX models over HTTP with Whittle's runtime, with dynamic batching.\n\n"
      "Examples:\n"
      "  serve-model models/cnn.onnx --port 8080\n"
      "  serve-model models/cnn.onnx --port 8080 --max-batch 32 --batch-policy eager\n"
      "  serve-model models/cnn.onnx --port 8080 --max-batch 32 --max-delay-ms 2\n"
      "  serve-model small=small.onnx big=big.onnx --port 8080 --threads 2\n"
      "  curl -s localhost:8080/v1/models/cnn:predict -d '{\"inputs\": {\"image\": [[[[0.0, ...]]]]}}'\n\n"
      "Endpoints:\n"
      "  POST /v1/models/NAME:predict  body: JSON {\"inputs\": {INPUT: nested lists}} (application/json),\n"
      "                                .npy (application/x-npy, one-input models) or .npz\n"
      "                                (application/x-npz, one member per input); the answer comes in the\n"
      "                                same form: {\"outputs\": {OUTPUT: nested lists}}, .npy (.npz for\n"
      "                                several outputs). Header X-Deadline-Ms: N lowers --timeout-ms.\n"
      "  POST /v1/models/NAME:reload   load NAME's file again and swap it in (in-flight requests finish)\n"
      "  GET  /v1/models, /v1/models/NAME   inputs, outputs, dtypes, dims\n"
      "  GET  /healthz                 200 while serving, 503 while draining\n"
      "  GET  /metrics                 Prometheus text: requests and errors by model and code, latency,\n"
      "                                queue depth, rows per batch, reloads\n"
      "Errors: {\"error\": \"...\"} with 400 (bad body, dtype, shape), 404 (no such model or endpoint),\n"
      "405, 408 (body stalled), 413 (body over --max-body-mb), 415 (Content-Type), 500 (failed reload),\n"
      "503 (queue full, draining), 504 (deadline).\n"
      "Signals: SIGHUP reloads every model; SIGTERM and SIGINT stop accepting, drain and exit 0."};
  app.set_version_flag("--version", "serve-model (Whittle) 0.1.0");
  std::vector<std::string> model_args, names;
  whittle::serve::ServerOptions so;
  std::string device = "cpu";
  int threads = 1, workers = 0, max_body_mb = 64;
  whittle::BatchingOptions bo;
  bo.max_batch = 1;
  app.add_option("models", model_args, "ONNX model files, each PATH or NAME=PATH (the name defaults to the file's stem)")
      ->required()
      ->type_name("MODEL.onnx");
  app.add_option("--name", names, "The name of each model in order, in place of its file's stem (repeatable)")
      ->type_name("NAME");
  app.add_option("--port", so.port, "TCP port (0: any free port; the one taken is logged)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--host", so.host,
                 "Address to listen on; the default answers only this machine. 0.0.0.0 exposes the models to the "
                 "network (there is no authentication)")
      ->capture_default_str();
  const std::vector<whittle::Backend> backends = {whittle::Backend::kCpu, whittle::Backend::kCuda,
                                                  whittle::Backend::kReference};
  app.add_option("--device", device, "Where the models run: " + whittle::cli::BackendList(backends))
      ->check(whittle::cli::BackendCheck(backends))
      ->capture_default_str();
  app.add_option("--threads", threads, "Intra-op threads of each run (0: all cores)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--workers", workers,
                 "Runs (batches) of one model at once; 0: the cores divided by --threads, at least 1")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-batch", bo.max_batch,
                 "Dynamic batching: concurrent requests are stacked along the batch axis up to this many rows per "
                 "run (1: no batching; the inputs' first axis must be the batch)")
      ->check(CLI::Range(int64_t{1}, int64_t{65536}))
      ->capture_default_str();
  app.add_option("--max-delay-ms", bo.max_delay_ms,
                 "Dynamic batching, --batch-policy timeout: how long a batch's first request waits for company")
      ->check(CLI::Range(0.0, 10000.0))
      ->capture_default_str();
  // eager by default: measured no worse than no batching at 1 and 16 clients, where timeout
  // halves the throughput of closed-loop clients that never fill a batch (docs/serving.md).
  std::string batch_policy = "eager";
  app.add_option("--batch-policy", batch_policy,
                 "Dynamic batching: when a batch starts. timeout: when it is full or its first request has waited "
                 "--max-delay-ms (every request under light load waits that long); eager (recommended): an idle "
                 "worker takes what is queued at once (up to --max-batch rows), so batches form only while every "
                 "worker is busy and a lone request never waits")
      ->check(CLI::IsMember({"eager", "timeout"}))
      ->capture_default_str();
  app.add_option("--max-queue", bo.max_queue, "Requests queued per model at most; more are answered 503")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--timeout-ms", so.timeout_ms,
                 "A request still queued this long after it arrived is answered 504 (0: no deadline); a request's "
                 "X-Deadline-Ms header may lower it")
      ->check(CLI::Range(int64_t{0}, int64_t{3600000}))
      ->capture_default_str();
  app.add_option("--max-body-mb", max_body_mb, "Largest request body in MiB; larger ones are answered 413")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--http-threads", so.http_threads,
                 "Connections served at once (a keep-alive client holds one while connected; more wait)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--keep-alive-s", so.keep_alive_s, "Idle keep-alive connections are closed after this many seconds")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  app.add_option("--io-timeout-s", so.io_timeout_s,
                 "A connection whose read or write makes no progress for this many seconds is dropped (slow clients)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  whittle::cli::ResourceLimits limits;
  whittle::cli::AddResourceLimitOptions(app, limits);
  if (auto code = whittle::cli::ParseCommandLine(app, argc, argv, "serve-model")) return *code;

  auto specs = ModelSpecs(model_args, names);
  if (!specs.ok()) return Fail(specs.status().message());
  if (Status st = whittle::cli::ApplyResourceLimits(limits); !st.ok()) return Fail(st.message());
  so.max_body_bytes = int64_t{max_body_mb} << 20;
  bo.eager = batch_policy == "eager";
  whittle::SessionOptions session_options;
  session_options.backend = *whittle::ParseBackend(device);  // checked above
  session_options.num_threads = threads;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bo.workers = workers > 0 ? workers : std::max(1, cores / std::max(1, threads == 0 ? cores : threads));

  whittle::serve::ModelRegistry registry(session_options, bo);
  std::vector<std::string> model_names;
  for (const auto& spec : *specs) {
    const auto start = std::chrono::steady_clock::now();
    if (Status st = registry.Add(spec); !st.ok()) return Fail("loading " + spec.name + ": " + st.message());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    LogLine("loaded " + spec.name + " from " + spec.path + " (" +
            whittle::serve::SignatureText(*registry.model(registry.Find(spec.name)).batching->session()) + ") in " +
            std::to_string(static_cast<int64_t>(ms)) + " ms");
    model_names.push_back(spec.name);
  }
  whittle::serve::Metrics metrics(model_names);
  whittle::serve::ModelServer server(registry, metrics, so);
  auto port = server.Bind();
  if (!port.ok()) return Fail(port.status().message());
  char delay[32];
  std::snprintf(delay, sizeof(delay), "%g", bo.max_delay_ms);
  LogLine("listening on http://" + so.host + ":" + std::to_string(*port) + " (device " + device + ", " +
          (bo.max_batch <= 1 ? std::string("no batching")
           : bo.eager        ? "max batch " + std::to_string(bo.max_batch) + ", eager"
                             : "max batch " + std::to_string(bo.max_batch) + ", timeout, max delay " + delay + " ms") +
          ", queue " + std::to_string(bo.max_queue) + ", " + std::to_string(bo.workers) + " worker(s) x " +
          std::to_string(threads) + " thread(s), " + std::to_string(so.http_threads) + " HTTP threads)");

  std::atomic<bool> quit{false};
  std::thread signal_thread(SignalLoop, std::cref(signals), std::ref(server), std::cref(quit));
  server.Serve();
  quit.store(true);
  pthread_kill(signal_thread.native_handle(), SIGUSR1);  // ends the loop unless a signal already did
  signal_thread.join();
  registry.Shutdown();
  LogLine("stopped");
  return 0;
}

}  // namespace
