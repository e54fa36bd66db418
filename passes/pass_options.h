// Parsing of pass specs as the CLI takes them: "ratio=0.3,criterion=l2,exclude=fc1,fc2,
// layer=fc1:rank=16". Items are comma-separated key=value pairs; an item without '=' continues
// the previous value as a list (so exclude=a,b,c works); `layer=NAME:key=value[:key=value]`
// gives per-layer overrides. Getters validate types and ranges and name the pass and key in
// errors; Finish() rejects keys that no getter asked for, so typos never pass silently.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/status.h"

namespace whittle {

class PassOptions {
 public:
  // pass: the flag name for messages ("svd"); spec: the text after the flag.
  static StatusOr<PassOptions> Parse(const std::string& pass, const std::string& spec);
  // Merges another spec of the same pass (later keys win).
  Status Merge(const PassOptions& other);

  bool Has(const std::string& key) const { return values_.count(key) != 0; }
  StatusOr<double> GetDouble(const std::string& key, double def, double lo, double hi);
  StatusOr<int64_t> GetInt(const std::string& key, int64_t def, int64_t lo, int64_t hi);
  // One of `choices`.
  StatusOr<std::string> GetChoice(const std::string& key, const std::string& def,
                                  const std::vector<std::string>& choices);
  std::vector<std::string> GetList(const std::string& key);
  // Per-layer overrides: layer name -> options (each an own PassOptions, for the same getters).
  std::map<std::string, PassOptions>& layers() { return layers_; }
  // Error naming every key that was given but never read.
  Status Finish() const;

  const std::string& pass() const { return pass_; }
  const std::string& spec() const { return spec_; }

 private:
  std::string pass_, spec_;
  std::map<std::string, std::string> values_;
  std::map<std::string, PassOptions> layers_;
  std::set<std::string> used_;
};

}  // namespace whittle
