#include "lib/ir/device.h"

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

namespace whittle {
namespace {

std::atomic<const DeviceRuntime*> g_runtimes[2];  // indexed by DeviceType
thread_local CaptureReleases* g_capture_releases = nullptr;  // this thread's active one
std::atomic<int64_t> g_live[2], g_peak[2];  // device bytes held through Buffer, indexed by DeviceType
std::atomic<DeviceRuntimeLoader> g_loaders[2];  // SetDeviceRuntimeLoader's, indexed by DeviceType
thread_local bool g_loading = false;  // this thread runs a loader (which registers the runtime)

// Why the device's loader found no runtime (empty: no loader, or it succeeded); written once.
std::string& LoadError(DeviceType device) {
  static std::string why[2];
  return why[static_cast<int>(device)];
}

// The first use of a device with a loader runs it (once; the others wait for it to finish).
void LoadOnce(DeviceType device) {
  static std::once_flag once[2];
  static std::atomic<bool> done[2];
  const int d = static_cast<int>(device);
  if (done[d].load(std::memory_order_acquire)) return;
  const DeviceRuntimeLoader load = g_loaders[d].load();
  if (!load || g_loading) return;
  std::call_once(once[d], [&] {
    g_loading = true;
    std::string why;
    if (!load(&why)) LoadError(device) = why.empty() ? "its module did not load" : why;
    g_loading = false;
    done[d].store(true, std::memory_order_release);
  });
}

}  // namespace

CaptureReleases::CaptureReleases() {
  if (!g_capture_releases) {
    g_capture_releases = this;
    active_ = true;
  }
}

CaptureReleases::~CaptureReleases() {
  Stop();
  for (const Held& h : held_) {
    if (h.device == DeviceType::kCpu) {
      h.rt->release_host(h.p);
    } else {
      h.rt->release(h.p);
      CountDeviceMemory(h.device, -static_cast<int64_t>(h.bytes));
    }
  }
}

void CaptureReleases::Stop() {
  if (active_ && g_capture_releases == this) g_capture_releases = nullptr;
  active_ = false;
}

bool KeptForCapture(const DeviceRuntime* rt, void* p, DeviceType device, size_t bytes) {
  if (!g_capture_releases || !rt) return false;
  g_capture_releases->held_.push_back({rt, p, device, bytes});
  return true;
}

void CountDeviceMemory(DeviceType device, int64_t bytes) {
  const int d = static_cast<int>(device);
  const int64_t live = g_live[d].fetch_add(bytes) + bytes;
  int64_t peak = g_peak[d].load();
  while (live > peak && !g_peak[d].compare_exchange_weak(peak, live)) {
  }
}

DeviceMemoryUse DeviceMemoryInUse(DeviceType device) {
  const int d = static_cast<int>(device);
  return {g_live[d].load(), g_peak[d].load()};
}

void ResetDeviceMemoryPeak(DeviceType device) {
  const int d = static_cast<int>(device);
  g_peak[d].store(g_live[d].load());
}

void RegisterDeviceRuntime(DeviceType device, const DeviceRuntime* rt) {
  LoadOnce(device);  // first, so that what is registered here stays
  g_runtimes[static_cast<int>(device)].store(rt);
}

const DeviceRuntime* DeviceRuntimeFor(DeviceType device) {
  if (device == DeviceType::kCpu) return nullptr;
  LoadOnce(device);
  return g_runtimes[static_cast<int>(device)].load();
}

void SetDeviceRuntimeLoader(DeviceType device, DeviceRuntimeLoader load) {
  g_loaders[static_cast<int>(device)].store(load);
}

const char* DeviceName(DeviceType device) { return device == DeviceType::kCuda ? "cuda" : "cpu"; }

Status CopyTensorBytes(const Tensor& src, Tensor* dst) {
  if (src.dtype() != dst->dtype() || src.dims() != dst->dims())
    return Internal("CopyTensorBytes: " + DimsToString(src.dims()) + " into " + DimsToString(dst->dims()));
  if (src.nbytes() == 0) return Status::Ok();
  const DeviceType from = src.device(), to = dst->device();
  if (from == DeviceType::kCpu && to == DeviceType::kCpu) {
    std::memcpy(dst->raw_data(), src.raw_data(), src.nbytes());
    return Status::Ok();
  }
  const DeviceRuntime* rt = DeviceRuntimeFor(from == DeviceType::kCpu ? to : from);
  if (!rt) return Unimplemented(std::string("no runtime for device '") + DeviceName(from == DeviceType::kCpu ? to : from) + "'");
  return rt->copy(dst->raw_data(), to, src.raw_data(), from, src.nbytes());
}

Status QueueTensorBytes(const Tensor& src, Tensor* dst, bool src_held) {
  const DeviceRuntime* rt = dst->device() != DeviceType::kCpu ? DeviceRuntimeFor(dst->device()) : nullptr;
  if (!rt || !rt->copy_async || src.nbytes() == 0 || src.dtype() != dst->dtype() || src.dims() != dst->dims())
    return CopyTensorBytes(src, dst);
  if (src.device() != DeviceType::kCpu && src.device() != dst->device()) return CopyTensorBytes(src, dst);
  return rt->copy_async(dst->raw_data(), src.raw_data(), src.device(), src.nbytes(), src_held);
}

bool DeviceAvailable(DeviceType device, std::string* why) {
  if (device == DeviceType::kCpu) return true;
  const DeviceRuntime* rt = DeviceRuntimeFor(device);
  if (!rt) {
    if (why) *why = LoadError(device).empty() ? std::string("no ") + DeviceName(device) + " backend in this build"
                                              : LoadError(device);
    return false;
  }
  return rt->available(why);
}

}  // namespace whittle
