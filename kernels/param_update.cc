#include "kernels/param_update.h"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <vector>

#include "kernels/cpu/parallel.h"

namespace whittle {
namespace {

constexpr int64_t kBlock = 16384;  // elements per task, and per partial sum

Status CpuSumSquares(const float* g, int64_t n, int threads, double* sum) {
  // Partial sums per fixed block, added in block order: the same result on any thread count.
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(static_cast<size_t>(blocks), 0.0);
  ParallelFor(blocks, threads, [&](int64_t b) {
    const int64_t begin = b * kBlock, len = std::min(n, begin + kBlock) - begin;
    partial[static_cast<size_t>(b)] = SquaresShare(g + begin, len, 0, 1);
  });
  *sum = 0;
  for (double v : partial) *sum += v;
  return Status::Ok();
}

Status CpuUpdate(const UpdateHyper& h, float* p, const float* g, float* m, float* v, int64_t n, int threads) {
  ParallelFor((n + kBlock - 1) / kBlock, threads, [&](int64_t b) {
    const int64_t end = std::min(n, (b + 1) * kBlock);
    for (int64_t i = b * kBlock; i < end; ++i) UpdateAt(h, p, g, m, v, i);
  });
  return Status::Ok();
}

const ParamUpdates kCpuUpdates = [] {
  ParamUpdates u;
  u.sum_squares = CpuSumSquares;
  u.update = CpuUpdate;
  return u;
}();

std::mutex mu;
const ParamUpdates* registered[8] = {};

}  // namespace

void RegisterParamUpdates(DeviceType device, const ParamUpdates* u) {
  const size_t d = static_cast<size_t>(device);
  if (d >= std::size(registered)) return;
  std::lock_guard<std::mutex> l(mu);
  registered[d] = u;
}

const ParamUpdates* ParamUpdatesFor(DeviceType device) {
  if (device == DeviceType::kCpu) return &kCpuUpdates;
  const size_t d = static_cast<size_t>(device);
  if (d >= std::size(registered)) return nullptr;
  std::lock_guard<std::mutex> l(mu);
  return registered[d];
}

}  // namespace whittle
