// nbits_rows.h on AVX-512 (F, BW, VL; FMA): 16 bytes of codes (32 weights) per step, a nibble
// turned into its float by one vpermt2ps from a 16-entry table.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/isa/avx512.h"
#include "kernels/cpu/nbits_rows.h"

namespace whittle::cpu::nbits_avx512 {
namespace {

using V = isa::Avx512;  // kernels/cpu/isa/avx512.h

struct Codes {
  static constexpr int kBytes = 16;
  static constexpr int kRowsForOne = 4;
  static void Decode(const uint8_t* p, __m512* lo, __m512* hi) {
    const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    // vpermt2ps with the table twice: the low 4 bits of each lane pick the entry (bit 4 picks
    // between two equal tables), so the low nibble needs no mask.
    *lo = _mm512_permutex2var_ps(table, v, table);
    *hi = _mm512_permutex2var_ps(table, _mm512_srli_epi32(v, 4), table);
  }
  static __m512 ZeroPoints(const uint8_t* p, int64_t n) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(static_cast<__mmask16>(V::Mask(n)), p)));
  }
};

#include "kernels/cpu/nbits_impl.h"  // ZeroTerm, Tile, Rows, DotRowsImpl over V and Codes

}  // namespace

void DotRows(const NBitsRowsArgs& x, float* out, int64_t ldo) { DotRowsImpl(x, out, ldo); }

}  // namespace whittle::cpu::nbits_avx512
