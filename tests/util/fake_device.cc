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

Status Refuse(const std::string& what) {
  Status st = Unimplemented("cannot be captured: " + what);
  if (capturing->refused.ok()) capturing->refused = st;
  return st;
}

void Pause(int us) {
  if (us > 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
}

const DeviceRuntime kFakeRuntime = [] {
  DeviceRuntime rt;
  rt.available = [](std::string*) { return true; };
  rt.allocate = [](size_t bytes) -> void* {
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    std::memset(p, 0, (bytes + 63) / 64 * 64);
    std::lock_guard<std::mutex> l(fake->mu);
    fake->live.insert(p);
    return p;
  };
  rt.release = [](void* p) {
    {
      std::lock_guard<std::mutex> l(fake->mu);
      fake->live.erase(p);
    }
    std::free(p);
  };
  rt.copy = [](void* dst, DeviceType dd, const void* src, DeviceType sd, size_t bytes) -> Status {
    if (dd == DeviceType::kCpu && sd == DeviceType::kCpu) return Internal("a copy within the host");
    if (capturing) {
      if (dd == DeviceType::kCpu) return Refuse("a copy to the host");
      if (sd == DeviceType::kCpu && bytes > 4096) return Refuse("an upload of more than 4 KiB");
      auto held = std::make_shared<std::vector<char>>(static_cast<const char*>(src), static_cast<const char*>(src) + bytes);
      capturing->work.push_back([dst, held] { std::memcpy(dst, held->data(), held->size()); });
      return Status::Ok();
    }
    std::memcpy(dst, src, bytes);
    std::lock_guard<std::mutex> l(fake->mu);
    (dd == DeviceType::kCuda ? fake->copies_to_device : fake->copies_to_host)++;
    return Status::Ok();
  };
  rt.synchronize = []() { return capturing ? Refuse("a synchronisation") : Status::Ok(); };
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

FakeDevice* ActiveFakeDevice() { return fake; }

void FakeDeviceWork(std::function<void()> work) {
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
