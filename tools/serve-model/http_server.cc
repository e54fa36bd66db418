#include "tools/serve-model/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdio>
#include <mutex>
#include <new>
#include <thread>
#include <utility>

#include "tools/serve-model/request_codec.h"

namespace whittle::serve {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr char kModelsPrefix[] = "/v1/models/";
constexpr size_t kModelsPrefixLen = sizeof(kModelsPrefix) - 1;

double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int HttpCode(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: case StatusCode::kNotFound: case StatusCode::kOutOfRange: return 400;
    case StatusCode::kUnimplemented: return 415;
    case StatusCode::kResourceExhausted: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

std::string ErrorBody(const std::string& msg) {
  return json{{"error", OneLine(msg, 1000)}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// A request's path split into what the endpoints need: "/v1/models/NAME:VERB" -> NAME, VERB.
struct ModelPath {
  bool is_model = false;
  std::string name, verb;
};

ModelPath SplitModelPath(const std::string& path) {
  ModelPath p;
  if (path.compare(0, kModelsPrefixLen, kModelsPrefix) != 0) return p;
  const std::string rest = path.substr(kModelsPrefixLen);
  if (rest.empty() || rest.find('/') != std::string::npos) return p;
  p.is_model = true;
  const size_t colon = rest.rfind(':');
  p.name = colon == std::string::npos ? rest : rest.substr(0, colon);
  p.verb = colon == std::string::npos ? "" : rest.substr(colon + 1);
  return p;
}

// X-Deadline-Ms: a whole number of milliseconds from the request's arrival, 1 to one hour.
StatusOr<int64_t> ParseDeadlineHeader(const std::string& v) {
  if (v.empty() || v.size() > 7) return InvalidArgument("X-Deadline-Ms must be 1 to 3600000 (milliseconds)");
  int64_t ms = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return InvalidArgument("X-Deadline-Ms must be 1 to 3600000 (milliseconds)");
    ms = ms * 10 + (c - '0');
  }
  if (ms < 1 || ms > 3600000) return InvalidArgument("X-Deadline-Ms must be 1 to 3600000 (milliseconds)");
  return ms;
}

std::string StatusText(int code) {
  switch (code) {
    case 400: return "bad request";
    case 404: return "not found";
    case 405: return "method not allowed";
    case 408: return "request timeout";
    case 413: return "request body too large";
    case 414: return "request URI too long";
    case 415: return "unsupported media type";
    case 416: return "range not satisfiable";
    case 500: return "internal server error";
    case 503: return "service unavailable";
    default: return "HTTP status " + std::to_string(code);
  }
}

std::mutex g_log_mu;

// httplib 0.11 listens with a backlog of 5: 32 clients connecting at once overflow it, and the
// ones dropped wait for the kernel's SYN retry (1 s, seen as 1,010 ms outliers in the load test).
// The listening socket is a protected member; listen() again on it sets a real backlog.
class Server : public httplib::Server {
 public:
  void WidenBacklog() { ::listen(svr_sock_, SOMAXCONN); }
};

}  // namespace

void LogLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_log_mu);
  std::fprintf(stderr, "serve-model: %s\n", OneLine(line, 2000).c_str());
  std::fflush(stderr);
}

void LogError(const std::string& line, int per_second) {
  static Clock::time_point window = Clock::now();
  static int in_window = 0;
  static int64_t dropped = 0;
  std::string text;
  {
    std::lock_guard<std::mutex> lock(g_log_mu);
    const auto now = Clock::now();
    if (now - window >= std::chrono::seconds(1)) {
      window = now;
      in_window = 0;
    }
    if (++in_window > per_second) {
      ++dropped;
      return;
    }
    text = OneLine(line, 2000);
    if (dropped > 0) text += " (" + std::to_string(dropped) + " earlier error lines not logged)";
    dropped = 0;
  }
  LogLine(text);
}

struct ModelServer::Impl {
  ModelRegistry& registry;
  Metrics& metrics;
  ServerOptions options;
  Server svr;
  std::atomic<bool> draining{false};
  std::atomic<bool> served{false};  // Serve() has returned (or never listened)

  Impl(ModelRegistry& r, Metrics& m, ServerOptions o) : registry(r), metrics(m), options(std::move(o)) {}

  void Reply(httplib::Response& res, int code, std::string body, const char* content_type) {
    res.status = code;
    res.body = std::move(body);
    res.set_header("Content-Type", content_type);
  }
  void ReplyError(const httplib::Request& req, httplib::Response& res, int code, const std::string& msg) {
    Reply(res, code, ErrorBody(msg), "application/json");
    if (code == 503) res.set_header("Retry-After", "1");
    LogError(std::to_string(code) + " " + req.method + " " + OneLine(req.path, 120) + ": " + msg);
  }

