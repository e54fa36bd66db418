#include "tests/util/fake_device.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/param_update.h"

namespace whittle::testing {
namespace {

FakeDevice* fake = nullptr;

using Work = std::vector<std::function<void()>>;
struct Capture {
  Work work;
  Status refused = Status::Ok();
};
thread_local Capture* capturing = nullptr;
// Copies this thread queued (copy_async) and the stand-in has not made yet: made, in order, before
// this thread's next work, copy, synchronisation or replay, as a stream orders them. Another
// thread reading the destination before then sees the old bytes, as on a GPU.
thread_local Work pending;

void Flush() {
  Work now;
  now.swap(pending);
  for (auto& w : now) w();
}

Status Refuse(const std::string& what) {
  Status st = Unimplemented("cannot be captured: " + what);
  if (capturing->refused.ok()) capturing->refused = st;
  return st;
}

void Pause(int us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

// Copies src's bytes as they are now into dst when the returned work runs.
std::function<void()> CopyOfNow(void* dst, const void* src, size_t bytes) {
  auto held = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
  return [dst, held] { std::memcpy(dst, held->data(), held->size()); };
}

// Zero-filled, 64-byte aligned host memory (the stand-in's device and page-locked memory alike).
void* ZeroedAlloc(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  std::memset(p, 0, rounded);
  return p;
}

Status FakeCopy(void* dst, DeviceType dd, const void* src, DeviceType sd, size_t bytes) {
  if (dd == DeviceType::kCpu && sd == DeviceType::kCpu) return Internal("a copy within the host");
  Flush();
  if (capturing) {
    if (dd == DeviceType::kCpu) return Refuse("a copy to the host");
    if (sd == DeviceType::kCpu && bytes > 4096) return Refuse("an upload of more than 4 KiB");
    capturing->work.push_back(CopyOfNow(dst, src, bytes));
    return Status::Ok();
  }
  std::memcpy(dst, src, bytes);
  std::lock_guard<std::mutex> l(fake->mu);
  (dd == DeviceType::kCuda ? fake->copies_to_device : fake->copies_to_host)++;
  return Status::Ok();
}

const DeviceRuntime kFakeRuntime = [] {
  DeviceRuntime rt;
  rt.available = [](std::string*) { return true; };
  rt.allocate = [](size_t bytes) -> void* {
    void* p = ZeroedAlloc(bytes);
    std::lock_guard<std::mutex> l(fake->mu);
    fake->live.insert(p);
    return p;
  };
  rt.release = [](void* p) {
    // cudaFree waits for the device, which a capture may refuse; the work recorded may still read
    // p (the session keeps what is released while it captures: CaptureReleases).
    if (capturing) (void)Refuse("a free (it waits for the device)");
    Flush();
    {
      std::lock_guard<std::mutex> l(fake->mu);
      fake->live.erase(p);
    }
    std::free(p);
  };
  rt.copy = FakeCopy;
  rt.copy_async = [](void* dst, const void* src, DeviceType sd, size_t bytes, bool src_held) -> Status {
    if (capturing) return FakeCopy(dst, DeviceType::kCuda, src, sd, bytes);
    // Held page-locked memory is read when the queue gets there (a caller that changed or freed src
    // before this thread synchronized would see it in dst); otherwise the bytes are taken now (the
    // host may reuse src), the copy made when the queue gets there.
    const bool direct = sd == DeviceType::kCpu && src_held && fake->PageLocked(src, bytes);
    pending.push_back(direct ? [dst, src, bytes] { std::memcpy(dst, src, bytes); } : CopyOfNow(dst, src, bytes));
    std::lock_guard<std::mutex> l(fake->mu);
    fake->direct_copies += direct;
    ++fake->copies_to_device;
    ++fake->queued_copies;
    return Status::Ok();
  };
  rt.download_async = [](void* dst, const void* src, size_t bytes) -> Status {
    if (capturing) return Refuse("a copy to the host");
    if (!fake->PageLocked(dst, bytes)) return Internal("a queued download into memory that is not page-locked");
    pending.push_back([dst, src, bytes] { std::memcpy(dst, src, bytes); });
    std::lock_guard<std::mutex> l(fake->mu);
    ++fake->queued_downloads;
    return Status::Ok();
  };
  rt.allocate_host = [](size_t bytes) -> void* {
    void* p = ZeroedAlloc(bytes);
    std::lock_guard<std::mutex> l(fake->mu);
    fake->host_live[p] = bytes;
    return p;
  };
  rt.release_host = [](void* p) {
    if (capturing) (void)Refuse("a free of page-locked memory (it waits for the device)");
    Flush();  // cudaFreeHost waits for the copies that read p
    {
      std::lock_guard<std::mutex> l(fake->mu);
      fake->host_live.erase(p);
    }
    std::free(p);
  };
  rt.synchronize = []() {
    if (capturing) return Refuse("a synchronisation");
    Flush();
    return Status::Ok();
  };
  rt.begin_capture = []() -> Status {
    if (capturing) return Internal("a capture is already under way");
    capturing = new Capture;
    return Status::Ok();
  };
  rt.end_capture = [](void** graph) -> Status {
    std::unique_ptr<Capture> c(capturing);
    capturing = nullptr;
    *graph = nullptr;
    if (!c) return Internal("no capture under way");
    if (!c->refused.ok()) return c->refused;
    if (!fake->refuse_captures.empty()) return Unimplemented(fake->refuse_captures);
    *graph = new Work(std::move(c->work));
    std::lock_guard<std::mutex> l(fake->mu);
    ++fake->captures;
    return Status::Ok();
  };
  rt.replay = [](void* graph) -> Status {
    if (capturing) return Refuse("a replay");
    Flush();
    Pause(fake->replay_us);
    for (auto& w : *static_cast<Work*>(graph)) w();
    std::lock_guard<std::mutex> l(fake->mu);
    ++fake->replays;
    return Status::Ok();
  };
  rt.drop_graph = [](void* graph) { delete static_cast<Work*>(graph); };
  return rt;
}();

}  // namespace

bool FakeDevice::Owns(const void* p) {
  std::lock_guard<std::mutex> l(mu);
  return live.count(const_cast<void*>(p)) != 0;
}

bool FakeDevice::PageLocked(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> l(mu);
  auto it = host_live.upper_bound(p);
  if (it == host_live.begin()) return false;
  --it;
  const char* start = static_cast<const char*>(it->first);
  const char* q = static_cast<const char*>(p);
  return q >= start && q + bytes <= start + it->second;
}

FakeDevice* ActiveFakeDevice() { return fake; }

int FakeDevicePendingCopies() { return static_cast<int>(pending.size()); }

void FakeDeviceWork(std::function<void()> work) {
  Flush();  // queued before this work (a capture begins after them, so they are not recorded)
  if (capturing) {
    capturing->work.push_back(std::move(work));
    return;
  }
  Pause(fake->launch_us);
  work();
}

FakeDeviceScope::FakeDeviceScope() {
  fake = &state_;
  saved_runtime_ = DeviceRuntimeFor(DeviceType::kCuda);
  saved_updates_ = ParamUpdatesFor(DeviceType::kCuda);
  RegisterDeviceRuntime(DeviceType::kCuda, &kFakeRuntime);
  RegisterParamUpdates(DeviceType::kCuda, ParamUpdatesFor(DeviceType::kCpu));
}

FakeDeviceScope::~FakeDeviceScope() {
  RegisterDeviceRuntime(DeviceType::kCuda, saved_runtime_);
  RegisterParamUpdates(DeviceType::kCuda, saved_updates_);
  fake = nullptr;
}

}  // namespace whittle::testing
