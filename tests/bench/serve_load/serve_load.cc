// serve_load: a load generator for serve-model, on loopback only (issue 46's must-holds). Modes,
// combinable, each bounded in requests and in wall time (--max-seconds), so it always stops:
//   throughput  N keep-alive clients (threads with an httplib::Client each) send --requests predict
//               requests per concurrency level; prints requests/s and p50/p90/p99 latency per level
//               (--repeat R: R runs per level, the medians reported), and counts every non-200 answer
//               or transport failure as an error;
//   --rss-pid   samples the server's VmRSS (/proc/PID/status) when the completed count passes each
//               of --rss-at (e.g. 10000,100000), and prints the change;
//   --reloads K during the load, K times: copy --reload-src (A.onnx,B.onnx,...: each in turn) to
//               --reload-dst + ".tmp", rename it over --reload-dst (atomic), POST
//               /v1/models/NAME:reload, expect 200;
//   --malformed M  M hostile requests over raw sockets (bad JSON, wrong dtype and rank, an unknown
//               model, a body over the limit, an endless chunked body, a disconnect mid-body, a client
//               that stalls, garbage request lines, huge headers, deep nesting); each must get a 4xx or
//               a closed connection, and /healthz must still answer 200 afterwards.
// Exit status 0 when every check held, 1 otherwise, 2 for a bad command line.
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string model = "cnn", input = "image", format = "json", body_file, content_type;
  std::vector<int64_t> shape = {1, 1, 28, 28};
  std::vector<int> concurrency = {1, 4, 16, 32};
  int64_t requests = 2000;
  int repeat = 1;
  double max_seconds = 600;
  int rss_pid = 0;
  std::vector<int64_t> rss_at;
  std::vector<std::string> reload_src;  // used in turn
  std::string reload_dst;
  int reloads = 0;
  int malformed = 0;
  int64_t big_body_mb = 100;
  int stall_s = 6;
  bool json = false;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "serve_load: %s\n"
               "usage: serve_load --port P [--host 127.0.0.1] [--model cnn] [--input image] [--shape 1,1,28,28]\n"
               "       [--format json|npy | --body FILE --content-type T] [--concurrency 1,4,16,32]\n"
               "       [--requests N] [--repeat R] [--max-seconds S] [--rss-pid PID --rss-at 10000,100000]\n"
               "       [--reloads K --reload-src SRC.onnx[,SRC2.onnx...] --reload-dst SERVED.onnx]\n"
               "       [--malformed M [--big-body-mb 100] [--stall-s 6]] [--json]\n",
               why.c_str());
  std::exit(2);
}

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0) Usage("bad number list '" + s + "'");
    out.push_back(v);
  }
  if (out.empty()) Usage("empty list");
  return out;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--host") o.host = next();
    else if (a == "--port") o.port = std::atoi(next().c_str());
    else if (a == "--model") o.model = next();
    else if (a == "--input") o.input = next();
    else if (a == "--shape") o.shape = ParseList(next());
    else if (a == "--format") o.format = next();
    else if (a == "--body") o.body_file = next();
    else if (a == "--content-type") o.content_type = next();
    else if (a == "--concurrency") {
      o.concurrency.clear();
      for (int64_t c : ParseList(next())) o.concurrency.push_back(static_cast<int>(c));
    } else if (a == "--requests") o.requests = std::atoll(next().c_str());
    else if (a == "--repeat") o.repeat = std::atoi(next().c_str());
    else if (a == "--max-seconds") o.max_seconds = std::atof(next().c_str());
    else if (a == "--rss-pid") o.rss_pid = std::atoi(next().c_str());
    else if (a == "--rss-at") o.rss_at = ParseList(next());
    else if (a == "--reload-src") {
      std::stringstream ss(next());
      std::string item;
      while (std::getline(ss, item, ',')) o.reload_src.push_back(item);
    }
    else if (a == "--reload-dst") o.reload_dst = next();
    else if (a == "--reloads") o.reloads = std::atoi(next().c_str());
    else if (a == "--malformed") o.malformed = std::atoi(next().c_str());
    else if (a == "--big-body-mb") o.big_body_mb = std::atoll(next().c_str());
    else if (a == "--stall-s") o.stall_s = std::atoi(next().c_str());
    else if (a == "--json") o.json = true;
    else Usage("unknown argument '" + a + "'");
  }
  // Loopback only: this tool floods whatever it is pointed at.
  if (o.host != "127.0.0.1" && o.host != "localhost") Usage("--host must be 127.0.0.1 (loopback only)");
  o.host = "127.0.0.1";
  if (o.port <= 0 || o.port > 65535) Usage("--port is required (1-65535)");
  if (o.requests < 0 || o.repeat < 1 || o.max_seconds <= 0) Usage("bad --requests, --repeat or --max-seconds");
  for (int c : o.concurrency)
    if (c < 1 || c > 1024) Usage("concurrency must be 1 to 1024");
  if (o.reloads > 0 && (o.reload_src.empty() || o.reload_dst.empty())) Usage("--reloads needs --reload-src and --reload-dst");
  if (o.format != "json" && o.format != "npy") Usage("--format is json or npy");
  return o;
}

