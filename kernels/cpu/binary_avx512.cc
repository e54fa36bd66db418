// binary_gemm.h on AVX-512 (compiled with -mavx512f -mavx512vpopcntdq -mfma: see CMakeLists.txt;
// run only where the CPU has AVX512_VPOPCNTDQ). XorPopcount: tiles of R rows of a against C
// columns of w, eight words per VPOPCNTQ, the last partial vector read with a masked load.
// XorPopcountPanels: one column per lane, a row word broadcast. SignMaskGemm (activations=float):
// the weights' sign bits are the write masks of adds (and FMAs by 1) of broadcast inputs.
// GCC 12 bug 105593: AVX-512 intrinsics built on _mm*_undefined_* warn as uninitialized.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <type_traits>

#include "kernels/cpu/binary_gemm.h"
#include "kernels/cpu/binary_scalar_impl.h"
#include "lib/ir/binary_format.h"

namespace whittle::cpu::binary_avx512 {
namespace {

inline int64_t Sum64(__m512i v) {
  alignas(64) int64_t t[8];
  _mm512_store_si512(t, v);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

template <int R, int C>
inline void Tile(const uint64_t* a, int64_t lda, const uint64_t* w, int64_t words, int32_t* out, int64_t ldo) {
  __m512i acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_si512();
  for (int64_t i = 0; i < words; i += 8) {
    const __mmask8 m = words - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (words - i)) - 1);
    __m512i y[C];
    for (int c = 0; c < C; ++c) y[c] = _mm512_maskz_loadu_epi64(m, w + c * words + i);
    for (int r = 0; r < R; ++r) {
      const __m512i x = _mm512_maskz_loadu_epi64(m, a + r * lda + i);
      for (int c = 0; c < C; ++c) acc[r][c] = _mm512_add_epi64(acc[r][c], _mm512_popcnt_epi64(_mm512_xor_si512(x, y[c])));
    }
  }
  if constexpr (R == 2 && C == 4) {
    // Eight horizontal sums at once: fold pairs of accumulators (unpack), then 128-bit chunks
    // (shuffle_i64x2) twice; lanes end up (0,0) (0,1) (0,2) (0,3) (1,0) ... (1,3).
    __m512i s[4];
    for (int i = 0; i < 4; ++i) {
      const __m512i a = acc[i / 2][(i % 2) * 2], b = acc[i / 2][(i % 2) * 2 + 1];
      s[i] = _mm512_add_epi64(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    }
    const __m512i u01 = _mm512_add_epi64(_mm512_shuffle_i64x2(s[0], s[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_i64x2(s[0], s[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i u23 = _mm512_add_epi64(_mm512_shuffle_i64x2(s[2], s[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                         _mm512_shuffle_i64x2(s[2], s[3], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i w = _mm512_add_epi64(_mm512_shuffle_i64x2(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i64x2(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
    alignas(32) int32_t t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), _mm512_cvtepi64_epi32(w));
    for (int c = 0; c < 4; ++c) {
      out[c] = t[c];
      out[ldo + c] = t[4 + c];
    }
  } else {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[r * ldo + c] = static_cast<int32_t>(Sum64(acc[r][c]));
  }
}

template <int C>
inline void Columns(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t words, int32_t* out,
                    int64_t ldo) {
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) Tile<2, C>(a + r * lda, lda, w, words, out + r * ldo, ldo);
  for (; r < rows; ++r) Tile<1, C>(a + r * lda, lda, w, words, out + r * ldo, ldo);
}

}  // namespace

void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo) {
  // Rows shorter than one vector (a Conv's few words per im2col row): the vector tile's
  // horizontal sums would cost more than the counts; POPCNT per word instead.
  if (words < 8) return XorPopcountRows(rows, a, lda, w, n, words, out, ldo);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) Columns<4>(rows, a, lda, w + j * words, words, out + j, ldo);
  for (; j < n; ++j) Columns<1>(rows, a, lda, w + j * words, words, out + j, ldo);
}

namespace {

// R rows x G panels (8 columns each): acc[r][g] lane c counts column 8g + c of row r.
template <int R, int G>
inline void PanelTile(const uint64_t* a, int64_t lda, const uint64_t* panels, int64_t words, int32_t* out, int64_t ldo,
                      int64_t cols) {
  __m512i acc[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) acc[r][g] = _mm512_setzero_si512();
  const int64_t stride = words * 8;
  for (int64_t i = 0; i < words; ++i) {
    __m512i y[G];
    for (int g = 0; g < G; ++g) y[g] = _mm512_loadu_si512(panels + g * stride + i * 8);
    for (int r = 0; r < R; ++r) {
      const __m512i x = _mm512_set1_epi64(static_cast<long long>(a[r * lda + i]));
      for (int g = 0; g < G; ++g) acc[r][g] = _mm512_add_epi64(acc[r][g], _mm512_popcnt_epi64(_mm512_xor_si512(x, y[g])));
    }
  }
  for (int g = 0; g < G; ++g) {
    const int64_t c = cols - g * 8;
    if (c <= 0) break;
    const __mmask8 m = c >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << c) - 1);
    for (int r = 0; r < R; ++r)
      _mm256_mask_storeu_epi32(out + r * ldo + g * 8, m, _mm512_cvtepi64_epi32(acc[r][g]));
  }
}

template <int G>
inline void PanelRows(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* panels, int64_t words, int32_t* out,
                      int64_t ldo, int64_t cols) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) PanelTile<4, G>(a + r * lda, lda, panels, words, out + r * ldo, ldo, cols);
  for (; r < rows; ++r) PanelTile<1, G>(a + r * lda, lda, panels, words, out + r * ldo, ldo, cols);
}

}  // namespace

void XorPopcountPanels(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* panels, int64_t n, int64_t words,
                       int32_t* out, int64_t ldo) {
  const int64_t stride = words * 8;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) PanelRows<2>(rows, a, lda, panels + (j / 8) * stride, words, out + j, ldo, 16);
  for (; j < n; j += 8) PanelRows<1>(rows, a, lda, panels + (j / 8) * stride, words, out + j, ldo, std::min<int64_t>(8, n - j));
}

double PackSigns(const float* x, int64_t k, uint64_t* out) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  __m512 sum = zero;
  int64_t i = 0;
  for (; i + 64 <= k; i += 64) {
    uint64_t word = 0;
    for (int q = 0; q < 4; ++q) {
      const __m512 v = _mm512_loadu_ps(x + i + q * 16);
      word |= static_cast<uint64_t>(_mm512_cmp_ps_mask(v, zero, _CMP_GE_OQ)) << (q * 16);
      sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), abs_mask)));
    }
    out[i / 64] = word;
  }
  alignas(64) float t[16];
  _mm512_store_ps(t, sum);
  double s = 0;
  for (float f : t) s += f;
  if (i < k) s += whittle::PackSigns(x + i, k - i, out + i / 64);
  return s;
}

