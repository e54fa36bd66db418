#include "passes/search/sensitivity.h"

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "lib/data/file_util.h"

namespace whittle::search {

std::string HashBytes(const void* data, size_t n, const std::string& seed) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](const unsigned char* p, size_t len) {
    for (size_t i = 0; i < len; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  mix(reinterpret_cast<const unsigned char*>(seed.data()), seed.size());
  mix(static_cast<const unsigned char*>(data), n);
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

StatusOr<SensitivityCache> SensitivityCache::Open(const std::string& path, const std::string& fingerprint,
                                                  const std::string& latency_tag, std::string* note) {
  SensitivityCache c;
  c.path_ = path;
  c.fingerprint_ = fingerprint;
  c.latency_tag_ = latency_tag;
  if (path.empty() || !std::ifstream(path).good()) return c;
  WH_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  nlohmann::json j = nlohmann::json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("entries") || !j["entries"].is_object())
    return InvalidArgument("--sensitivity-cache " + path + ": not a sensitivity cache (JSON with \"entries\")");
  if (j.value("fingerprint", std::string()) != fingerprint) {
    *note = "--sensitivity-cache " + path +
            " was written for another model, data or options: measuring again (the file is replaced)";
    return c;
  }
  const bool latency_ok = j.value("latency_on", std::string()) == latency_tag;
  for (const auto& [key, e] : j["entries"].items()) {
    if (!e.is_object()) continue;
    Sensitivity s;
    s.valid = e.value("valid", true);
    s.why = e.value("why", std::string());
    s.drop = e.value("drop", 0.0);
    s.flips = e.value("flips", 0.0);
    s.bytes = e.value("bytes", 0.0);
    s.macs = e.value("macs", 0.0);
    if (latency_ok && e.contains("latency_ms") && e["latency_ms"].is_number()) s.latency_ms = e["latency_ms"];
    c.entries_[key] = s;
  }
  return c;
}

const Sensitivity* SensitivityCache::Find(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

void SensitivityCache::Put(const std::string& key, const Sensitivity& s) { entries_[key] = s; }

Status SensitivityCache::Save() const {
  if (path_.empty()) return Status::Ok();
  nlohmann::json j;
  j["format"] = "whittle-sensitivity-cache-1";
  j["fingerprint"] = fingerprint_;
  j["latency_on"] = latency_tag_;
  nlohmann::json& e = j["entries"] = nlohmann::json::object();
  for (const auto& [key, s] : entries_) {
    nlohmann::json o = {{"valid", s.valid}, {"drop", s.drop}, {"flips", s.flips}, {"bytes", s.bytes}, {"macs", s.macs}};
    if (!s.why.empty()) o["why"] = s.why;
    if (!std::isnan(s.latency_ms)) o["latency_ms"] = s.latency_ms;
    e[key] = o;
  }
  return WriteFileAtomically(path_, j.dump(1) + "\n").WithContext("--sensitivity-cache");
}

}  // namespace whittle::search