  void Install();
  void Get(const httplib::Request& req, httplib::Response& res);
  void PostLike(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
  bool ReadBody(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                std::string* body);
  void Predict(int model, const httplib::Request& req, httplib::Response& res, const std::string& body,
               Clock::time_point start);
  void Reload(int model, const httplib::Request& req, httplib::Response& res);
  StatusOr<std::vector<Tensor>> RunAlone(ServedModel& m, const Session& session,
                                         const std::map<std::string, Tensor>& inputs,
                                         BatchingSession::Clock::time_point deadline);
};

namespace {

// Whether BatchingSession takes the request: every input has a first axis, of one size.
bool OneBatch(const std::map<std::string, Tensor>& inputs) {
  int64_t rows = -1;
  for (const auto& [name, t] : inputs) {
    if (t.rank() == 0 || (rows >= 0 && t.dims()[0] != rows)) return false;
    rows = t.dims()[0];
  }
  return rows >= 0;
}

}  // namespace

// A request BatchingSession cannot take (a 0-d input, a state tensor with another leading size)
// runs alone on the calling thread, held to the same bounds: at most --max-queue such requests at
// once (more: 503) and the deadline (checked before it runs).
StatusOr<std::vector<Tensor>> ModelServer::Impl::RunAlone(ServedModel& m, const Session& session,
                                                          const std::map<std::string, Tensor>& inputs,
                                                          BatchingSession::Clock::time_point deadline) {
  struct Slot {
    std::atomic<int64_t>& n;
    ~Slot() { n.fetch_sub(1); }
  };
  if (m.direct_in_flight.fetch_add(1) >= registry.batching_options().max_queue) {
    m.direct_in_flight.fetch_sub(1);
    return ResourceExhausted("too many requests running (--max-queue " +
                             std::to_string(registry.batching_options().max_queue) + ")");
  }
  Slot slot{m.direct_in_flight};
  if (BatchingSession::Clock::now() >= deadline) return DeadlineExceeded("the request's deadline passed before it ran");
  ++m.direct_runs;
  return session.Run(inputs);
}

void ModelServer::Impl::Install() {
  const int threads = options.http_threads;
  // httplib's interface: it owns and deletes the queue it gets from this factory.
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_tcp_nodelay(true);
  // The library's default socket options add SO_REUSEPORT, with which a second server on the same
  // port binds too and the kernel splits the connections between them: only SO_REUSEADDR here, so
  // a port in use is an error at startup.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  svr.set_keep_alive_timeout(options.keep_alive_s);
  svr.set_keep_alive_max_count(static_cast<size_t>(options.max_requests_per_connection));
  svr.set_read_timeout(options.io_timeout_s, 0);
  svr.set_write_timeout(options.io_timeout_s, 0);
  // A Content-Length over the limit is skipped by the library and answered 413; chunked bodies are
  // held to it by ReadBody.
  svr.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));

  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // Methods no endpoint takes, refused before their body is read (the connection is closed after).
    if (req.method == "PRI" || req.method == "CONNECT" || req.method == "TRACE") {
      ReplyError(req, res, 405, "method " + req.method + " is not allowed");
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Every path goes to one handler per method; the routing is on the path, in Get and PostLike.
  svr.Get(".*", [this](const httplib::Request& req, httplib::Response& res) { Get(req, res); });
  auto post_like = [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    PostLike(req, res, reader);
  };
  svr.Post(".*", post_like);
  svr.Put(".*", post_like);
  svr.Patch(".*", post_like);
  svr.Delete(".*", post_like);
  svr.Options(".*", [this](const httplib::Request& req, httplib::Response& res) {
    res.set_header("Allow", "GET, HEAD, POST");
    ReplyError(req, res, 405, "OPTIONS is not supported");
  });
  // The library's own errors (a bad request line, 413, 414, ...) get a JSON body too.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) {  // not one of ours: the request line, a header or the URI was refused
      res.body = ErrorBody(StatusText(res.status));
      res.set_header("Content-Type", "application/json");
      LogError(std::to_string(res.status) + " " + OneLine(req.method, 16) + " " + OneLine(req.path, 120) + ": " +
               StatusText(res.status) + " (refused by the HTTP layer)");
    }
    return httplib::Server::HandlerResponse::Unhandled;
  }));
  svr.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    ReplyError(req, res, 500, "internal error: " + what);
  });
  svr.set_post_routing_handler([this](const httplib::Request&, httplib::Response& res) {
    metrics.RecordHttp(res.status);
  });
}

