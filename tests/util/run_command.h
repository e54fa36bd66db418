// Runs a shell command line for the CLI end-to-end tests: exit code and stdout come back
// (redirect stderr in the command line to capture it).
#pragma once

#include <stdio.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace whittle::testing {

struct CmdResult {
  int code = -1;  // exit status; -1 when the command could not run or was killed
  std::string out;
  std::string err;  // filled by callers that capture stderr
};

inline CmdResult RunCommand(const std::string& cmd) {
  CmdResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// A whole file as bytes ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// RunCommand with stderr captured through the file err_path (removed afterwards) into r.err.
inline CmdResult RunCapturingStderr(const std::string& cmd, const std::string& err_path) {
  CmdResult r = RunCommand(cmd + " 2>" + err_path);
  r.err = ReadFile(err_path);
  std::remove(err_path.c_str());
  return r;
}

}  // namespace whittle::testing
