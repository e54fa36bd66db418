// One printf-formatted number as a string, for report and progress text: Fmt("%.4f", x).
#pragma once

#include <cstdio>
#include <string>

namespace whittle {

inline std::string Fmt(const char* format, double v) {
  char b[64];
  std::snprintf(b, sizeof b, format, v);
  return b;
}

}  // namespace whittle
