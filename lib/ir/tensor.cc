#include "lib/ir/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "lib/ir/device.h"
#include "lib/ir/memory_meter.h"

namespace whittle {

namespace {

// What Buffer::Allocate and NumElements throw (std::bad_alloc, so that callers that catch that
// alone catch these), with the size in its message.
class AllocationFailure : public std::bad_alloc {
 public:
  explicit AllocationFailure(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

}  // namespace

void CheckScratch(int64_t count, int64_t elem_bytes, const char* what) {
  int64_t bytes = 0;
  if (count < 0 || elem_bytes < 0 || __builtin_mul_overflow(count, elem_bytes, &bytes))
    throw AllocationFailure(std::string(what) + ": scratch of " + std::to_string(count) + " elements overflows");
  const int64_t budget = ProcessMemoryBudget();
  if (budget > 0 && bytes > budget)
    throw AllocationFailure(std::string(what) + ": scratch needs " + HumanBytes(static_cast<uint64_t>(bytes)) +
                            ", over the memory budget of " + HumanBytes(static_cast<uint64_t>(budget)) +
                            " (--max-memory)");
}

int64_t NumElements(const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    WH_CHECK(d >= 0);
    if (__builtin_mul_overflow(n, d, &n))
      throw AllocationFailure("shape " + DimsToString(dims) + " has too many elements (over 2^63)");
  }
  return n;
}

StatusOr<int64_t> CheckedNumElements(const Dims& dims) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument("negative dimension " + std::to_string(d) + " in shape " + DimsToString(dims));
    if (d != 0 && n > kLimit / d)
      return InvalidArgument("shape " + DimsToString(dims) + " has too many elements (overflow)");
    n *= d;
  }
  return n;
}

