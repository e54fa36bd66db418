// The word-at-a-time XorPopcount loop (binary_gemm.h), included by binary_popcnt.cc (built with
// -mpopcnt: one POPCNT per word) and by binary.cc (the portable path: the compiler's bit trick).
#pragma once

#include <cstdint>

namespace whittle::cpu {
namespace {

// Four columns at a time share each load of a's word.
inline void XorPopcountRows(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n,
                            int64_t words, int32_t* out, int64_t ldo) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const uint64_t *w0 = w + j * words, *w1 = w0 + words, *w2 = w1 + words, *w3 = w2 + words;
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t* ar = a + r * lda;
      int64_t c0 = 0, c1 = 0, c2 = 0, c3 = 0;
      for (int64_t i = 0; i < words; ++i) {
        const uint64_t x = ar[i];
        c0 += __builtin_popcountll(x ^ w0[i]);
        c1 += __builtin_popcountll(x ^ w1[i]);
        c2 += __builtin_popcountll(x ^ w2[i]);
        c3 += __builtin_popcountll(x ^ w3[i]);
      }
      int32_t* o = out + r * ldo + j;
      o[0] = static_cast<int32_t>(c0);
      o[1] = static_cast<int32_t>(c1);
      o[2] = static_cast<int32_t>(c2);
      o[3] = static_cast<int32_t>(c3);
    }
  }
  for (; j < n; ++j)
    for (int64_t r = 0; r < rows; ++r) {
      int64_t c = 0;
      for (int64_t i = 0; i < words; ++i) c += __builtin_popcountll(a[r * lda + i] ^ w[j * words + i]);
      out[r * ldo + j] = static_cast<int32_t>(c);
    }
}

}  // namespace
}  // namespace whittle::cpu
