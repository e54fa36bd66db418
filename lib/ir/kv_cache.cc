#include "whittle/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace whittle {

KvCache::KvCache(int64_t heads, int64_t dim) : heads_(heads), dim_(dim), buf_(Buffer::Allocate(64)) {}

Status KvCache::Reserve(int64_t rows) {
  if (heads_ < 1 || dim_ < 1)
    return InvalidArgument("KvCache: heads and dim must be >= 1, got " + std::to_string(heads_) + " and " +
                           std::to_string(dim_));
  if (rows <= capacity_) return Status::Ok();
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  if (rows > kMaxElements / (heads_ * dim_))
    return InvalidArgument("KvCache: " + std::to_string(rows) + " rows of " + std::to_string(heads_) + " x " +
                           std::to_string(dim_) + " floats are too many");
  int64_t cap = std::max<int64_t>({rows, 2 * capacity_, 16});
  cap = std::min(cap, kMaxElements / (heads_ * dim_));
  WH_ASSIGN_OR_RETURN(std::shared_ptr<Buffer> b,
                      Buffer::TryAllocate(static_cast<size_t>(heads_ * cap * dim_) * sizeof(float)));
  float* dst = static_cast<float*>(b->data());
  for (int64_t h = 0; h < heads_ && length_ > 0; ++h)
    std::memcpy(dst + h * cap * dim_, row(h, 0), static_cast<size_t>(length_ * dim_) * sizeof(float));
  buf_ = std::move(b);
  capacity_ = cap;
  return Status::Ok();
}

Status KvCache::Truncate(int64_t rows) {
  if (rows < 0 || rows > length_)
    return InvalidArgument("KvCache: cannot keep " + std::to_string(rows) + " of " + std::to_string(length_) + " rows");
  length_ = rows;
  return Status::Ok();
}

Status KvCache::Commit(int64_t rows) {
  if (rows < length_ || rows > capacity_)
    return Internal("KvCache: a run left " + std::to_string(rows) + " rows, the cache holds " +
                    std::to_string(length_) + " of capacity " + std::to_string(capacity_));
  length_ = rows;
  return Status::Ok();
}

Tensor KvCache::Dense() const {
  Tensor t(DType::kFloat32, {1, heads_, length_, dim_});
  for (int64_t h = 0; h < heads_ && length_ > 0; ++h)
    std::memcpy(t.data<float>() + h * length_ * dim_, row(h, 0), static_cast<size_t>(length_ * dim_) * sizeof(float));
  return t;
}

Tensor KvCache::ShapeView() const { return Tensor(DType::kFloat32, {1, heads_, length_, dim_}, buf_); }

}  // namespace whittle
