// Per-layer sensitivities of the accuracy-aware search: for every (layer, choice), the score drop
// it causes alone on the calibration data and what it changes in the target's figures (bytes,
// MACs, latency). Kept in a JSON cache file (--sensitivity-cache) under a fingerprint of the
// model, the data and the options, so a second run with another budget measures nothing again;
// latencies are only reused on the machine, thread count and batch they were measured at. The file
// is written atomically, every few entries, so an interrupted run keeps what it measured.
#pragma once

#include <cmath>
#include <map>
#include <string>

#include "lib/ir/status.h"

namespace whittle::search {

struct Sensitivity {
  bool valid = true;  // false: the passes refused the choice (why)
  std::string why;
  double drop = 0, flips = 0;  // pp, on the calibration data
  double bytes = 0, macs = 0;  // change from the original
  double latency_ms = NAN;     // change from the original; NaN = not measured
};

class SensitivityCache {
 public:
  // Reads `path` when it exists and was written for `fingerprint` (else starts empty and says why
  // in *note). latency_tag: the machine, threads and batch of latency figures.
  static StatusOr<SensitivityCache> Open(const std::string& path, const std::string& fingerprint,
                                         const std::string& latency_tag, std::string* note);
  const Sensitivity* Find(const std::string& key) const;
  void Put(const std::string& key, const Sensitivity& s);
  Status Save() const;  // no-op without a path
  size_t size() const { return entries_.size(); }

 private:
  std::string path_, fingerprint_, latency_tag_;
  std::map<std::string, Sensitivity> entries_;
};

// A 64-bit FNV-1a hash, hex, of bytes (for fingerprints).
std::string HashBytes(const void* data, size_t n, const std::string& seed = "");

}  // namespace whittle::search
