// The buffers of Session runs: RunArena, one run's (or one CUDA graph's) recycled buffers, device
// copies and device check report, and ArenaPool, the idle arenas a session lends to its runs so
// that concurrent Run calls each get their own. Internal to runtime/session/.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "lib/ir/device.h"
#include "lib/ir/memory_meter.h"
#include "lib/ir/tensor.h"
#include "runtime/node_runner.h"

namespace whittle {

// Recycled buffers of one Run call. A buffer goes back to the free list only when no tensor
// outside the arena still shares it (use_count == 1), so outputs handed to the caller and
// aliases (Reshape) are never reused under someone's feet.
struct RunArena {
  std::vector<Tensor> slots;
  std::vector<Tensor> moved;  // per value: its copy on the other device, made once per run
  // Host shape values a device kernel reads (Attention's scale): (the host value, its device copy),
  // kept across this arena's runs, so an unchanged value is not uploaded again.
  std::map<int, std::pair<Tensor, Tensor>> uploads;
  std::vector<std::shared_ptr<Buffer>> free;
  // Device outputs handed to the caller (OutputsOn::kWhereComputed): each rejoins `free` once the
  // caller has dropped it, so a loop of runs reuses its device outputs' memory too.
  std::vector<std::shared_ptr<Buffer>> lent;
  // The device check report of this arena's runs (device sessions with a ChecksOnDevice kernel;
  // kernels/kernel.h): zero between runs; a graph's arena keeps its own, which its kernels write.
  DeviceCheckReport check;
  int64_t allocated = 0, reused = 0;
  // The session's memory budget (SessionOptions::max_memory_bytes; null: none), which every fresh
  // buffer is admitted against.
  std::shared_ptr<MemoryMeter> meter;

  StatusOr<std::shared_ptr<Buffer>> Take(size_t bytes, DeviceType device) {
    for (size_t i = 0; i < lent.size();)
      if (lent[i].use_count() == 1) {
        free.push_back(std::move(lent[i]));
        lent.erase(lent.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    size_t best = free.size();
    for (size_t i = 0; i < free.size(); ++i)
      if (free[i]->device() == device && free[i]->size() >= bytes &&
          (best == free.size() || free[i]->size() < free[best]->size()))
        best = i;
    if (best != free.size() && free[best]->size() <= 4 * bytes + 4096) {
      std::shared_ptr<Buffer> b = std::move(free[best]);
      free.erase(free.begin() + static_cast<long>(best));
      ++reused;
      return b;
    }
    ++allocated;
    if (meter) WH_RETURN_IF_ERROR(meter->Admit(bytes, "a buffer"));
    WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Buffer::AllocateOn(device, bytes));
    if (meter) meter->Attach(*b);
    return b;
  }
  void Release(Tensor& t) {
    // A caller's memory (Buffer::Wrap) is read only and never serves another value.
    if (t.defined() && t.buffer().use_count() == 1 && !t.buffer()->external()) free.push_back(t.buffer());
    t = Tensor();
  }
  // t's copy on `device`, in an arena buffer: a download waits for it, an upload is queued before
  // the run's later device work (QueueTensorBytes; `queued` says the run must synchronize before
  // another thread may take this arena). held: t's bytes stay as they are until the run
  // synchronizes (a caller-fed input), so a page-locked t is read by the device directly.
  StatusOr<Tensor> CopyTo(const Tensor& t, DeviceType device, bool held = false) {
    WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Take(t.nbytes(), device));
    Tensor c(t.dtype(), t.dims(), std::move(b));
    if (device == DeviceType::kCpu) {
      WH_RETURN_IF_ERROR(CopyTensorBytes(t, &c));
    } else {
      queued = true;
      WH_RETURN_IF_ERROR(QueueTensorBytes(t, &c, held));
    }
    return c;
  }
  bool queued = false;  // device work queued by this run that nothing has waited for yet
};

// The idle arenas of one session. Take lends one (a fresh one when none is idle) with its
// counters at zero; Give takes it back as it is; Recycle first drops what a run that ends early
// still holds (waiting for its queued uploads, so another thread may take it at once).
class ArenaPool {
 public:
  std::unique_ptr<RunArena> Take() const;
  void Give(std::unique_ptr<RunArena> arena) const;
  // rt: the session's device runtime (null on the CPU), for the uploads the run queued.
  void Recycle(std::unique_ptr<RunArena> arena, const DeviceRuntime* rt) const;
  // The session's memory meter, given to every arena it lends (null: no budget).
  std::shared_ptr<MemoryMeter> meter;

 private:
  mutable std::mutex mu_;
  mutable std::vector<std::unique_ptr<RunArena>> idle_;
};

}  // namespace whittle