std::string DimsToString(const Dims& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

StatusOr<std::shared_ptr<Buffer>> Buffer::TryAllocate(size_t bytes) {
  // aligned_alloc wants a multiple of the alignment; past 2^62 no machine has the memory.
  if (bytes > (size_t{1} << 62))
    return ResourceExhausted("cannot allocate " + std::to_string(bytes) + " bytes (more than any machine has)");
  const size_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) return ResourceExhausted("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = p;
  b->size_ = bytes;
  return b;
}

std::shared_ptr<Buffer> Buffer::Allocate(size_t bytes) {
  auto b = TryAllocate(bytes);
  if (!b.ok()) throw AllocationFailure(b.status().message());
  return std::move(*b);
}

StatusOr<std::shared_ptr<Buffer>> Buffer::AllocateOn(DeviceType device, size_t bytes) {
  if (device == DeviceType::kCpu) return TryAllocate(bytes);
  const DeviceRuntime* rt = DeviceRuntimeFor(device);
  if (!rt) return Unimplemented(std::string("no runtime for device '") + DeviceName(device) + "' in this build");
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = rt->allocate(bytes == 0 ? 1 : bytes);
  if (!b->data_)
    return Internal(std::string("out of ") + DeviceName(device) + " memory allocating " +
                             std::to_string(bytes) + " bytes");
  b->size_ = bytes;
  b->device_ = device;
  b->runtime_ = rt;
  CountDeviceMemory(device, static_cast<int64_t>(bytes));
  return b;
}

StatusOr<std::shared_ptr<Buffer>> Buffer::AllocatePageLocked(DeviceType for_device, size_t bytes) {
  const DeviceRuntime* rt = DeviceRuntimeFor(for_device);
  if (!rt || !rt->allocate_host) return TryAllocate(bytes);
  auto b = std::shared_ptr<Buffer>(new Buffer());
  b->data_ = rt->allocate_host(bytes == 0 ? 1 : bytes);
  if (!b->data_)
    return Internal(std::string("could not allocate ") + std::to_string(bytes) + " bytes of page-locked host memory for " +
                    DeviceName(for_device));
  b->size_ = bytes;
  b->runtime_ = rt;
  return b;
}

StatusOr<std::shared_ptr<Buffer>> Buffer::MapFile(int fd, uint64_t offset, size_t bytes) {
  if (offset % 64 != 0) return InvalidArgument("Buffer::MapFile: offset " + std::to_string(offset) + " is not 64-byte aligned");
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const size_t len = bytes + static_cast<size_t>(offset - start);
  void* base = ::mmap(nullptr, len == 0 ? 1 : len, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(start));
  if (base == MAP_FAILED)
    return IoError("cannot map " + std::to_string(bytes) + " bytes of a file: " + std::string(std::strerror(errno)));
  std::shared_ptr<Buffer> b(new Buffer());
  b->map_base_ = base;
  b->map_len_ = len == 0 ? 1 : len;
  b->data_ = static_cast<char*>(base) + (offset - start);
  b->size_ = bytes;
  return b;
}

std::shared_ptr<Buffer> Buffer::Wrap(const void* data, size_t bytes, std::shared_ptr<const void> owner) {
  static const char kEmpty[1] = {0};  // keeps external() true for an ownerless wrap
  std::shared_ptr<Buffer> b(new Buffer());
  b->data_ = const_cast<void*>(data);  // read only: external() buffers are never written (tensor.h)
  b->size_ = bytes;
  b->owner_ = owner ? std::move(owner) : std::shared_ptr<const void>(std::shared_ptr<const void>(), kEmpty);
  return b;
}

void Buffer::ReleaseResidentPages() const {
  if (!map_base_) return;
  ::madvise(map_base_, map_len_, MADV_DONTNEED);
}

Buffer::~Buffer() {
  if (map_base_) {
    ::munmap(map_base_, map_len_);
    return;
  }
  if (owner_) return;  // a caller's memory: dropping owner_ (after this body) releases it
  MemoryMeter::Detach(*this);
  // In a graph capture's span the memory stays, counted, until the graph goes (CaptureReleases).
  if (runtime_ && KeptForCapture(runtime_, data_, device_, size_)) return;
  if (device_ != DeviceType::kCpu) CountDeviceMemory(device_, -static_cast<int64_t>(size_));
  if (device_ == DeviceType::kCpu && runtime_) {
    runtime_->release_host(data_);
  } else if (device_ == DeviceType::kCpu) {
    std::free(data_);
  } else {
    runtime_->release(data_);  // even if another runtime was registered for the device since
  }
}

Tensor::Tensor(DType dtype, Dims dims) : dtype_(dtype), dims_(std::move(dims)) {
  WH_CHECK(DTypeBits(dtype) > 0);
  buffer_ = Buffer::Allocate(DTypeStorageBytes(dtype, NumElements(dims_)));
}

Tensor::Tensor(DType dtype, Dims dims, std::shared_ptr<Buffer> buffer, size_t offset)
    : dtype_(dtype), dims_(std::move(dims)), buffer_(std::move(buffer)), offset_(offset) {
  WH_CHECK(buffer_ != nullptr);
  WH_CHECK(offset_ + DTypeStorageBytes(dtype_, NumElements(dims_)) <= buffer_->size());
}

Tensor Tensor::Sequence(DType element, std::vector<Tensor> elements) {
  Tensor t;
  t.kind_ = Kind::kSequence;
  t.elem_dtype_ = element;
  t.elements_ = std::make_shared<const std::vector<Tensor>>(std::move(elements));
  return t;
}

Tensor Tensor::NoValue() {
  Tensor t;
  t.kind_ = Kind::kNoValue;
  return t;
}

const std::vector<Tensor>& Tensor::elements() const {
  WH_CHECK(is_sequence());
  return *elements_;
}

Tensor Tensor::Reshaped(const Dims& dims) const {
  if (!is_tensor()) return *this;  // Identity of a sequence or an optional
  WH_CHECK(NumElements(dims) == numel());
  Tensor t = *this;
  t.dims_ = dims;
  return t;
}

StatusOr<Tensor> Tensor::ToDevice(DeviceType to) const {
  if (is_sequence()) {
    std::vector<Tensor> moved;
    for (const Tensor& e : *elements_) {
      WH_ASSIGN_OR_RETURN(Tensor m, e.ToDevice(to));
      moved.push_back(std::move(m));
    }
    return Sequence(elem_dtype_, std::move(moved));
  }
  if (!defined() || !is_tensor() || device() == to) return *this;
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b, Buffer::AllocateOn(to, nbytes()));
  Tensor t(dtype_, dims_, std::move(b));
  WH_RETURN_IF_ERROR(CopyTensorBytes(*this, &t));
  t.quant = quant;
  return t;
}

Tensor Tensor::Clone() const {
  if (is_no_value()) return *this;
  if (is_sequence()) {
    std::vector<Tensor> copies;
    for (const Tensor& e : *elements_) copies.push_back(e.Clone());
    return Sequence(elem_dtype_, std::move(copies));
  }
  if (!defined()) return Tensor();
  WH_CHECK(device() == DeviceType::kCpu);
  Tensor t(dtype_, dims_);
  std::memcpy(t.raw_data(), raw_data(), nbytes());
  t.quant = quant;
  return t;
}

bool Tensor::BitwiseEquals(const Tensor& o) const {
  if (kind_ != o.kind_ || elem_dtype_ != o.elem_dtype_) return false;
  if (is_no_value()) return true;
  if (is_sequence()) {
    if (elements_->size() != o.elements_->size()) return false;
    for (size_t i = 0; i < elements_->size(); ++i)
      if (!(*elements_)[i].BitwiseEquals((*o.elements_)[i])) return false;
    return true;
  }
  if (dtype_ != o.dtype_ || dims_ != o.dims_) return false;
  if (!defined() || !o.defined()) return defined() == o.defined();
  WH_CHECK(device() == DeviceType::kCpu && o.device() == DeviceType::kCpu);
  return std::memcmp(raw_data(), o.raw_data(), nbytes()) == 0;
}

}  // namespace whittle