void ModelServer::Impl::Get(const httplib::Request& req, httplib::Response& res) {
  const std::string& path = req.path;
  if (path == "/healthz") {
    if (draining.load()) return Reply(res, 503, "{\"status\":\"draining\"}\n", "application/json");
    return Reply(res, 200, "{\"status\":\"ok\"}\n", "application/json");
  }
  if (path == "/metrics")
    return Reply(res, 200, metrics.Render(registry.Stats()), "text/plain; version=0.0.4; charset=utf-8");
  if (path == "/v1/models" || path == "/v1/models/") {
    json models = json::array();
    for (size_t i = 0; i < registry.size(); ++i) models.push_back(registry.Describe(static_cast<int>(i)));
    return Reply(res, 200, json{{"models", models}}.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                 "application/json");
  }
  const ModelPath mp = SplitModelPath(path);
  if (mp.is_model && mp.verb.empty()) {
    const int i = registry.Find(mp.name);
    if (i < 0) return ReplyError(req, res, 404, "no model named '" + OneLine(mp.name, 64) + "'");
    return Reply(res, 200, registry.Describe(i).dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                 "application/json");
  }
  if (mp.is_model && (mp.verb == "predict" || mp.verb == "reload"))
    return ReplyError(req, res, 405, ":" + mp.verb + " takes POST");
  ReplyError(req, res, 404, "no endpoint " + req.method + " " + OneLine(path, 120) +
                                " (GET /v1/models, /v1/models/NAME, /healthz, /metrics; POST /v1/models/NAME:predict, "
                                "/v1/models/NAME:reload)");
}

