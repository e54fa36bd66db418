// Tensor for the library's code: Buffer and Tensor are public API (include/whittle/tensor.h, with
// DType, DeviceType and Dims from include/whittle/types.h); TensorView is the non-owning form that
// kernels may take.
#pragma once

#include <cstdint>

#include "lib/ir/dtype.h"
#include "lib/ir/status.h"
#include "whittle/tensor.h"

namespace whittle {

// Non-owning view for kernels.
struct TensorView {
  DType dtype = DType::kUndefined;
  const int64_t* dims = nullptr;
  int rank = 0;
  void* data = nullptr;
  static TensorView Of(Tensor& t) { return {t.dtype(), t.dims().data(), t.rank(), t.raw_data()}; }
  static TensorView Of(const Tensor& t) {
    return {t.dtype(), t.dims().data(), t.rank(), const_cast<void*>(t.raw_data())};
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
};

}  // namespace whittle
