// Device memory behind Buffer, without a device header in the core: a device backend (the CUDA
// one in kernels/cuda/, or a test's host-memory stand-in) registers a DeviceRuntime for its
// DeviceType — allocate, free, copy between devices, wait for queued work — and Buffer,
// Tensor::ToDevice and the Session go through it. The CPU needs none.
#pragma once

#include <cstddef>
#include <string>

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
};

// rt null unregisters; rt must outlive its use. Thread-safe.
void RegisterDeviceRuntime(DeviceType device, const DeviceRuntime* rt);
const DeviceRuntime* DeviceRuntimeFor(DeviceType device);
const char* DeviceName(DeviceType device);

// dst's bytes = src's (same dtype and dims; any two devices, through the device's runtime).
Status CopyTensorBytes(const Tensor& src, Tensor* dst);

// Whether `device` can run now (the CPU always can); *why says why not.
bool DeviceAvailable(DeviceType device, std::string* why);

}  // namespace whittle
