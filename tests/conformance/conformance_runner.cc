// Runs the ONNX backend conformance suite (Debian package libonnx-testdata) on Whittle's CPU
// runtime. Every case runs unless its name is listed in the expectations file with a reason:
//   <suite>/<case>  skip  <reason>      not run (e.g. an op Whittle does not implement)
//   <suite>/<case>  fail  <reason>      runs; must fail (a pass is reported so the list stays honest)
// A case whose model needs something unsupported and that is not listed counts as failed, so
// the list is complete. Prints "N passed, M failed, K skipped"; exit 1 when M > 0.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ir/device.h"
#include "lib/onnx/model_io.h"
#include "whittle/session.h"

namespace {

using namespace whittle;

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> r;
  DIR* d = opendir(dir.c_str());
  if (!d) return r;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") r.push_back(n);
  }
  closedir(d);
  std::sort(r.begin(), r.end());
  return r;
}

bool IsDir(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsFile(const std::string& p) {
  struct stat st{};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

struct Expectation {
  std::string kind, reason;
};

template <class T>
std::string CompareT(const Tensor& got, const Tensor& want, double atol, double rtol) {
  const T* g = got.data<T>();
  const T* w = want.data<T>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double x = static_cast<double>(g[i]), y = static_cast<double>(w[i]);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (x == y) continue;
    if (std::fabs(x - y) <= atol + rtol * std::fabs(y)) continue;
    std::ostringstream os;
    os << "element " << i << ": got " << x << ", expected " << y;
    return os.str();
  }
  return "";
}

// "" when equal within tolerance, else a description.
std::string Compare(const Tensor& got, const Tensor& want, double atol, double rtol) {
  // Sequences element by element; an optional without a value only matches one.
  if (got.is_no_value() || want.is_no_value())
    return got.is_no_value() == want.is_no_value() ? "" : got.is_no_value() ? "no value, expected one" : "a value, expected none";
  if (got.is_sequence() != want.is_sequence()) return got.is_sequence() ? "a sequence, expected a tensor" : "a tensor, expected a sequence";
  if (got.is_sequence()) {
    if (got.elements().size() != want.elements().size())
      return std::to_string(got.elements().size()) + " elements, expected " + std::to_string(want.elements().size());
    for (size_t k = 0; k < got.elements().size(); ++k) {
      std::string d = Compare(got.elements()[k], want.elements()[k], atol, rtol);
      if (!d.empty()) return "element " + std::to_string(k) + ": " + d;
    }
    return "";
  }
  if (got.dtype() != want.dtype())
    return std::string("dtype ") + DTypeName(got.dtype()) + ", expected " + DTypeName(want.dtype());
  if (got.dims() != want.dims()) return "shape " + DimsToString(got.dims()) + ", expected " + DimsToString(want.dims());
  switch (got.dtype()) {
    case DType::kFloat32: return CompareT<float>(got, want, atol, rtol);
    case DType::kFloat64: return CompareT<double>(got, want, atol, rtol);
    default: return got.BitwiseEquals(want) ? "" : "values differ (exact comparison)";
  }
}

// Returns "" on pass; sets *unsupported when the model needs something Whittle lacks.
std::string RunCase(const std::string& dir, bool* unsupported, int threads, Backend backend) {
  *unsupported = false;
  SessionOptions so;
  so.num_threads = threads;
  so.backend = backend;
  auto session = Session::Load(dir + "/model.onnx", so);
  if (!session.ok()) {
    *unsupported = session.status().code() == StatusCode::kUnimplemented;
    return session.status().message();
  }
  int sets = 0;
  for (const std::string& sub : ListDir(dir)) {
    if (sub.rfind("test_data_set_", 0) != 0 || !IsDir(dir + "/" + sub)) continue;
    ++sets;
    const std::string sd = dir + "/" + sub;
    std::map<std::string, Tensor> feeds;
    const auto& ins = (*session)->inputs();
    for (size_t i = 0;; ++i) {
      const std::string p = sd + "/input_" + std::to_string(i) + ".pb";
      if (!IsFile(p)) break;
      std::string name;
      auto t = LoadValueProtoFile(p, i < ins.size() ? ins[i].kind : ValueKind::kTensor, &name);
      if (!t.ok()) return "reading " + p + ": " + t.status().message();
      if (name.empty() && i < ins.size()) name = ins[i].name;
      // ONNX 1.12's test data stores bfloat16 tensors with data_type UINT16: same bits.
      for (const IoInfo& io : ins)
        if (io.name == name && io.dtype == DType::kBFloat16 && t->dtype() == DType::kUInt16)
          *t = Tensor(DType::kBFloat16, t->dims(), t->buffer(), t->offset());
      feeds[name] = *t;
    }
    auto outs = (*session)->Run(feeds);
    if (!outs.ok()) {
      *unsupported = outs.status().code() == StatusCode::kUnimplemented;
      return outs.status().message();
    }
    for (size_t i = 0;; ++i) {
      const std::string p = sd + "/output_" + std::to_string(i) + ".pb";
      if (!IsFile(p)) break;
      if (i >= outs->size()) return "missing output " + std::to_string(i);
      auto want = LoadValueProtoFile(p, (*session)->outputs()[i].kind);
      if (!want.ok()) return "reading " + p + ": " + want.status().message();
      if ((*outs)[i].dtype() == DType::kBFloat16 && want->dtype() == DType::kUInt16)
        *want = Tensor(DType::kBFloat16, want->dims(), want->buffer(), want->offset());
      std::string diff = Compare((*outs)[i], *want, 1e-5, 1e-3);
      if (!diff.empty()) return sub + " output " + std::to_string(i) + " (" + (*session)->outputs()[i].name + "): " + diff;
    }
  }
  if (sets == 0) return "no test_data_set_* folder";
  return "";
}

std::string OneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\t') c = ' ';
  if (s.size() > 300) s = s.substr(0, 300) + "...";
  return s;
}

