#include "kernels/coverage.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

namespace whittle {
namespace {

const char* ShortName(DType t) {
  switch (t) {
    case DType::kFloat32: return "f32";
    case DType::kFloat64: return "f64";
    case DType::kFloat16: return "f16";
    case DType::kBFloat16: return "bf16";
    case DType::kInt8: return "i8";
    case DType::kUInt8: return "u8";
    case DType::kInt16: return "i16";
    case DType::kUInt16: return "u16";
    case DType::kInt32: return "i32";
    case DType::kUInt32: return "u32";
    case DType::kInt64: return "i64";
    case DType::kUInt64: return "u64";
    case DType::kBool: return "bool";
    case DType::kInt4: return "i4";
    case DType::kUInt4: return "u4";
    default: return "?";
  }
}

// The declaration's element types: a named set where it is one, else their short names.
std::string TypesText(const std::vector<DType>& t) {
  const std::pair<const std::vector<DType>*, const char*> sets[] = {
      {&kAllTypes, "all"},     {&kNumericHalfTypes, "num+half"}, {&kNumericTypes, "num"},
      {&kFloatHalfTypes, "float+half"}, {&kFloatTypes, "float"}, {&kIntegerTypes, "int"}};
  if (t.empty()) return "*";
  for (const auto& [set, name] : sets)
    if (*set == t) return name;
  std::string s;
  for (DType d : t) s += (s.empty() ? "" : ",") + std::string(ShortName(d));
  return s;
}

std::string OpsetText(const KernelDef& d, int since) {
  const int from = std::max(d.since_version, since);
  if (d.end_version >= kOpsetMax) return std::to_string(from) + "+";
  return std::to_string(from) + "-" + std::to_string(d.end_version);
}

std::string JsonString(const std::string& s) {
  std::string o = "\"";
  for (char c : s) o += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return o + "\"";
}

}  // namespace

std::string KernelCoverage(const KernelRegistry& r, bool json, const SchemaSince& since) {
  // (domain, op) -> its declarations, sorted.
  std::map<std::pair<std::string, std::string>, std::vector<const KernelDef*>> ops;
  for (const KernelDef* d : r.Declarations()) ops[{d->domain, d->op_type}].push_back(d);
  std::vector<Backend> backends = BuiltBackends();
  for (const auto& [key, defs] : ops)
    for (const KernelDef* d : defs)
      if (std::find(backends.begin(), backends.end(), d->backend) == backends.end()) backends.push_back(d->backend);
  std::ostringstream o;
  if (json) {
    o << "[";
    bool first = true;
    for (const auto& [key, defs] : ops) {
      const int s = since ? since(key.first, key.second) : 1;
      for (const KernelDef* d : defs) {
        o << (first ? "\n" : ",\n") << "  {\"domain\": " << JsonString(key.first.empty() ? "ai.onnx" : key.first)
          << ", \"op\": " << JsonString(key.second) << ", \"backend\": " << JsonString(BackendName(d->backend))
          << ", \"since_version\": " << std::max(d->since_version, s) << ", \"end_version\": "
          << (d->end_version >= kOpsetMax ? std::string("null") : std::to_string(d->end_version)) << ", \"dtypes\": [";
        for (size_t i = 0; i < d->dtypes.size(); ++i) o << (i ? ", " : "") << JsonString(DTypeName(d->dtypes[i]));
        o << "]}";
        first = false;
      }
    }
    o << "\n]\n";
    return o.str();
  }
  o << "| op | domain |";
  for (Backend b : backends) o << " " << BackendName(b) << " |";
  o << "\n|---|---|";
  for (size_t i = 0; i < backends.size(); ++i) o << "---|";
  o << "\n";
  for (const auto& [key, defs] : ops) {
    const int s = since ? since(key.first, key.second) : 1;
    o << "| " << key.second << " | " << (key.first.empty() ? "ai.onnx" : key.first) << " |";
    for (Backend b : backends) {
      std::string cell;
      for (const KernelDef* d : defs)
        if (d->backend == b) cell += (cell.empty() ? "" : "; ") + OpsetText(*d, s) + " " + TypesText(d->dtypes);
      o << " " << (cell.empty() ? "ref" : cell) << " |";
    }
    o << "\n";
  }
  return o.str();
}

}  // namespace whittle
