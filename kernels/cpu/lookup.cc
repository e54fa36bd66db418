#include "kernels/cpu/lookup.h"

#include <atomic>

#include "kernels/cpu/isa/features.h"

namespace whittle::cpu {
namespace lookup_internal {
namespace {
std::atomic<int> g_vector_override{-1};

bool UseVbmi() {
  const IsaFeatures& f = CpuFeatures();
  return f.Avx512() && f.avx512vbmi && g_vector_override.load(std::memory_order_relaxed) != 0;
}

bool UseAvx512() {
  return CpuFeatures().Avx512() && g_vector_override.load(std::memory_order_relaxed) != 0;
}
}  // namespace

void SetLookupVector(int use) { g_vector_override.store(use, std::memory_order_relaxed); }
}  // namespace lookup_internal

void LookupBytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y) {
  if (lookup_internal::UseVbmi()) return lookup_avx512vbmi::Bytes(x, n, table, y);
  const int64_t i = CpuFeatures().Avx2() ? lookup_avx2::Bytes(x, n, table, y) : 0;
  for (int64_t j = i; j < n; ++j) y[j] = table[x[j]];
}

void LookupFloats(const uint8_t* x, int64_t n, const float* table, float* y) {
  if (lookup_internal::UseAvx512()) return lookup_avx512::Floats(x, n, table, y);
  for (int64_t i = 0; i < n; ++i) y[i] = table[x[i]];
}

}  // namespace whittle::cpu
