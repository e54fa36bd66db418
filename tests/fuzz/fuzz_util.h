// Shared helpers of the libFuzzer targets in tests/fuzz/: the memory and time budgets they run under, the
// optional input-size screen, small generated input tensors, and scratch files and folders for
// the readers that only take a path. Header-only; each target includes it.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "lib/ir/graph.h"
#include "lib/ir/memory_meter.h"
#include "lib/ir/run_deadline.h"
#include "lib/ir/tensor.h"
#include "whittle/session.h"

namespace whittle::fuzz {

// The memory budget of every session and data reader a target makes (SetProcessMemoryBudget): a
// model whose shapes need more is refused by the library (issue 41), which is the path the
// targets exercise. Small, so that an input that fits it still runs in well under the timeout.
constexpr int64_t kMemoryBudgetBytes = int64_t{64} << 20;
// The time budget of every run (SetProcessRunTimeBudget): a model whose arithmetic would take
// longer stops with a DeadlineExceeded error, well inside libFuzzer's -timeout (10 s in
// scripts/fuzz.sh), so that the deadline's checks are fuzzed too and only a hang outside a run
// (loading, shape inference, a pass) is a timeout finding.
constexpr int64_t kRunBudgetMs = 2000;
// Largest element count a value may have, statically, for WHITTLE_FUZZ_SCREEN=1 (off by default:
// oversized shapes are errors now, not aborts).
constexpr int64_t kMaxValueElements = int64_t{1} << 22;  // 16 MiB of float32
// Largest generated input, in bytes.
constexpr size_t kMaxInputBytes = size_t{1} << 20;

// Once per process: the budgets above.
inline void Init() {
  static const bool done = [] {
    SetProcessMemoryBudget(kMemoryBudgetBytes);
    SetProcessRunTimeBudget(kRunBudgetMs);
    return true;
  }();
  (void)done;
}

inline bool ScreenOn() {
  static const bool on = [] {
    const char* e = std::getenv("WHITTLE_FUZZ_SCREEN");
    return e != nullptr && std::strcmp(e, "1") == 0;
  }();
  return on;
}

// With WHITTLE_FUZZ_SCREEN=1: true when every value with an initializer or a known shape stays
// under kMaxValueElements (unknown dims counted as 2, what the targets feed at most). Else true.
inline bool ShapesAreSmall(const Graph& g) {
  if (!ScreenOn()) return true;
  for (const Value& v : g.values()) {
    Dims d;
    if (v.initializer) {
      d = v.initializer->dims();
    } else if (v.shape) {
      for (const Dim& x : *v.shape) d.push_back(x.known() ? x.value : 2);
    }
    auto n = CheckedNumElements(d);
    if (!n.ok() || *n > kMaxValueElements) return false;
  }
  return true;
}

// The folder the model targets load from (ParseModel's base_dir), made once per process: the
// files and traps the structure-aware mutator's external-data locations name (onnx_mutator.cc):
// w.bin (4096 bytes), sub/w.bin (64 bytes), a folder dir/ and a symlink link.bin to /etc/passwd.
inline const std::string& ScratchModelDir() {
  static const std::string dir = [] {
    const std::string d = "/tmp/whittle_fuzz_" + std::to_string(::getpid()) + "_model";
    ::mkdir(d.c_str(), 0700);
    ::mkdir((d + "/sub").c_str(), 0700);
    ::mkdir((d + "/dir").c_str(), 0700);
    auto write = [](const std::string& path, size_t n) {
      if (FILE* f = std::fopen(path.c_str(), "wb")) {
        for (size_t i = 0; i < n; ++i) std::fputc(static_cast<int>((i * 37 + 11) & 0x3f), f);
        std::fclose(f);
      }
    };
    write(d + "/w.bin", 4096);
    write(d + "/sub/w.bin", 64);
    (void)::symlink("/etc/passwd", (d + "/link.bin").c_str());
    return d;
  }();
  return dir;
}

// A tensor of `dtype` and `dims` filled from a small deterministic sequence seeded by `seed`:
// floats in [-2, 2), integers 0 or 1 (safe as indices), bools alternating.
inline Tensor SmallTensor(DType dtype, const Dims& dims, uint32_t seed) {
  Tensor t(dtype, dims);
  const int64_t n = t.numel();
  uint32_t x = seed * 2654435761u + 1;
  auto next = [&] { x ^= x << 13; x ^= x >> 17; x ^= x << 5; return x; };
  switch (dtype) {
    case DType::kFloat32: {
      float* p = t.data<float>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(next() % 4096) / 1024.f - 2.f;
      break;
    }
    case DType::kFloat64: {
      double* p = t.data<double>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<double>(next() % 4096) / 1024. - 2.;
      break;
    }
    case DType::kInt64: {
      int64_t* p = t.data<int64_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = next() & 1;
      break;
    }
    case DType::kInt32: {
      int32_t* p = t.data<int32_t>();
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(next() & 1);
      break;
    }
    default: {  // one-byte types (uint8, int8, bool) get 0/1; the rest stay zero
      if (DTypeSize(dtype) == 1) {
        uint8_t* p = static_cast<uint8_t*>(t.raw_data());
        for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(next() & 1);
      }
      break;
    }
  }
  return t;
}

// One Run of `s` on generated inputs: free dims 1 or 2 (bit i of `pick`: the i-th free dim is 2),
// nothing run when an input would exceed kMaxInputBytes. The result is ignored: errors are fine.
inline void RunSmall(const Session& s, uint32_t pick) {
  std::map<std::string, Tensor> inputs;
  int free_dim = 0;
  for (const IoInfo& in : s.inputs()) {
    Dims dims;
    for (const Dim& d : in.shape) dims.push_back(d.known() ? d.value : 1 + ((pick >> (free_dim++ % 7)) & 1));
    auto n = CheckedNumElements(dims);
    if (!n.ok() || DTypeSize(in.dtype) == 0 || static_cast<size_t>(*n) > kMaxInputBytes / DTypeSize(in.dtype))
      return;
    const auto seed = static_cast<uint32_t>(inputs.size());
    if (in.kind == ValueKind::kTensor) {
      inputs[in.name] = SmallTensor(in.dtype, dims, seed);
      continue;
    }
    // A sequence (or an optional's): 0 to 3 elements of [k] (bits of pick); an optional may hold no value.
    const bool sequence = in.kind == ValueKind::kSequence || in.kind == ValueKind::kOptionalSequence;
    if (in.kind != ValueKind::kSequence && ((pick >> 3) & 1)) {
      inputs[in.name] = Tensor::NoValue();
    } else if (!sequence) {
      inputs[in.name] = SmallTensor(in.dtype, {2}, seed);
    } else {
      std::vector<Tensor> items;
      for (uint32_t k = 0; k < ((pick >> 4) & 3); ++k) items.push_back(SmallTensor(in.dtype, {1 + k}, seed + k));
      inputs[in.name] = Tensor::Sequence(in.dtype, std::move(items));
    }
  }
  (void)s.Run(inputs);
}

// A scratch file of this process, rewritten with `bytes`; its path.
inline std::string WriteScratch(const std::string& suffix, const std::string& bytes) {
  const std::string path = "/tmp/whittle_fuzz_" + std::to_string(::getpid()) + suffix;
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (!bytes.empty()) std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

}  // namespace whittle::fuzz
