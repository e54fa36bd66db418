// KvCache: one layer's key or value cache for one sequence, grown in place. float32 rows on the
// host, laid out [heads, capacity, dim]; the first length() rows of every head are the past.
// Session::RunWithCaches hands it to the kernel that reads the past and appends the call's new
// rows (ai.onnx Attention's past_key/past_value -> present_key/present_value): the past is never
// copied per step, and the buffer moves (copying the valid rows once) only when the capacity
// doubles, so a sequence of n tokens copies O(n) rows in all instead of O(n^2). What Decoder
// keeps per layer; services that step a decoder themselves keep one per cache input. Not
// thread-safe: a cache belongs to one sequence and one run at a time.
#pragma once

#include <cstdint>
#include <memory>

#include "whittle/status.h"
#include "whittle/tensor.h"

namespace whittle {

class KvCache {
 public:
  // heads >= 1, dim >= 1 (checked by Reserve and the kernels; a cache of no rows allocates little).
  KvCache(int64_t heads, int64_t dim);

  int64_t heads() const { return heads_; }
  int64_t dim() const { return dim_; }
  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }

  // Room for at least `rows` rows per head: the capacity at least doubles when it grows, and the
  // valid rows move once. An error (nothing changed) when the memory cannot be had or rows is
  // beyond what a tensor can describe.
  Status Reserve(int64_t rows);
  // Row `pos` (< capacity) of head `head`: dim floats.
  float* row(int64_t head, int64_t pos) { return base() + (head * capacity_ + pos) * dim_; }
  const float* row(int64_t head, int64_t pos) const { return base() + (head * capacity_ + pos) * dim_; }
  // Keeps the first `rows` (0 <= rows <= length) rows: 0 starts a new sequence, less rewinds.
  Status Truncate(int64_t rows);
  // Sets the valid length after rows [length, rows) were written (rows <= capacity): what the
  // session does once a run that appended to the cache has succeeded.
  Status Commit(int64_t rows);
  // [1, heads, length, dim]: the valid rows as the model's present.* output holds them (a copy).
  Tensor Dense() const;
  // A tensor of dims [1, heads, length, dim] over the cache's buffer, for shape inference and
  // shape reads only (its bytes are in the cache's layout, not that tensor's).
  Tensor ShapeView() const;

 private:
  float* base() const { return static_cast<float*>(buf_->data()); }
  int64_t heads_, dim_, length_ = 0, capacity_ = 0;
  std::shared_ptr<Buffer> buf_;
};

}  // namespace whittle
