#include "tests/util/fake_device.h"

#include <cstdlib>
#include <cstring>

#include "kernels/param_update.h"

namespace whittle::testing {
namespace {

FakeDevice* fake = nullptr;

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
    if (dd == sd) return Internal("a copy within one device");
    std::memcpy(dst, src, bytes);
    std::lock_guard<std::mutex> l(fake->mu);
    (dd == DeviceType::kCuda ? fake->copies_to_device : fake->copies_to_host)++;
    return Status::Ok();
  };
  rt.synchronize = []() { return Status::Ok(); };
  return rt;
}();

}  // namespace

bool FakeDevice::Owns(const void* p) {
  std::lock_guard<std::mutex> l(mu);
  return live.count(const_cast<void*>(p)) != 0;
}

FakeDevice* ActiveFakeDevice() { return fake; }

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