// The part of an error worth keeping as a reason: without the model path prefix.
std::string Reason(const std::string& err) {
  std::string r = OneLine(err);
  const size_t p = r.find("model.onnx': ");
  if (p != std::string::npos) r = r.substr(p + 13);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = "/usr/share/libonnx-testdata/data", expectations, write_to, filter;
  bool verbose = false;
  int threads = 2;
  Backend backend = Backend::kCpu;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "onnx_conformance: error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data") data = next();
    else if (a == "--expectations") expectations = next();
    else if (a == "--write-expectations") write_to = next();
    else if (a == "--filter") filter = next();
    else if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--device") {
      const std::string d = next();
      if (d != "cpu" && d != "cuda") {
        std::fprintf(stderr, "onnx_conformance: error: --device must be cpu or cuda, got '%s'\n", d.c_str());
        return 2;
      }
      backend = d == "cuda" ? Backend::kCuda : Backend::kCpu;
    } else if (a == "-v" || a == "--verbose") verbose = true;
    else if (a == "--help" || a == "-h") {
      std::printf(
          "onnx_conformance [--data DIR] [--expectations FILE] [--write-expectations FILE] [--filter SUBSTR] "
          "[--threads N] [--device cpu|cuda] [-v]\nRuns the ONNX backend test data (node, pytorch-converted, "
          "pytorch-operator, simple) on Whittle's runtime (the CPU, or the CUDA backend with CPU fallback for nodes "
          "it has no kernel for; the same expectations file).\n");
      return 0;
    } else {
      std::fprintf(stderr, "onnx_conformance: error: unknown argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  RegisterAllKernels();
  if (std::string why; !DeviceAvailable(BackendDevice(backend), &why)) {
    std::fprintf(stderr, "onnx_conformance: error: device '%s' is not available: %s\n", BackendName(backend), why.c_str());
    return 1;
  }
  if (!IsDir(data)) {
    std::fprintf(stderr, "onnx_conformance: error: test data folder '%s' not found (install libonnx-testdata)\n", data.c_str());
    return 1;
  }
  std::map<std::string, Expectation> expect;
  if (!expectations.empty()) {
    std::ifstream in(expectations);
    if (!in) {
      std::fprintf(stderr, "onnx_conformance: error: cannot read %s\n", expectations.c_str());
      return 1;
    }
    std::string line;
    int ln = 0;
    while (std::getline(in, line)) {
      ++ln;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string name, kind, reason;
      ls >> name >> kind;
      std::getline(ls, reason);
      reason.erase(0, reason.find_first_not_of(' '));
      if ((kind != "skip" && kind != "fail") || reason.empty()) {
        std::fprintf(stderr, "onnx_conformance: error: %s:%d: expected '<suite>/<case> skip|fail <reason>'\n",
                     expectations.c_str(), ln);
        return 1;
      }
      expect[name] = {kind, reason};
    }
  }
  int passed = 0, failed = 0, skipped = 0, xfailed = 0;
  std::ofstream wout;
  if (!write_to.empty()) wout.open(write_to);
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    const std::string sdir = data + "/" + suite;
    for (const std::string& c : ListDir(sdir)) {
      const std::string name = std::string(suite) + "/" + c;
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      if (!IsFile(sdir + "/" + c + "/model.onnx")) continue;
      auto it = expect.find(name);
      if (it != expect.end() && it->second.kind == "skip") {
        ++skipped;
        if (verbose) std::printf("SKIP  %s: %s\n", name.c_str(), it->second.reason.c_str());
        continue;
      }
      bool unsupported = false;
      std::string err = RunCase(sdir + "/" + c, &unsupported, threads, backend);
      const bool listed_fail = it != expect.end() && it->second.kind == "fail";
      if (err.empty()) {
        if (listed_fail) {
          ++failed;
          std::printf("XPASS %s: listed as expected to fail (%s) but passed; remove it from the list\n", name.c_str(),
                      it->second.reason.c_str());
        } else {
          ++passed;
          if (verbose) std::printf("PASS  %s\n", name.c_str());
        }
        continue;
      }
      if (wout) wout << name << (unsupported ? " skip " : " fail ") << Reason(err) << "\n";
      if (listed_fail) {
        ++xfailed;
        ++skipped;
        if (verbose) std::printf("XFAIL %s: %s\n", name.c_str(), OneLine(err).c_str());
      } else {
        ++failed;
        std::printf("FAIL  %s: %s%s\n", name.c_str(), unsupported ? "[unsupported, not listed] " : "", OneLine(err).c_str());
      }
    }
  }
  std::printf("onnx conformance (%s): %d expected failures and skips listed in the expectations file\n", data.c_str(),
              skipped);
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  (void)xfailed;
  return failed == 0 ? 0 : 1;
}