namespace {

// Sums over k blocks of this many inputs: a 6-row tile's A block and a 64-column mask block stay
// in L1 (at K = 1568 the whole rows did not: 0.126 ms against the decode path's 0.117 at batch 64).
constexpr int64_t kSignKc = 512;

// What SignTile does with its sums: kb inputs from k0 of K, the partial sums of earlier blocks
// kept in y (raw), the last block's turned into the output.
struct SignBlock {
  int64_t kb;
  bool first, last;
};

// R rows x V vectors (16 columns each, V / 2 panels of 32 masks K apart): acc[r][v] lane c sums
// x[r, k] over the k whose mask bit 16 (v % 2) + c is set. Even vectors take masked adds, odd ones
// masked FMAs by 1.0 (exact: x * 1 + acc rounds once, as the add does), so that CPUs with
// separate add and FMA pipes (AMD Zen 4/5: 2 + 2 per cycle, measured 3.4 masked ops per cycle
// mixed against 2.0 for either alone) run both halves at once.
template <int R, int V>
inline void SignTile(const float* a, int64_t lda, const float* rowsum, const uint32_t* masks, int64_t K,
                     const SignBlock& blk, const float* alpha, const float* bias, bool relu, float* y, int64_t ldy,
                     int64_t cols) {
  __mmask16 cm[V];
  for (int v = 0; v < V; ++v) {
    const int64_t c = cols - v * 16;
    cm[v] = c >= 16 ? static_cast<__mmask16>(0xffff) : c <= 0 ? 0 : static_cast<__mmask16>((1u << c) - 1);
  }
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      acc[r][v] = blk.first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(cm[v], y + r * ldy + v * 16);
  const __m512 one = _mm512_set1_ps(1.f);
  const uint16_t* m16[V / 2];
  for (int p = 0; p < V / 2; ++p) m16[p] = reinterpret_cast<const uint16_t*>(masks + p * K);
  for (int64_t k = 0; k < blk.kb; ++k) {
    __mmask16 m[V];
    for (int v = 0; v < V; ++v) m[v] = _cvtu32_mask16(m16[v / 2][2 * k + (v & 1)]);
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(a[r * lda + k]);
      for (int v = 0; v < V; ++v)
        acc[r][v] = (v & 1) ? _mm512_mask3_fmadd_ps(xb, one, acc[r][v], m[v])
                            : _mm512_mask_add_ps(acc[r][v], m[v], acc[r][v], xb);
    }
  }
  const __m512 two = _mm512_set1_ps(2.f), zero = _mm512_setzero_ps();
  for (int v = 0; v < V; ++v) {
    if (!cm[v]) break;
    if (!blk.last) {
      for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldy + v * 16, cm[v], acc[r][v]);
      continue;
    }
    const __m512 al = _mm512_maskz_loadu_ps(cm[v], alpha + v * 16);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(cm[v], bias + v * 16) : zero;
    for (int r = 0; r < R; ++r) {
      // sum over k of sign * x = (sum over set bits) - (sum over clear bits) = 2 acc - rowsum.
      __m512 o = _mm512_fmadd_ps(al, _mm512_fmsub_ps(two, acc[r][v], _mm512_set1_ps(rowsum[r])), b);
      if (relu) o = _mm512_max_ps(o, zero);
      _mm512_mask_storeu_ps(y + r * ldy + v * 16, cm[v], o);
    }
  }
}

