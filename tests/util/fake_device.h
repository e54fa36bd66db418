// A stand-in for the CUDA device whose memory is host memory, for tests of device placement on
// any machine: while a FakeDeviceScope lives, the kCuda DeviceRuntime allocates tracked host
// buffers (zero-filled) and counts the copies to and from it, and the kCuda optimizer updates
// (kernels/param_update.h) are the CPU's, run on those buffers. The CUDA backend's own kernels
// see that the runtime is not theirs and decline, so every standard op falls back to the CPU
// with explicit copies.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "lib/ir/device.h"

namespace whittle {
struct ParamUpdates;
namespace testing {

struct FakeDevice {
  std::mutex mu;
  std::set<void*> live;  // buffers allocated on it and not freed
  int copies_to_device = 0, copies_to_host = 0;
  // Of copies_to_device, those queued (DeviceRuntime::copy_async): made when this thread's queue
  // gets there (its next work, copy, synchronisation or replay), as a CUDA stream makes them.
  int queued_copies = 0;
  // Page-locked host memory (DeviceRuntime::allocate_host): start -> bytes, live allocations. A
  // queued copy from it whose caller holds the source (src_held) reads it when the queue gets
  // there, not when it is queued, as a GPU's copy engine does: direct_copies counts those.
  std::map<const void*, size_t> host_live;
  int direct_copies = 0;
  // Downloads queued into page-locked memory (DeviceRuntime::download_async), made when this
  // thread's queue gets there; not among copies_to_host.
  int queued_downloads = 0;
  // Graph capture as the CUDA runtime does it (lib/ir/device.h): while a thread captures, the
  // work it queues (FakeDeviceWork) and its copies into device memory are recorded, not run; a
  // copy to the host, an upload over 4 KiB, a synchronisation or a free spoils the capture; a replay runs
  // the recorded work. launch_us: what each eagerly run piece of work costs (a kernel launch),
  // replay_us: what a replay costs; refuse_captures: every capture fails, naming that.
  int captures = 0, replays = 0;
  int launch_us = 0, replay_us = 0;
  std::string refuse_captures;
  // Whether p is the start of a live buffer of the stand-in device.
  bool Owns(const void* p);
  // Whether [p, p + bytes) lies in live page-locked host memory.
  bool PageLocked(const void* p, size_t bytes);
};

// Runs `work` on the stand-in device: now, or recorded while this thread captures a graph.
void FakeDeviceWork(std::function<void()> work);

// Copies this thread queued that the stand-in has not made yet (none once it synchronized).
int FakeDevicePendingCopies();

// The FakeDevice of the live scope (null outside one).
FakeDevice* ActiveFakeDevice();

class FakeDeviceScope {
 public:
  FakeDeviceScope();
  ~FakeDeviceScope();
  FakeDeviceScope(const FakeDeviceScope&) = delete;
  FakeDeviceScope& operator=(const FakeDeviceScope&) = delete;
  FakeDevice& device() { return state_; }

 private:
  FakeDevice state_;
  const DeviceRuntime* saved_runtime_ = nullptr;
  const ParamUpdates* saved_updates_ = nullptr;
};

}  // namespace testing
}  // namespace whittle