// ---- request bodies -------------------------------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) Usage("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void JsonNested(std::string* out, const std::vector<int64_t>& shape, size_t d, std::mt19937* rng) {
  if (d == shape.size()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.6g", std::uniform_real_distribution<float>(0.f, 1.f)(*rng));
    out->append(buf);
    return;
  }
  out->push_back('[');
  for (int64_t i = 0; i < shape[d]; ++i) {
    if (i) out->push_back(',');
    JsonNested(out, shape, d + 1, rng);
  }
  out->push_back(']');
}

// A float32 .npy (version 1.0) of random values in [0, 1).
std::string NpyBody(const std::vector<int64_t>& shape, std::mt19937* rng) {
  std::string dims;
  int64_t n = 1;
  for (int64_t d : shape) {
    dims += std::to_string(d) + ",";
    n *= d;
  }
  if (shape.size() > 1) dims.pop_back();
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  for (int64_t i = 0; i < n; ++i) {
    const float v = std::uniform_real_distribution<float>(0.f, 1.f)(*rng);
    out.append(reinterpret_cast<const char*>(&v), 4);
  }
  return out;
}

struct Body {
  std::string bytes, content_type;
};

Body MakeBody(const Options& o) {
  if (!o.body_file.empty()) return {ReadFile(o.body_file), o.content_type.empty() ? "application/json" : o.content_type};
  std::mt19937 rng(46);
  if (o.format == "npy") return {NpyBody(o.shape, &rng), "application/x-npy"};
  std::string s = "{\"inputs\":{\"" + o.input + "\":";
  JsonNested(&s, o.shape, 0, &rng);
  s += "}}";
  return {s, "application/json"};
}

// ---- throughput, soak and reload ------------------------------------------------------------

int64_t VmRssKb(int pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  return -1;
}

struct LevelResult {
  int concurrency = 0;
  int64_t ok = 0, errors = 0;
  double seconds = 0, rps = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  std::vector<std::pair<int64_t, int64_t>> rss;  // (completed, VmRSS kB)
  int reloads_ok = 0, reloads_failed = 0;
  std::string first_error;
};

double Percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

bool CopyAndRename(const std::string& src, const std::string& dst) {
  const std::string tmp = dst + ".tmp";
  {
    std::ifstream in(src, std::ios::binary);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!in || !out) return false;
    out << in.rdbuf();
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), dst.c_str()) == 0;
}

