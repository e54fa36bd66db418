// Tensor: dtype, concrete dims and a shared Buffer that knows its device (public API; internal
// code includes it through lib/ir/tensor.h). Whittle's own buffers are 64-byte aligned; a wrapped
// caller's buffer (Buffer::Wrap) only as its elements need, which every kernel accepts. Copies share the buffer (cheap);
// Clone() copies the bytes. Dims are int64 as in ONNX; CheckedNumElements guards hostile shapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "whittle/status.h"
#include "whittle/types.h"

namespace whittle {

struct DeviceRuntime;  // lib/ir/device.h (internal): who allocates and copies a device's memory
struct MemoryMeter;    // lib/ir/memory_meter.h (internal): a session's memory budget

class Buffer {
 public:
  // 64-byte aligned CPU memory, zero-filled. Throws std::bad_alloc (its what() names the size)
  // when the memory cannot be had; every public entry point (Session, the C API, the CLIs) turns
  // that into an error Status, so nothing a model asks for ends the process. TryAllocate returns
  // the error instead.
  static std::shared_ptr<Buffer> Allocate(size_t bytes);
  static StatusOr<std::shared_ptr<Buffer>> TryAllocate(size_t bytes);
  // Zero-filled memory on `device` through its registered DeviceRuntime (lib/ir/device.h);
  // the CPU takes Allocate.
  static StatusOr<std::shared_ptr<Buffer>> AllocateOn(DeviceType device, size_t bytes);
  // Zero-filled host memory (device() is kCpu) that `for_device`'s copies read directly
  // (page-locked, through its DeviceRuntime's allocate_host): an input a caller refills run after
  // run is uploaded without a staging copy. Plain host memory (Allocate) for the CPU or a device
  // with no such memory; an error when the device cannot lock that much.
  static StatusOr<std::shared_ptr<Buffer>> AllocatePageLocked(DeviceType for_device, size_t bytes);
  // The `bytes` at `offset` (a multiple of 64) of the open regular file fd, memory-mapped
  // copy-on-write instead of read (gigabyte weights in external data): pages come from the page
  // cache when first touched, the file never changes, and the mapping outlives fd. IoError when the
  // system refuses the mapping.
  static StatusOr<std::shared_ptr<Buffer>> MapFile(int fd, uint64_t offset, size_t bytes);
  // A caller's host memory, read in place (an input fed without a copy: a NumPy array, a
  // framework's tensor). Whittle never writes it and never recycles it for its own values; the
  // bytes must stay as they are while a run reads them. `owner` keeps them alive: it is dropped
  // (its deleter runs) when the last tensor on this buffer goes, on whichever thread that is.
  // `data` must be aligned to the element size of the tensors laid on it.
  static std::shared_ptr<Buffer> Wrap(const void* data, size_t bytes, std::shared_ptr<const void> owner);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t size() const { return size_; }
  DeviceType device() const { return device_; }
  // Host memory from AllocatePageLocked on a device that has it.
  bool page_locked() const { return device_ == DeviceType::kCpu && runtime_ != nullptr; }
  // Memory-mapped from a file (MapFile).
  bool mapped() const { return map_base_ != nullptr; }
  // A caller's memory (Wrap): read only, never reused for another value.
  bool external() const { return owner_ != nullptr; }
  // A mapped buffer gives its resident pages back (the next read maps them from the file again),
  // so weights that a kernel has repacked, or a pass has consumed, stop counting in the process's
  // memory. Only for buffers nobody wrote to (initializers are never written). No-op otherwise.
  void ReleaseResidentPages() const;

