#include "tools/common/cli.h"

#include <exception>
#include <new>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "lib/ir/memory_meter.h"
#include "lib/ir/run_deadline.h"

namespace whittle::cli {

int GuardedMain(const std::string& tool, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::bad_alloc& e) {
    return Fail(tool, std::string("out of memory: ") + e.what());
  } catch (const std::exception& e) {
    return Fail(tool, e.what());
  }
}

namespace {
// The number s starts with (*v) and the unit text after it (*rest); 0 when s has no leading
// number, else the characters the number took.
size_t LeadingNumber(const std::string& s, double* v, std::string* rest) {
  size_t used = 0;
  try {
    *v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  *rest = s.substr(used);
  return used;
}
}  // namespace

StatusOr<int64_t> ParseByteSize(const std::string& s, const std::string& flag) {
  double v = 0;
  std::string rest;
  size_t used = LeadingNumber(s, &v, &rest);
  int64_t unit = 1;
  if (rest == "K" || rest == "k") unit = int64_t{1} << 10;
  else if (rest == "M" || rest == "m") unit = int64_t{1} << 20;
  else if (rest == "G" || rest == "g") unit = int64_t{1} << 30;
  else if (rest == "T" || rest == "t") unit = int64_t{1} << 40;
  else if (!rest.empty()) used = 0;
  if (used == 0 || !(v >= 0) || v * static_cast<double>(unit) > 9.0e18)
    return InvalidArgument(flag + " expects bytes or a size such as 512M or 8G" +
                           (flag == "--max-memory" ? " (0: no budget)" : "") + ", got '" + s + "'");
  return static_cast<int64_t>(v * static_cast<double>(unit));
}

StatusOr<int64_t> ParseDurationMs(const std::string& s) {
  double v = 0;
  std::string rest;
  size_t used = LeadingNumber(s, &v, &rest);
  double unit = 1000;  // seconds
  if (rest == "ms") unit = 1;
  else if (rest == "m" || rest == "min") unit = 60000;
  else if (rest != "s" && !rest.empty()) used = 0;
  if (used == 0 || !(v >= 0) || v * unit > 9.0e15)
    return InvalidArgument("--max-run-time expects seconds or a duration such as 500ms, 2s or 5m (0: none), got '" +
                           s + "'");
  const double ms = v * unit;
  return ms > 0 && ms < 1 ? int64_t{1} : static_cast<int64_t>(ms);  // a positive budget stays one
}

void AddResourceLimitOptions(CLI::App& app, ResourceLimits& limits) {
  app.add_option("--max-memory", limits.max_memory,
                 "Memory budget for the model's tensors in every session this tool makes, e.g. 512M or 8G "
                 "(0: none); a model or input that needs more is refused with an error naming the tensor and "
                 "its size. Default: 80% of this machine's memory");
  app.add_option("--max-run-time", limits.max_run_time,
                 "Time budget for each run of a model in every session this tool makes, e.g. 500ms, 2s or 5m "
                 "(a bare number is seconds; 0: none); a run that takes longer stops with an error naming the "
                 "node it reached. Default: none");
}

Status ApplyResourceLimits(const ResourceLimits& limits) {
  int64_t bytes = DefaultMemoryBudget();
  if (!limits.max_memory.empty()) {
    WH_ASSIGN_OR_RETURN(bytes, ParseByteSize(limits.max_memory));
  }
  int64_t ms = 0;
  if (!limits.max_run_time.empty()) {
    WH_ASSIGN_OR_RETURN(ms, ParseDurationMs(limits.max_run_time));
  }
  SetProcessMemoryBudget(bytes);
  SetProcessRunTimeBudget(ms);
  return Status::Ok();
}

void AddExternalDataOption(CLI::App& app, std::string& value) {
  app.add_option("--external-data-threshold", value,
                 "Write the output's tensors of at least this size, e.g. 1K or 1M (0: every tensor), to "
                 "OUT.data beside OUT.onnx (ONNX external data; the pair is written atomically). Default: "
                 "inline, unless the input model keeps its tensors in external data or the output would pass "
                 "protobuf's 2 GiB limit: then tensors of 1K or more");
}

StatusOr<int64_t> ParseExternalDataThreshold(const std::string& value) {
  if (value.empty()) return int64_t{-1};
  return ParseByteSize(value, "--external-data-threshold");
}

int Fail(const std::string& tool, const std::string& msg) {
  std::string one_line = msg;
  std::replace(one_line.begin(), one_line.end(), '\n', ' ');
  std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), one_line.c_str());
  return 1;
}

std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv, const std::string& tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", tool.c_str(), e.what());
    return 2;
  }
  return std::nullopt;
}

std::string BackendList(const std::vector<Backend>& allowed) {
  std::string s;
  for (size_t i = 0; i < allowed.size(); ++i)
    s += std::string(i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + BackendName(allowed[i]);
  return s;
}

namespace {
std::string BraceList(const std::vector<Backend>& allowed) {
  std::string s;
  for (Backend b : allowed) s += std::string(s.empty() ? "{" : ",") + BackendName(b);
  return s + "}";
}
}  // namespace

CLI::Validator BackendCheck(const std::vector<Backend>& allowed) {
  return CLI::Validator(
      [allowed](std::string& name) -> std::string {
        auto b = ParseBackend(name);
        if (b.ok() && std::find(allowed.begin(), allowed.end(), *b) != allowed.end()) return "";
        return "'" + name + "' is not a device here (expected " + BackendList(allowed) + ")";
      },
      BraceList(allowed));
}

Status CheckOutputPath(const std::string& path, const std::string& flag) {
  if (path.empty()) return InvalidArgument(flag + " needs a file name");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return NotFound(flag + " " + path + ": directory " + dir + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) return IoError(flag + " " + path + ": directory " + dir + " is not writable");
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return InvalidArgument(flag + " " + path + " is a directory, expected a file name");
  return Status::Ok();
}

StatusOr<Dataset> LoadDataFlag(const DataFlag& f) {
  if (f.spec.empty()) return Dataset{};
  return CheckDataArgument(LoadDataset(f.spec, f.limit), f.flag, f.spec, f.need_labels);
}

StatusOr<std::map<std::string, Dims>> ParseInputShapes(const std::vector<std::string>& specs) {
  std::map<std::string, Dims> shapes;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    Dims dims;
    bool ok = eq != std::string::npos && eq > 0 && eq + 1 < spec.size();
    if (ok) {
      size_t pos = eq + 1;
      while (ok && pos <= spec.size()) {
        const size_t comma = std::min(spec.find(',', pos), spec.size());
        const std::string item = spec.substr(pos, comma - pos);
        ok = !item.empty() && item.size() < 12 && item.find_first_not_of("0123456789") == std::string::npos &&
             std::stoll(item) > 0;
        if (ok) dims.push_back(std::stoll(item));
        pos = comma + 1;
      }
    }
    if (!ok) return InvalidArgument("--input-shape expects NAME=D1,D2,... with positive dims, got '" + spec + "'");
    shapes[spec.substr(0, eq)] = dims;
  }
  return shapes;
}

}  // namespace whittle::cli