LevelResult RunLevel(const Options& o, const Body& body, int concurrency, Clock::time_point stop_at) {
  LevelResult r;
  r.concurrency = concurrency;
  const std::string path = "/v1/models/" + o.model + ":predict";
  std::atomic<int64_t> next{0}, completed{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<double> latencies;
  latencies.reserve(static_cast<size_t>(o.requests));
  size_t rss_next = 0;
  auto client_loop = [&]() {
    httplib::Client cli(o.host, o.port);
    cli.set_keep_alive(true);
    cli.set_tcp_nodelay(true);
    cli.set_connection_timeout(5, 0);
    cli.set_read_timeout(30, 0);
    cli.set_write_timeout(30, 0);
    std::vector<double> mine;
    int64_t ok = 0, errors = 0;
    std::string first_error;
    while (!stop.load(std::memory_order_relaxed) && next.fetch_add(1) < o.requests) {
      if (Clock::now() > stop_at) {
        stop = true;
        break;
      }
      const auto t0 = Clock::now();
      auto res = cli.Post(path, body.bytes, body.content_type);
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (res && res->status == 200) {
        ++ok;
        mine.push_back(ms);
      } else {
        ++errors;
        if (first_error.empty())
          first_error = res ? "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 300)
                            : "transport error " + httplib::to_string(res.error());
      }
      const int64_t done = completed.fetch_add(1) + 1;
      if (o.rss_pid > 0) {
        std::lock_guard<std::mutex> lock(mu);
        while (rss_next < o.rss_at.size() && done >= o.rss_at[rss_next]) {
          r.rss.emplace_back(done, VmRssKb(o.rss_pid));
          ++rss_next;
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    latencies.insert(latencies.end(), mine.begin(), mine.end());
    r.ok += ok;
    r.errors += errors;
    if (r.first_error.empty()) r.first_error = first_error;
  };
  auto reload_loop = [&]() {
    httplib::Client cli(o.host, o.port);
    cli.set_read_timeout(60, 0);
    for (int k = 0; k < o.reloads && !stop.load(); ++k) {
      const int64_t at = o.requests * (k + 1) / (o.reloads + 1);
      while (completed.load() < at && !stop.load() && Clock::now() < stop_at)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      if (stop.load() || Clock::now() >= stop_at) break;
      bool good = CopyAndRename(o.reload_src[static_cast<size_t>(k) % o.reload_src.size()], o.reload_dst);
      if (good) {
        auto res = cli.Post("/v1/models/" + o.model + ":reload", "", "application/json");
        good = res && res->status == 200;
        if (!good && r.first_error.empty())
          r.first_error = res ? "reload: HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 300)
                              : "reload: transport error";
      }
      ++(good ? r.reloads_ok : r.reloads_failed);
    }
  };
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < concurrency; ++i) threads.emplace_back(client_loop);
  std::thread reloader;
  if (o.reloads > 0) reloader = std::thread(reload_loop);
  for (auto& t : threads) t.join();
  stop = true;
  if (reloader.joinable()) reloader.join();
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.rps = static_cast<double>(r.ok) / std::max(r.seconds, 1e-9);
  r.p50 = Percentile(latencies, 0.50);
  r.p90 = Percentile(latencies, 0.90);
  r.p99 = Percentile(latencies, 0.99);
  r.max = latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end());
  if (r.ok + r.errors < o.requests) {
    r.errors += o.requests - r.ok - r.errors;  // not sent before --max-seconds: counted as failures
    if (r.first_error.empty()) r.first_error = "stopped by --max-seconds";
  }
  return r;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// ---- malformed requests ---------------------------------------------------------------------

// A raw connection with send/receive timeouts; MSG_NOSIGNAL so a reset is an error, not SIGPIPE.
class Raw {
 public:
  Raw(int port, int timeout_s) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    timeval tv{timeout_s, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) Close();
  }
  ~Raw() { Close(); }
  bool ok() const { return fd_ >= 0; }
  bool Send(const std::string& s) {
    size_t off = 0;
    while (fd_ >= 0 && off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return fd_ >= 0;
  }
  // The status code of the answer, 0 when the connection closed (or timed out) without one.
  int ReadStatus() {
    std::string got;
    char buf[4096];
    while (fd_ >= 0 && got.find("\r\n") == std::string::npos && got.size() < 65536) {
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    if (got.rfind("HTTP/1.", 0) != 0 || got.size() < 12) return 0;
    return std::atoi(got.c_str() + 9);
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string Post(const std::string& path, const std::string& ct, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: " + ct +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct Malformed {
  const char* name;
  // Sends the request; returns the status (0: closed without an answer). `expect_close` cases may
  // also end without one.
  int (*run)(const Options& o, const Body& good);
};

std::string PredictPath(const Options& o) { return "/v1/models/" + o.model + ":predict"; }

const Malformed kMalformed[] = {
    {"bad JSON", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "application/json", "{\"inputs\": {\"" + o.input + "\": [[1, 2,"));
       return c.ReadStatus();
     }},
    {"wrong dtype (strings)", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "application/json", "{\"inputs\": {\"" + o.input + "\": [[\"a\", \"b\"]]}}"));
       return c.ReadStatus();
     }},
    {"wrong dtype (int64 .npy)", [](const Options& o, const Body&) {
       std::string header = "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 4), }";
       while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
       header.push_back('\n');
       std::string npy = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size()) + '\0' + header +
                         std::string(32, '\0');
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "application/x-npy", npy));
       return c.ReadStatus();
     }},
    {"wrong rank", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "application/json", "{\"inputs\": {\"" + o.input + "\": [[0.5, 0.25]]}}"));
       return c.ReadStatus();
     }},
    {"unknown model", [](const Options& o, const Body& good) {
       Raw c(o.port, 10);
       c.Send(Post("/v1/models/no-such-model:predict", good.content_type, good.bytes));
       return c.ReadStatus();
     }},
    {"body over the limit", [](const Options& o, const Body&) {
       Raw c(o.port, 30);
       const int64_t n = o.big_body_mb << 20;
       c.Send("POST " + PredictPath(o) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
              "Content-Type: application/json\r\nContent-Length: " + std::to_string(n) + "\r\n\r\n");
       const std::string chunk(1 << 20, ' ');
       for (int64_t sent = 0; sent < n; sent += static_cast<int64_t>(chunk.size()))
         if (!c.Send(chunk)) break;  // the server may answer and close early
       return c.ReadStatus();
     }},
    {"endless chunked body", [](const Options& o, const Body&) {
       Raw c(o.port, 30);
       c.Send("POST " + PredictPath(o) + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
              "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
       char head[16];
       std::snprintf(head, sizeof(head), "%x\r\n", 1 << 20);
       const std::string chunk = head + std::string(1 << 20, ' ') + "\r\n";
       for (int64_t sent = 0; sent < (o.big_body_mb << 20); sent += 1 << 20)
         if (!c.Send(chunk)) break;
       return c.ReadStatus();
     }},
    {"disconnect mid-body", [](const Options& o, const Body& good) {
       Raw c(o.port, 10);
       std::string req = Post(PredictPath(o), good.content_type, good.bytes);
       c.Send(req.substr(0, req.size() / 2));
       c.Close();
       return -1;  // nothing to read: the server must just survive it
     }},
    {"garbage request line", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send("\x16\x03\x01 garbage \xff\xfe\r\n\r\n");
       return c.ReadStatus();
     }},
    {"huge header", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(64 * 1024, 'x') + "\r\n\r\n");
       return c.ReadStatus();
     }},
    {"deep nesting", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "application/json",
                   "{\"inputs\": {\"" + o.input + "\": " + std::string(100000, '[') + "}}"));
       return c.ReadStatus();
     }},
    {"unsupported Content-Type", [](const Options& o, const Body& good) {
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "text/csv", good.bytes));
       return c.ReadStatus();
     }},
    {"truncated .npy", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "application/x-npy", std::string("\x93NUMPY\x01\x00\xff\xff{'descr'", 18)));
       return c.ReadStatus();
     }},
    {"garbage .npz", [](const Options& o, const Body&) {
       Raw c(o.port, 10);
       c.Send(Post(PredictPath(o), "application/x-npz", std::string("PK\x03\x04", 4) + std::string(200, '\x01')));
       return c.ReadStatus();
     }},
};