template <int V>
inline void SignRows(int64_t rows, const float* a, int64_t lda, const float* rowsum, const uint32_t* masks, int64_t K,
                     const SignBlock& blk, const float* alpha, const float* bias, bool relu, float* y, int64_t ldy,
                     int64_t cols) {
  int64_t r = 0;
  auto tile = [&](auto R) {
    constexpr int kR = decltype(R)::value;
    SignTile<kR, V>(a + r * lda, lda, rowsum + r, masks, K, blk, alpha, bias, relu, y + r * ldy, ldy, cols);
    r += kR;
  };
  constexpr int kBig = V <= 4 ? 6 : 3;  // sums in 24 of the 32 zmm registers
  while (r + kBig <= rows) tile(std::integral_constant<int, kBig>());
  switch (rows - r) {
    case 5: tile(std::integral_constant<int, V <= 4 ? 5 : 1>()); break;
    case 4: tile(std::integral_constant<int, V <= 4 ? 4 : 1>()); break;
    case 3: tile(std::integral_constant<int, 3>()); break;
    case 2: tile(std::integral_constant<int, 2>()); break;
    case 1: tile(std::integral_constant<int, 1>()); break;
    default: break;
  }
  while (r < rows) tile(std::integral_constant<int, 1>());
}

}  // namespace

void SumRows(int64_t rows, const float* a, int64_t lda, int64_t k, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = a + r * lda;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + i + 16));
    }
    for (; i < k; i += 16) {
      const __mmask16 m = k - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (k - i)) - 1);
      s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(m, x + i));
    }
    out[r] = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
  }
}

void SignMaskGemm(int64_t rows, const float* a, int64_t lda, const float* rowsum, const uint32_t* masks, int64_t K,
                  int64_t n, const float* alpha, const float* bias, bool relu, float* y, int64_t ldy) {
  for (int64_t k0 = 0; k0 < K; k0 += kSignKc) {
    const SignBlock blk{std::min(kSignKc, K - k0), k0 == 0, k0 + kSignKc >= K};
    const float* ak = a + k0;
    const uint32_t* mk = masks + k0;
    int64_t j = 0;
    // One or two rows: eight vectors per tile keep eight add chains in flight; more rows: four.
    if (rows <= 2)
      for (; j + 128 <= n; j += 128)
        SignRows<8>(rows, ak, lda, rowsum, mk + (j / 32) * K, K, blk, alpha + j, bias ? bias + j : nullptr, relu,
                    y + j, ldy, 128);
    for (; j + 64 <= n; j += 64)
      SignRows<4>(rows, ak, lda, rowsum, mk + (j / 32) * K, K, blk, alpha + j, bias ? bias + j : nullptr, relu, y + j,
                  ldy, 64);
    for (; j < n; j += 32)
      SignRows<2>(rows, ak, lda, rowsum, mk + (j / 32) * K, K, blk, alpha + j, bias ? bias + j : nullptr, relu, y + j,
                  ldy, std::min<int64_t>(32, n - j));
  }
}

void DecodeSignPanel(const uint32_t* masks, int64_t K, const float* alpha, float* out) {
  const __m512 a0 = _mm512_loadu_ps(alpha), a1 = _mm512_loadu_ps(alpha + 16);
  const __m512 n0 = _mm512_sub_ps(_mm512_setzero_ps(), a0), n1 = _mm512_sub_ps(_mm512_setzero_ps(), a1);
  for (int64_t k = 0; k < K; ++k) {
    _mm512_storeu_ps(out + k * 32, _mm512_mask_blend_ps(static_cast<__mmask16>(masks[k] & 0xffff), n0, a0));
    _mm512_storeu_ps(out + k * 32 + 16, _mm512_mask_blend_ps(static_cast<__mmask16>(masks[k] >> 16), n1, a1));
  }
}

}  // namespace whittle::cpu::binary_avx512
