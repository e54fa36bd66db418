// A memory budget for what a session allocates (SessionOptions::max_memory_bytes, the CLIs'
// --max-memory): each fresh buffer is admitted against the budget before it is allocated and
// counted while it lives (Buffer keeps its meter and gives its bytes back when it goes), so a
// model whose shapes would need more is refused with an error naming the tensor and the size
// instead of being killed by the system. Internal (lib/ir).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct MemoryMeter : std::enable_shared_from_this<MemoryMeter> {
  explicit MemoryMeter(int64_t limit_bytes) : limit(limit_bytes) {}
  const int64_t limit;  // 0: no budget
  std::atomic<int64_t> live{0};

  // Ok when `bytes` more fit the budget; else why not (what: the tensor, e.g. "output 'y'").
  Status Admit(uint64_t bytes, const std::string& what) const;
  // Counts b until it is freed.
  void Attach(Buffer& b);
  // Buffer's destructor: its bytes are free again.
  static void Detach(Buffer& b);
};

// The machine's physical memory in bytes (0 if unknown), and the CLIs' default budget: 80 % of it,
// so that a shape the machine cannot hold is refused before the allocation rather than by the
// system's out-of-memory killer once the pages are touched.
int64_t PhysicalMemoryBytes();
int64_t DefaultMemoryBudget();

// The process's default budget, for the sessions whose SessionOptions::max_memory_bytes is 0: none
// (0) unless a tool sets one (the CLIs' --max-memory), so that every session a tool makes — its
// own, the passes' calibration and probe sessions, the trainer's — is held to the same budget.
void SetProcessMemoryBudget(int64_t bytes);
int64_t ProcessMemoryBudget();

// A kernel's own scratch (im2col columns and the like, sized by the model's shapes): `count`
// elements of `elem_bytes`. Throws the std::bad_alloc a failed Buffer::Allocate throws (which the
// Session turns into a ResourceExhausted error) when the size overflows or passes the process's
// memory budget. Call it on the calling thread, before a parallel region: an exception must not
// leave an OpenMP team.
void CheckScratch(int64_t count, int64_t elem_bytes, const char* what);

// The bytes a tensor of `dims` and `dtype` holds, or an error when the count or the size passes
// 2^63 (hostile shapes) or the dtype has no fixed size.
StatusOr<uint64_t> CheckedNumBytes(const Dims& dims, DType dtype);

// "1.5 GiB"-style size for messages.
std::string HumanBytes(uint64_t bytes);

}  // namespace whittle