// A client that sends half a request and stalls past the server's I/O timeout: the server must drop
// it (closed connection or a 408) and keep serving meanwhile.
int StallingClient(const Options& o, const Body& good) {
  Raw c(o.port, o.stall_s + 10);
  const std::string req = Post(PredictPath(o), good.content_type, good.bytes);
  c.Send(req.substr(0, req.size() / 3));
  std::this_thread::sleep_for(std::chrono::seconds(o.stall_s));
  c.Send(req.substr(req.size() / 3));  // may fail: the server has closed it
  return c.ReadStatus();
}

bool RunMalformed(const Options& o, const Body& good, Clock::time_point stop_at) {
  const size_t kinds = sizeof(kMalformed) / sizeof(kMalformed[0]);
  std::vector<int> bad_per_kind(kinds, 0), count_per_kind(kinds, 0);
  int failures = 0;
  // Two stalling clients run alongside the rest.
  std::vector<int> stall_status(2, -2);
  std::vector<std::thread> stallers;
  for (size_t i = 0; i < stall_status.size(); ++i)
    stallers.emplace_back([&, i] { stall_status[i] = StallingClient(o, good); });
  for (int i = 0; i < o.malformed && Clock::now() < stop_at; ++i) {
    const size_t k = static_cast<size_t>(i) % kinds;
    const int status = kMalformed[k].run(o, good);
    ++count_per_kind[k];
    const bool fine = status == -1 || status == 0 || (status >= 400 && status < 500);
    if (!fine) {
      ++bad_per_kind[k];
      ++failures;
      std::fprintf(stderr, "serve_load: malformed '%s' got HTTP %d (expected 4xx or a closed connection)\n",
                   kMalformed[k].name, status);
    }
  }
  for (auto& t : stallers) t.join();
  for (int s : stall_status)
    if (!(s == 0 || (s >= 400 && s < 500))) {
      ++failures;
      std::fprintf(stderr, "serve_load: stalling client got HTTP %d (expected a closed connection or 408)\n", s);
    }
  httplib::Client cli(o.host, o.port);
  cli.set_read_timeout(10, 0);
  auto health = cli.Get("/healthz");
  const bool healthy = health && health->status == 200;
  auto again = cli.Post(PredictPath(o), good.bytes, good.content_type);
  const bool serving = again && again->status == 200;
  for (size_t k = 0; k < kinds; ++k)
    std::printf("malformed %-26s sent %4d  not 4xx/closed %d\n", kMalformed[k].name, count_per_kind[k],
                bad_per_kind[k]);
  std::printf("stalling clients: %d, statuses %d %d (0: closed)\n", static_cast<int>(stall_status.size()),
              stall_status[0], stall_status[1]);
  std::printf("after %d malformed requests: /healthz %s, predict %s\n", o.malformed, healthy ? "200" : "FAILED",
              serving ? "200" : "FAILED");
  return failures == 0 && healthy && serving;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  const Options o = Parse(argc, argv);
  const Body body = MakeBody(o);
  const Clock::time_point stop_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(o.max_seconds * 1000));
  bool all_ok = true;
  if (o.requests > 0) {
    if (!o.json)
      std::printf("%6s %9s %7s %9s %10s %8s %8s %8s %8s\n", "conc", "requests", "errors", "seconds", "req/s", "p50 ms",
                  "p90 ms", "p99 ms", "max ms");
    for (int c : o.concurrency) {
      std::vector<LevelResult> runs;
      for (int rep = 0; rep < o.repeat; ++rep) runs.push_back(RunLevel(o, body, c, stop_at));
      auto med = [&](double LevelResult::*f) {
        std::vector<double> v;
        for (const auto& r : runs) v.push_back(r.*f);
        return Median(v);
      };
      int64_t errors = 0, reloads_ok = 0, reloads_failed = 0;
      std::string first_error;
      for (const auto& r : runs) {
        errors += r.errors;
        reloads_ok += r.reloads_ok;
        reloads_failed += r.reloads_failed;
        if (first_error.empty()) first_error = r.first_error;
      }
      all_ok &= errors == 0 && reloads_failed == 0 && reloads_ok == static_cast<int64_t>(o.reloads) * o.repeat;
      if (o.json) {
        std::printf("{\"concurrency\": %d, \"requests\": %lld, \"runs\": %d, \"errors\": %lld, \"rps\": %.1f, "
                    "\"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f, \"reloads_ok\": %lld, "
                    "\"reloads_failed\": %lld",
                    c, static_cast<long long>(o.requests), o.repeat, static_cast<long long>(errors),
                    med(&LevelResult::rps), med(&LevelResult::p50), med(&LevelResult::p90), med(&LevelResult::p99),
                    med(&LevelResult::max), static_cast<long long>(reloads_ok), static_cast<long long>(reloads_failed));
        std::printf(", \"rss_kb\": [");
        for (size_t i = 0; i < runs[0].rss.size(); ++i)
          std::printf("%s[%lld, %lld]", i ? ", " : "", static_cast<long long>(runs[0].rss[i].first),
                      static_cast<long long>(runs[0].rss[i].second));
        std::printf("]}\n");
      } else {
        std::printf("%6d %9lld %7lld %9.2f %10.1f %8.3f %8.3f %8.3f %8.3f\n", c, static_cast<long long>(o.requests),
                    static_cast<long long>(errors), med(&LevelResult::seconds), med(&LevelResult::rps),
                    med(&LevelResult::p50), med(&LevelResult::p90), med(&LevelResult::p99), med(&LevelResult::max));
        for (const auto& [done, kb] : runs[0].rss) std::printf("  VmRSS after %lld requests: %lld kB\n",
                                                               static_cast<long long>(done), static_cast<long long>(kb));
        if (runs[0].rss.size() >= 2) {
          const double a = static_cast<double>(runs[0].rss.front().second), b = static_cast<double>(runs[0].rss.back().second);
          std::printf("  VmRSS change: %+.2f %%\n", 100.0 * (b - a) / a);
        }
        if (o.reloads > 0) std::printf("  reloads: %lld ok, %lld failed\n", static_cast<long long>(reloads_ok),
                                       static_cast<long long>(reloads_failed));
      }
      if (!first_error.empty()) std::fprintf(stderr, "serve_load: first error at %d clients: %s\n", c, first_error.c_str());
      std::fflush(stdout);
    }
  }
  if (o.malformed > 0) all_ok &= RunMalformed(o, body, stop_at);
  return all_ok ? 0 : 1;
}
