#include "passes/pass_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace whittle {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

}  // namespace

StatusOr<PassOptions> PassOptions::Parse(const std::string& pass, const std::string& spec) {
  PassOptions o;
  o.pass_ = pass;
  o.spec_ = spec;
  std::string last_key;
  for (const std::string& item : Split(spec, ',')) {
    if (item.empty()) {
      if (spec.empty()) break;
      return InvalidArgument("--" + pass + " '" + spec + "': empty item (stray comma?)");
    }
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      if (last_key.empty() || last_key == "layer")
        return InvalidArgument("--" + pass + " '" + spec + "': '" + item + "' is not key=value");
      o.values_[last_key] += "," + item;
      continue;
    }
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key.empty() || value.empty())
      return InvalidArgument("--" + pass + " '" + spec + "': '" + item + "' needs a key and a value");
    if (key == "layer") {
      // layer=NAME:key=value[:key=value...]
      std::vector<std::string> parts = Split(value, ':');
      if (parts.size() < 2 || parts[0].empty())
        return InvalidArgument("--" + pass + " '" + spec + "': expected layer=NAME:key=value, got '" + item + "'");
      PassOptions& lo = o.layers_[parts[0]];
      lo.pass_ = pass + " layer=" + parts[0];
      lo.spec_ = value;
      for (size_t i = 1; i < parts.size(); ++i) {
        size_t e = parts[i].find('=');
        if (e == std::string::npos || e == 0 || e + 1 == parts[i].size())
          return InvalidArgument("--" + pass + " '" + spec + "': '" + parts[i] + "' in '" + item + "' is not key=value");
        lo.values_[parts[i].substr(0, e)] = parts[i].substr(e + 1);
      }
      last_key = "layer";
      continue;
    }
    if (o.values_.count(key))
      return InvalidArgument("--" + pass + " '" + spec + "': key '" + key + "' given twice");
    o.values_[key] = value;
    last_key = key;
  }
  return o;
}

Status PassOptions::Merge(const PassOptions& other) {
  for (const auto& [k, v] : other.values_) values_[k] = v;
  for (const auto& [name, lo] : other.layers_) {
    PassOptions& mine = layers_[name];
    mine.pass_ = lo.pass_;
    for (const auto& [k, v] : lo.values_) mine.values_[k] = v;
  }
  spec_ = spec_.empty() ? other.spec_ : spec_ + "," + other.spec_;
  return Status::Ok();
}

StatusOr<double> PassOptions::GetDouble(const std::string& key, double def, double lo, double hi) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (errno != 0 || end == it->second.c_str() || *end != '\0' || !std::isfinite(v))
    return InvalidArgument("--" + pass_ + ": " + key + "='" + it->second + "' is not a number");
  if (v < lo || v > hi)
    return InvalidArgument("--" + pass_ + ": " + key + "=" + it->second + " is out of range [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

StatusOr<int64_t> PassOptions::GetInt(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(it->second.c_str(), &end, 10);
  if (errno != 0 || end == it->second.c_str() || *end != '\0')
    return InvalidArgument("--" + pass_ + ": " + key + "='" + it->second + "' is not an integer");
  if (v < lo || v > hi)
    return InvalidArgument("--" + pass_ + ": " + key + "=" + it->second + " is out of range [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int64_t>(v);
}

StatusOr<std::string> PassOptions::GetChoice(const std::string& key, const std::string& def,
                                             const std::vector<std::string>& choices) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  for (const auto& c : choices)
    if (c == it->second) return c;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
  return InvalidArgument("--" + pass_ + ": " + key + "='" + it->second + "' must be one of " + list);
}

std::vector<std::string> PassOptions::GetList(const std::string& key) {
  used_.insert(key);
  auto it = values_.find(key);
  if (it == values_.end()) return {};
  return Split(it->second, ',');
}

Status PassOptions::Finish() const {
  for (const auto& [k, v] : values_)
    if (!used_.count(k)) return InvalidArgument("--" + pass_ + ": unknown option '" + k + "'");
  for (const auto& [name, lo] : layers_) WH_RETURN_IF_ERROR(lo.Finish());
  return Status::Ok();
}

}  // namespace whittle