 private:
  Buffer() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
  DeviceType device_ = DeviceType::kCpu;
  // The one that allocated a device (or page-locked host) buffer frees it.
  const DeviceRuntime* runtime_ = nullptr;
  // A session's memory meter (lib/ir/memory_meter.h) that counts this buffer while it lives.
  std::shared_ptr<MemoryMeter> meter_;
  // MapFile: the page-aligned mapping that holds data_ (unmapped by the destructor).
  void* map_base_ = nullptr;
  size_t map_len_ = 0;
  // Wrap: what keeps the caller's bytes alive (nothing is freed here).
  std::shared_ptr<const void> owner_;
  friend struct MemoryMeter;
};

// Quantization parameters attached to a tensor (per-tensor when axis < 0 and one scale).
struct QuantParams {
  std::vector<float> scale;
  std::vector<int64_t> zero_point;
  int64_t axis = -1;
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled tensor. dims must be valid (WH_CHECK).
  Tensor(DType dtype, Dims dims);
  // Wraps an existing buffer (shared) at a byte offset.
  Tensor(DType dtype, Dims dims, std::shared_ptr<Buffer> buffer, size_t offset = 0);

  template <class T>
  static Tensor FromVector(const Dims& dims, const std::vector<T>& values) {
    Tensor t(DTypeOf<T>(), dims);
    WH_CHECK(static_cast<int64_t>(values.size()) == t.numel());
    T* p = t.data<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];
    return t;
  }
  template <class T>
  static Tensor Scalar(T v) { return FromVector<T>({}, {v}); }

  // ONNX's other value kinds, as a Tensor carries them at run time (an input or output of
  // ValueKind kSequence or kOptional*): a sequence of tensors of element type `element` (held
  // by value; the elements are shared, never written after they joined), or an optional
  // without a value. Both have dtype() kUndefined, no dims and no bytes; an optional with a
  // value is that value itself.
  static Tensor Sequence(DType element, std::vector<Tensor> elements);
  static Tensor NoValue();
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_no_value() const { return kind_ == Kind::kNoValue; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  const std::vector<Tensor>& elements() const;  // a sequence's (WH_CHECK)
  DType element_dtype() const { return elem_dtype_; }

  bool defined() const { return buffer_ != nullptr || kind_ != Kind::kTensor; }
  DType dtype() const { return dtype_; }
  const Dims& dims() const { return dims_; }
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t numel() const { return NumElements(dims_); }
  size_t nbytes() const { return DTypeStorageBytes(dtype_, numel()); }

  void* raw_data() { return static_cast<char*>(buffer_->data()) + offset_; }
  const void* raw_data() const { return static_cast<const char*>(buffer_->data()) + offset_; }
  template <class T> T* data() {
    WH_CHECK(DTypeOf<T>() == dtype_ || (sizeof(T) == 1 && DTypeStorageBytes(dtype_, 2) <= 2));
    return static_cast<T*>(raw_data());
  }
  template <class T> const T* data() const {
    WH_CHECK(DTypeOf<T>() == dtype_ || (sizeof(T) == 1 && DTypeStorageBytes(dtype_, 2) <= 2));
    return static_cast<const T*>(raw_data());
  }

  // Same bytes, new dims (element count must match). Shares the buffer.
  Tensor Reshaped(const Dims& dims) const;
  // Deep copy of the bytes.
  Tensor Clone() const;
  // Bytewise equality of dtype, dims and contents.
  bool BitwiseEquals(const Tensor& other) const;

  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  size_t offset() const { return offset_; }
  // Where the bytes live (kCpu for an undefined tensor). data() on a device tensor is a device
  // pointer: only that device's kernels and copies may touch it; Clone and BitwiseEquals need kCpu.
  DeviceType device() const { return buffer_ ? buffer_->device() : DeviceType::kCpu; }
  // The same tensor on `device` (this one when it is there already; a copy otherwise).
  StatusOr<Tensor> ToDevice(DeviceType device) const;

  std::optional<QuantParams> quant;

 private:
  DType dtype_ = DType::kUndefined;
  Dims dims_;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
  enum class Kind : uint8_t { kTensor, kSequence, kNoValue };
  Kind kind_ = Kind::kTensor;
  DType elem_dtype_ = DType::kUndefined;
  std::shared_ptr<const std::vector<Tensor>> elements_;
};

}  // namespace whittle
