#include "lib/ir/memory_meter.h"

#include <unistd.h>

#include <cstdio>

namespace whittle {

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char buf[64];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

StatusOr<uint64_t> CheckedNumBytes(const Dims& dims, DType dtype) {
  WH_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
  uint64_t bytes = 0;
  if (DTypeSize(dtype) == 0 || __builtin_mul_overflow(static_cast<uint64_t>(n), DTypeSize(dtype), &bytes) ||
      bytes > (uint64_t{1} << 63))
    return ResourceExhausted("shape " + DimsToString(dims) + " of " + DTypeName(dtype) + " has too many bytes to hold");
  return bytes;
}

Status MemoryMeter::Admit(uint64_t bytes, const std::string& what) const {
  if (limit <= 0) return Status::Ok();
  const int64_t in_use = live.load(std::memory_order_relaxed);
  if (bytes > static_cast<uint64_t>(limit) || static_cast<int64_t>(bytes) > limit - in_use)
    return ResourceExhausted(what + " needs " + HumanBytes(bytes) + " (" + std::to_string(bytes) + " bytes), which with " +
                             HumanBytes(static_cast<uint64_t>(in_use)) + " in use passes the memory budget of " +
                             HumanBytes(static_cast<uint64_t>(limit)) + " (--max-memory, SessionOptions::max_memory_bytes)");
  return Status::Ok();
}

void MemoryMeter::Attach(Buffer& b) {
  live.fetch_add(static_cast<int64_t>(b.size_), std::memory_order_relaxed);
  b.meter_ = shared_from_this();
}

void MemoryMeter::Detach(Buffer& b) {
  if (b.meter_) b.meter_->live.fetch_sub(static_cast<int64_t>(b.size_), std::memory_order_relaxed);
}

int64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

int64_t DefaultMemoryBudget() { return PhysicalMemoryBytes() / 10 * 8; }

namespace {
std::atomic<int64_t> g_process_budget{0};
}  // namespace

void SetProcessMemoryBudget(int64_t bytes) { g_process_budget.store(bytes < 0 ? 0 : bytes); }
int64_t ProcessMemoryBudget() { return g_process_budget.load(); }

}  // namespace whittle