bool ModelServer::Impl::ReadBody(const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader, std::string* body) {
  const size_t limit = static_cast<size_t>(options.max_body_bytes);
  const Clock::time_point start = Clock::now();
  bool too_large = false;
  if (req.has_header("Content-Length")) {
    const uint64_t declared = req.get_header_value<uint64_t>("Content-Length");
    if (declared <= limit) body->reserve(static_cast<size_t>(declared));
  }
  const bool ok = reader([&](const char* data, size_t n) {
    if (n > limit - body->size()) {
      too_large = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  if (ok) return true;
  if (too_large || res.status == 413) {
    ReplyError(req, res, 413, "the request body is larger than --max-body-mb (" + std::to_string(limit) + " bytes)");
    // The rest of a chunked body is still on the connection: close it after this answer.
    res.set_header("Connection", "close");
  } else if (Clock::now() - start >= std::chrono::seconds(options.io_timeout_s)) {
    ReplyError(req, res, 408, "the request body stalled for --io-timeout-s (" + std::to_string(options.io_timeout_s) +
                                  " s)");
    res.set_header("Connection", "close");
  } else {
    ReplyError(req, res, 400, "could not read the request body (connection closed, or bad chunking)");
  }
  return false;
}

void ModelServer::Impl::PostLike(const httplib::Request& req, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
  const Clock::time_point start = Clock::now();
  metrics.AddInFlight(1);
  struct Done {
    Metrics& m;
    ~Done() { m.AddInFlight(-1); }
  } done{metrics};
  const ModelPath mp = SplitModelPath(req.path);
  const int model = mp.is_model ? registry.Find(mp.name) : -1;
  std::string body;
  try {
    if (!ReadBody(req, res, reader, &body)) {
      if (mp.verb == "predict") metrics.RecordPredict(model, res.status, SecondsSince(start), 0);
      return;
    }
  } catch (const std::bad_alloc&) {
    return ReplyError(req, res, 503, "out of memory while reading the request body");
  }
  if (req.method != "POST") {
    res.set_header("Allow", "GET, HEAD, POST");
    return ReplyError(req, res, 405, "method " + req.method + " is not allowed");
  }
  if (!mp.is_model || (mp.verb != "predict" && mp.verb != "reload")) {
    if (mp.is_model && mp.verb.empty()) return ReplyError(req, res, 405, "POST /v1/models/NAME:predict to predict");
    return ReplyError(req, res, 404, "no endpoint POST " + OneLine(req.path, 120) +
                                         " (POST /v1/models/NAME:predict or /v1/models/NAME:reload)");
  }
  if (model < 0) {
    ReplyError(req, res, 404, "no model named '" + OneLine(mp.name, 64) + "'");
    if (mp.verb == "predict") metrics.RecordPredict(-1, 404, SecondsSince(start), 0);
    return;
  }
  if (mp.verb == "reload") return Reload(model, req, res);
  Predict(model, req, res, body, start);
}

void ModelServer::Impl::Predict(int model, const httplib::Request& req, httplib::Response& res,
                                const std::string& body, Clock::time_point start) {
  ServedModel& m = registry.model(model);
  int64_t rows = 0;
  auto fail = [&](const Status& s) {
    ReplyError(req, res, HttpCode(s), m.name + ": " + s.message());
    metrics.RecordPredict(model, res.status, SecondsSince(start), 0);
  };
  auto format = FormatFromContentType(req.get_header_value("Content-Type"));
  if (!format.ok()) return fail(format.status());
  int64_t timeout_ms = options.timeout_ms;
  if (req.has_header("X-Deadline-Ms")) {
    auto ms = ParseDeadlineHeader(req.get_header_value("X-Deadline-Ms"));
    if (!ms.ok()) return fail(ms.status());
    timeout_ms = timeout_ms > 0 ? std::min(timeout_ms, *ms) : *ms;
  }
  const BatchingSession::Clock::time_point deadline =
      timeout_ms > 0 ? start + std::chrono::milliseconds(timeout_ms) : BatchingSession::Clock::time_point::max();
  // Inputs and outputs are the same across reloads (ModelRegistry refuses a changed signature).
  const std::shared_ptr<const Session> session = m.batching->session();
  ParseLimits limits;
  limits.max_decoded_bytes = options.max_body_bytes;
  auto inputs = ParsePredictBody(*format, body, session->inputs(), limits);
  if (!inputs.ok()) return fail(inputs.status());
  if (!inputs->empty()) {  // a model may have no inputs at all
    const Tensor& first = inputs->begin()->second;
    rows = first.rank() > 0 ? first.dims()[0] : 1;
  }
  auto outputs = OneBatch(*inputs) ? m.batching->Run(*inputs, deadline) : RunAlone(m, *session, *inputs, deadline);
  if (!outputs.ok()) return fail(outputs.status());
  BodyFormat out_format = *format;
  auto encoded = EncodeOutputs(*format, session->outputs(), *outputs, &out_format);
  if (!encoded.ok()) return fail(encoded.status().code() == StatusCode::kResourceExhausted
                                     ? encoded.status()
                                     : Internal(encoded.status().message()));
  Reply(res, 200, std::move(*encoded), ContentTypeOf(out_format));
  metrics.RecordPredict(model, 200, SecondsSince(start), rows);
}

void ModelServer::Impl::Reload(int model, const httplib::Request& req, httplib::Response& res) {
  ServedModel& m = registry.model(model);
  double load_ms = 0;
  const Status st = registry.Reload(model, &load_ms);
  metrics.RecordReload(model, st.ok());
  if (!st.ok())
    return ReplyError(req, res, 500,
                      "reloading '" + m.name + "' from " + m.path + " failed; still serving the previous model: " +
                          st.message());
  LogLine("reloaded " + m.name + " from " + m.path + " (generation " + std::to_string(m.generation.load()) + ", " +
          std::to_string(static_cast<int64_t>(load_ms)) + " ms)");
  Reply(res, 200,
        json{{"model", m.name}, {"path", m.path}, {"reloaded", true}, {"generation", m.generation.load()},
             {"load_ms", load_ms}}
                .dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
        "application/json");
}

ModelServer::ModelServer(ModelRegistry& registry, Metrics& metrics, ServerOptions options)
    : impl_(std::make_unique<Impl>(registry, metrics, std::move(options))) {
  impl_->Install();
}

ModelServer::~ModelServer() = default;

StatusOr<int> ModelServer::Bind() {
  const ServerOptions& o = impl_->options;
  if (o.port == 0) {
    const int port = impl_->svr.bind_to_any_port(o.host);
    if (port <= 0) return IoError("cannot listen on " + o.host + " (any port)");
    impl_->svr.WidenBacklog();
    return port;
  }
  if (!impl_->svr.bind_to_port(o.host, o.port))
    return IoError("cannot listen on " + o.host + ":" + std::to_string(o.port) + " (in use, or not an address here?)");
  impl_->svr.WidenBacklog();
  return o.port;
}

void ModelServer::Serve() {
  if (!impl_->draining.load()) impl_->svr.listen_after_bind();
  impl_->served.store(true);
}

void ModelServer::Stop() {
  impl_->draining.store(true);
  // httplib's stop() does nothing before listen has started: wait for one or the other.
  while (!impl_->served.load()) {
    if (impl_->svr.is_running()) {
      impl_->svr.stop();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void ModelServer::ReloadAll() {
  for (size_t i = 0; i < impl_->registry.size(); ++i) {
    ServedModel& m = impl_->registry.model(static_cast<int>(i));
    double load_ms = 0;
    const Status st = impl_->registry.Reload(static_cast<int>(i), &load_ms);
    impl_->metrics.RecordReload(static_cast<int>(i), st.ok());
    if (st.ok())
      LogLine("reloaded " + m.name + " from " + m.path + " (SIGHUP; generation " + std::to_string(m.generation.load()) +
              ", " + std::to_string(static_cast<int64_t>(load_ms)) + " ms)");
    else
      LogLine("reloading " + m.name + " from " + m.path + " failed (SIGHUP); still serving the previous model: " +
              st.message());
  }
}

}  // namespace whittle::serve
