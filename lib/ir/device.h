// Device memory behind Buffer, without a device header in the core: a device backend (the CUDA
// one in kernels/cuda/, or a test's host-memory stand-in) registers a DeviceRuntime for its
// DeviceType — allocate, free, copy between devices, wait for queued work — and Buffer,
// Tensor::ToDevice and the Session go through it. The CPU needs none.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct DeviceRuntime {
  // Whether a device can be used now; otherwise why not (one line: "no CUDA device: ...").
  bool (*available)(std::string* why) = nullptr;
  // Zero-filled device memory of at least `bytes`, or null when it cannot be had.
  void* (*allocate)(size_t bytes) = nullptr;
  void (*release)(void* p) = nullptr;
  // bytes from src (on src_dev) to dst (on dst_dev), one of them this device; completes before it
  // returns as far as the host is concerned (a device-to-host copy waits for queued kernels).
  Status (*copy)(void* dst, DeviceType dst_dev, const void* src, DeviceType src_dev, size_t bytes) = nullptr;
  // Waits for all work this thread queued on the device.
  Status (*synchronize)() = nullptr;
  // bytes from src (on the host or this device) to dst on this device, queued in order with the
  // work this thread queues there, without waiting for it: dst is ready for this thread's later
  // device work only, and another thread must not touch dst before this one has synchronized.
  // src_held false: the host may reuse src as soon as this returns. src_held true: the caller keeps
  // src's bytes unchanged (and alive) until this thread synchronizes, so a page-locked src
  // (allocate_host) is read by the device directly, later, with no staging copy and no wait.
  // Null: copy serves (QueueTensorBytes).
  Status (*copy_async)(void* dst, const void* src, DeviceType src_dev, size_t bytes, bool src_held) = nullptr;
  // bytes from src on this device to dst, page-locked host memory (allocate_host), queued after the
  // work this thread queued there without waiting for it: dst holds them once this thread has
  // synchronized. Null: none (copy serves, after the work is done).
  Status (*download_async)(void* dst, const void* src, size_t bytes) = nullptr;
  // Zero-filled host memory that this device's copies read and write directly (page-locked), or
  // null when it cannot be had; release_host frees it. Null where the device has none.
  void* (*allocate_host)(size_t bytes) = nullptr;
  void (*release_host)(void* p) = nullptr;

  // Graph capture (CUDA graphs; null where the device has none). Between begin_capture and
  // end_capture the work this thread queues is recorded, not run; end_capture hands it back as a
  // graph that replay queues again, as one launch, on the calling thread's queue. What the
  // capture allocated for itself (kernel scratch, the GEMM library's workspace) belongs to the
  // graph; every other buffer it reads or writes must outlive it (the caller keeps them, and what is
  // released on the thread while it captures: CaptureReleases, since a free mid-capture may be refused). A
  // capture fails — end_capture returns why, and the thread queues normally again — when the
  // recorded work could not be replayed faithfully: a copy to the host, a larger upload, a
  // synchronisation, a kernel that declines (state of its own per thread). Nothing recorded ran.
  Status (*begin_capture)() = nullptr;
  Status (*end_capture)(void** graph) = nullptr;
  Status (*replay)(void* graph) = nullptr;
  void (*drop_graph)(void* graph) = nullptr;
};

// While one is active on a thread (a graph capture's span), device and page-locked buffers
// released on that thread are kept, not freed: work recorded in the capture may still point at
// them (a kernel's temporary, an arena's replaced upload), and a free waits for the device, which
// a CUDA capture may refuse (the stand-in device refuses it). Whoever keeps the graph keeps this
// with it and drops it after the graph; destroying it frees what it holds. One per thread at a time.
class CaptureReleases {
 public:
  CaptureReleases();
  ~CaptureReleases();
  CaptureReleases(const CaptureReleases&) = delete;
  CaptureReleases& operator=(const CaptureReleases&) = delete;
  // Releases on this thread free again; what was kept stays kept. (The destructor stops too.)
  void Stop();
  size_t size() const { return held_.size(); }

 private:
  friend bool KeptForCapture(const DeviceRuntime* rt, void* p, DeviceType device, size_t bytes);
  struct Held {
    const DeviceRuntime* rt;
    void* p;
    DeviceType device;  // kCpu: page-locked host memory
    size_t bytes;
  };
  std::vector<Held> held_;
  bool active_ = false;
};
// Buffer's destructor: whether this thread's active CaptureReleases took p (then it is not freed);
// device kCpu: page-locked host memory.
bool KeptForCapture(const DeviceRuntime* rt, void* p, DeviceType device, size_t bytes);

// Device memory this process holds through Buffer (weights, constants, arenas, graphs, kernel
// scratch and caches), now and at its highest since the last ResetDeviceMemoryPeak: what models
// cost on the device. Memory a library keeps for itself (the CUDA context, cuBLAS's handles,
// cuFFT's plans) is not counted. Thread-safe.
struct DeviceMemoryUse {
  int64_t live_bytes = 0, peak_bytes = 0;
};
DeviceMemoryUse DeviceMemoryInUse(DeviceType device);
void ResetDeviceMemoryPeak(DeviceType device);  // the peak starts again from what is live
// Buffer's bookkeeping: bytes allocated (positive) or freed (negative) on a device.
void CountDeviceMemory(DeviceType device, int64_t bytes);

// rt null unregisters; rt must outlive its use. Thread-safe.
void RegisterDeviceRuntime(DeviceType device, const DeviceRuntime* rt);
const DeviceRuntime* DeviceRuntimeFor(DeviceType device);

// A device whose runtime lives in a module loaded on demand (the CUDA backend:
// kernels/backend_module.cc sets this from a static initializer, before any use of the device).
// load runs once per process, at the first DeviceRuntimeFor, DeviceAvailable or
// RegisterDeviceRuntime of that device, so a runtime registered by hand (a test's stand-in)
// replaces the loaded one and is never replaced by it. load registers the device's runtime, or
// returns false with a one-line why, which DeviceAvailable then gives. Thread-safe.
using DeviceRuntimeLoader = bool (*)(std::string* why);
void SetDeviceRuntimeLoader(DeviceType device, DeviceRuntimeLoader load);
const char* DeviceName(DeviceType device);

// dst's bytes = src's (same dtype and dims; any two devices, through the device's runtime).
Status CopyTensorBytes(const Tensor& src, Tensor* dst);
// The same, queued where dst is on a device with copy_async (see there: only this thread's later
// device work may read dst before it synchronizes); otherwise CopyTensorBytes. src_held: the
// caller keeps src's bytes as they are until this thread synchronizes with dst's device (a
// Session's caller-fed inputs, which Run waits for before it returns).
Status QueueTensorBytes(const Tensor& src, Tensor* dst, bool src_held = false);

// Whether `device` can run now (the CPU always can); *why says why not.
bool DeviceAvailable(DeviceType device, std::string* why);

}  // namespace whittle
