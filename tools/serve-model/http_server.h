// serve-model's HTTP side (cpp-httplib): the endpoints, the mapping of Whittle's Status codes to
// HTTP ones, body limits, error bodies ({"error": "..."}, one line) and the error log. Every
// POST-like body is read through one bounded receiver (so a chunked body cannot grow past
// --max-body-mb); routing is done here on the path, not by the library's regexes. Stop() may be
// called from any thread: it closes the listening socket, and Serve() returns once the requests
// in flight are answered.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "tools/serve-model/metrics.h"
#include "tools/serve-model/model_registry.h"

namespace whittle::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (Bind returns it)
  int http_threads = 64;          // connections served at once (each keep-alive client holds one)
  int64_t max_body_bytes = int64_t{64} << 20;
  int64_t timeout_ms = 10000;     // a request's deadline in the queue (0: none); X-Deadline-Ms may lower it
  int keep_alive_s = 5;           // an idle keep-alive connection is closed after this
  int io_timeout_s = 5;           // a read or write that makes no progress for this long drops the connection
  int max_requests_per_connection = 10000;
};

class ModelServer {
 public:
  ModelServer(ModelRegistry& registry, Metrics& metrics, ServerOptions options);
  ~ModelServer();

  // Binds the listening socket; the port bound (options.port, or the one chosen for 0).
  StatusOr<int> Bind();
  // Serves until Stop(); returns after the requests in flight are answered.
  void Serve();
  void Stop();
  // Reloads every model (SIGHUP), logging each result.
  void ReloadAll();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// One line on stderr, "serve-model: ...", at most `per_second` error lines a second (a flood of bad
// requests does not flood the log; the count of dropped lines is logged with the next one).
void LogLine(const std::string& line);
void LogError(const std::string& line, int per_second = 50);

}  // namespace whittle::serve
