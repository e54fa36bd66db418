#include "runtime/serving/batch_rows.h"

#include <cstring>
#include <memory>

namespace whittle::serving {

size_t RowBytes(const Tensor& t) {
  size_t bytes = DTypeSize(t.dtype());
  for (int i = 1; i < t.rank(); ++i) bytes *= static_cast<size_t>(t.dim(i));
  return bytes;
}

namespace {

// A fresh host tensor of dtype and dims, without throwing when the memory is short.
StatusOr<Tensor> NewTensor(DType dtype, const Dims& dims) {
  WH_ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(dims));
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> buffer, Buffer::TryAllocate(DTypeStorageBytes(dtype, n)));
  return Tensor(dtype, dims, std::move(buffer));
}

}  // namespace

StatusOr<Tensor> StackRows(const std::vector<const Tensor*>& parts) {
  WH_CHECK(!parts.empty());
  const Tensor& first = *parts[0];
  const size_t row_bytes = RowBytes(first);
  Dims dims = first.dims();
  dims[0] = 0;
  for (const Tensor* p : parts) dims[0] += p->dim(0);
  WH_ASSIGN_OR_RETURN(Tensor out, NewTensor(first.dtype(), dims));
  out.quant = first.quant;
  char* dst = static_cast<char*>(out.raw_data());
  for (const Tensor* p : parts) {
    const size_t bytes = static_cast<size_t>(p->dim(0)) * row_bytes;
    if (bytes > 0) std::memcpy(dst, p->raw_data(), bytes);
    dst += bytes;
  }
  return out;
}

StatusOr<Tensor> CopyRows(const Tensor& t, int64_t begin, int64_t count) {
  WH_CHECK(begin >= 0 && count >= 0 && begin + count <= t.dim(0));
  const size_t row_bytes = RowBytes(t);
  Dims dims = t.dims();
  dims[0] = count;
  WH_ASSIGN_OR_RETURN(Tensor out, NewTensor(t.dtype(), dims));
  out.quant = t.quant;
  const size_t bytes = static_cast<size_t>(count) * row_bytes;
  if (bytes > 0)
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + static_cast<size_t>(begin) * row_bytes, bytes);
  return out;
}

}  // namespace whittle::serving
