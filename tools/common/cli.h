// What every Whittle command-line tool does the same way: one-line errors and exit codes (1 for a
// failure, 2 for a bad command line), flag parsing with --help/--version, the --device flag (one
// backend knob, names parsed by ParseBackend), output paths checked before any long work, and the
// data-spec flags (--eval-data SPEC, --calibration-data SPEC) loaded with errors that name the
// flag. Ctrl-C cleanup is the library's RemoveTempFilesOnSignal (lib/ir/atomic_file.h).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/status.h"
#include "runtime/backend_name.h"

namespace whittle::cli {

// Prints "TOOL: error: MSG" (newlines folded into one line) on stderr and returns 1.
int Fail(const std::string& tool, const std::string& msg);

// Runs a tool's body, turning an exception that escaped it (a failed allocation, an oversized
// shape: lib/ir/tensor.h) into "TOOL: error: ..." and exit code 1, never an abort.
int GuardedMain(const std::string& tool, int (*body)(int, char**), int argc, char** argv);

// --max-memory's value: bytes, or a number with K, M, G or T (powers of 1024); 0 means no budget.
StatusOr<int64_t> ParseByteSize(const std::string& s, const std::string& flag = "--max-memory");

// compress-model's and finetune-model's --external-data-threshold (one help text), as
// SaveOptions::external_data_threshold: the size, or -1 (automatic) when not given ("").
void AddExternalDataOption(CLI::App& app, std::string& value);
StatusOr<int64_t> ParseExternalDataThreshold(const std::string& value);

// --max-run-time's value in milliseconds: seconds, or a number with ms, s or m; 0 means none.
StatusOr<int64_t> ParseDurationMs(const std::string& s);

// Every tool's --max-memory and --max-run-time (one help text each): the budgets of every session
// the tool makes (its own, the passes' calibration and probe sessions, the trainer's).
// ApplyResourceLimits sets them as the process's (SetProcessMemoryBudget, SetProcessRunTimeBudget):
// memory, the value or 80 % of physical memory when the flag was not given (""); run time, the
// value or none.
struct ResourceLimits {
  std::string max_memory, max_run_time;
};
void AddResourceLimitOptions(CLI::App& app, ResourceLimits& limits);
Status ApplyResourceLimits(const ResourceLimits& limits);

// Parses argv into app. Returns the exit code when the program should stop now (--help and
// --version: 0; a bad command line: 2, after "TOOL: error: ... (see --help)"), else nullopt.
std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv, const std::string& tool);

// A check for a flag that names a backend: ParseBackend's names, limited to `allowed` (a bad one
// is a command-line error, exit 2, that lists the allowed names).
CLI::Validator BackendCheck(const std::vector<Backend>& allowed);
// "cpu, cuda or reference" for help texts.
std::string BackendList(const std::vector<Backend>& allowed);

// Fails early when `path` (given with `flag`) cannot be written: missing or unwritable directory,
// or a directory where a file name is expected.
Status CheckOutputPath(const std::string& path, const std::string& flag);

// What a data-spec flag asks for.
struct DataFlag {
  std::string flag;     // "--eval-data"
  std::string spec;     // "" = not given
  int64_t limit = -1;   // keep the first N samples (< 0: all)
  bool need_labels = false;
};
// Loads the flag's data set (an empty Dataset when the flag was not given). Errors name the flag
// and say why: a bad spec, no labels where they are needed, no samples.
StatusOr<Dataset> LoadDataFlag(const DataFlag& f);

// Parses repeated --input-shape NAME=D1,D2,... flags (positive dims) into name -> dims.
StatusOr<std::map<std::string, Dims>> ParseInputShapes(const std::vector<std::string>& specs);

}  // namespace whittle::cli
