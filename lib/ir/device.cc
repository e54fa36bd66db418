#include "lib/ir/device.h"

#include <atomic>

namespace whittle {
namespace {

std::atomic<const DeviceRuntime*> g_runtimes[2];  // indexed by DeviceType

}  // namespace

void RegisterDeviceRuntime(DeviceType device, const DeviceRuntime* rt) {
  g_runtimes[static_cast<int>(device)].store(rt);
}

const DeviceRuntime* DeviceRuntimeFor(DeviceType device) {
  return device == DeviceType::kCpu ? nullptr : g_runtimes[static_cast<int>(device)].load();
}

const char* DeviceName(DeviceType device) { return device == DeviceType::kCuda ? "cuda" : "cpu"; }

bool DeviceAvailable(DeviceType device, std::string* why) {
  if (device == DeviceType::kCpu) return true;
  const DeviceRuntime* rt = DeviceRuntimeFor(device);
  if (!rt) {
    if (why) *why = std::string("no ") + DeviceName(device) + " backend in this build";
    return false;
  }
  return rt->available(why);
}

}  // namespace whittle
