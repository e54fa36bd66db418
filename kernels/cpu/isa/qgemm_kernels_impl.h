// The int8 kernels' vector bodies (kernels/cpu/isa/qgemm_kernels.h) as templates over an ISA
// policy, included only by the per-ISA translation units (qgemm_kernels_*avx2.cc,
// qgemm_kernels_avx512*.cc), each compiled for its ISA. The policy gives DotBytes (c + the
// four-byte dot products of unsigned u and signed s per int32 lane), MulAddPairs (c + pairwise
// int16 products), kExactBytes, and kAvx512 with EpilogueQuantized512 / DepthwiseTaps512 where set.
// Everything is a member of QKernelsImpl<Isa>, so no symbol is shared between ISAs.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/isa/qgemm_kernels.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/qgemm_tile.h"

namespace whittle::qgemm_internal {

// The dot products without VNNI: vpmaddubsw sums byte pairs in int16 first (exact under
// Q8WeightsFit), vpmaddwd int16 pairs. A template over the policy that derives from it, so each
// ISA's unit has its own copy.
template <class Isa>
struct QDotMaddubs {
  static constexpr bool kExactBytes = false;
  static inline __m256i DotBytes(__m256i c, __m256i u, __m256i s) {
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(c, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static inline __m256i MulAddPairs(__m256i c, __m256i a, __m256i b) {
    return _mm256_add_epi32(c, _mm256_madd_epi16(a, b));
  }
};

template <class Isa>
struct QKernelsImpl {
  // The micro-kernels' last step: R rows of 16 int32 accumulators, held as two 8-lane halves
  // (c0: columns 0-7, c1: 8-15), stored at tile (row stride ldt).
  template <int R>
  static inline void StoreTileRows(const __m256i (&c0)[R], const __m256i (&c1)[R], int32_t* tile, int64_t ldt) {
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * ldt), c0[i]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * ldt + 8), c1[i]);
    }
  }

  // ---- the int16 kernel (kernels/cpu/qgemm.cc)
  template <int R>
  static void Tile16Rows(const int16_t* ap, int64_t lda, const int16_t* bp, int64_t kpairs, int32_t* tile,
                         int64_t ldt) {
    static_assert(R >= 1 && R <= kQMr && kQNr == 16, "micro-kernel shape");
    if constexpr (R == 1) {
      // One row has only two accumulators: alternate four pairs of them over k so consecutive
      // multiply-adds do not wait on each other's latency, then sum (int32 adds wrap alike).
      __m256i c[4][2];
      for (auto& v : c) v[0] = v[1] = _mm256_setzero_si256();
      int64_t kk = 0;
      for (; kk + 4 <= kpairs; kk += 4) {
#pragma GCC unroll 4
        for (int u = 0; u < 4; ++u) {
          const __m256i a = _mm256_set1_epi32(LoadInt32(ap + 2 * (kk + u)));
          c[u][0] = Isa::MulAddPairs(c[u][0], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32 * u)));
          c[u][1] =
              Isa::MulAddPairs(c[u][1], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32 * u + 16)));
        }
        bp += 4 * 2 * kQNr;
      }
      for (; kk < kpairs; ++kk) {
        const __m256i a = _mm256_set1_epi32(LoadInt32(ap + 2 * kk));
        c[0][0] = Isa::MulAddPairs(c[0][0], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp)));
        c[0][1] = Isa::MulAddPairs(c[0][1], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 16)));
        bp += 2 * kQNr;
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(c[0][h], c[1][h]), _mm256_add_epi32(c[2][h], c[3][h]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + 8 * h), sum);
      }
      return;
    }
    __m256i c0[R], c1[R];
#pragma GCC unroll 6
    for (int i = 0; i < R; ++i) c0[i] = c1[i] = _mm256_setzero_si256();
    for (int64_t kk = 0; kk < kpairs; ++kk) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 16));
#pragma GCC unroll 6
      for (int i = 0; i < R; ++i) {
        const __m256i a = _mm256_set1_epi32(LoadInt32(ap + i * lda + 2 * kk));
        c0[i] = Isa::MulAddPairs(c0[i], a, b0);
        c1[i] = Isa::MulAddPairs(c1[i], a, b1);
      }
      bp += 2 * kQNr;
    }
    StoreTileRows<R>(c0, c1, tile, ldt);
  }
  static void Tile16(int64_t rows, const int16_t* ap, int64_t lda, const int16_t* bp, int64_t kpairs, int32_t* tile,
                     int64_t ldt) {
    switch (rows) {
      case 1: return Tile16Rows<1>(ap, lda, bp, kpairs, tile, ldt);
      case 2: return Tile16Rows<2>(ap, lda, bp, kpairs, tile, ldt);
      case 3: return Tile16Rows<3>(ap, lda, bp, kpairs, tile, ldt);
      case 4: return Tile16Rows<4>(ap, lda, bp, kpairs, tile, ldt);
      case 5: return Tile16Rows<5>(ap, lda, bp, kpairs, tile, ldt);
      default: return Tile16Rows<6>(ap, lda, bp, kpairs, tile, ldt);
    }
  }

  static int64_t InterleavePair(const int16_t* r0, const int16_t* r1, int64_t n, int64_t Kp, int64_t kk,
                                int16_t* dst) {
    int64_t j = 0;
    for (; j + kQNr <= n; j += kQNr) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + j));
      const __m256i y = r1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + j)) : _mm256_setzero_si256();
      const __m256i lo = _mm256_unpacklo_epi16(x, y);  // cols 0-3 | 8-11
      const __m256i hi = _mm256_unpackhi_epi16(x, y);  // cols 4-7 | 12-15
      int16_t* d = dst + (j / kQNr) * kQNr * Kp + kk * 2 * kQNr;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_permute2x128_si256(lo, hi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
    }
    return j;
  }

  // ---- the byte kernel (kernels/cpu/qgemm8.cc)
  template <int R, bool kAUnsigned>
  static void Tile8Rows(const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t kquads, int32_t* tile,
                        int64_t ldt) {
    static_assert(R >= 1 && R <= kQ8Mr && kQ8Nr == 16, "micro-kernel shape");
    __m256i c0[R], c1[R];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) c0[i] = c1[i] = _mm256_setzero_si256();
    for (int64_t kq = 0; kq < kquads; ++kq) {
      const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp));
      const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32));
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) {
        const __m256i a = _mm256_set1_epi32(LoadInt32(ap + i * lda + 4 * kq));
        if constexpr (kAUnsigned) {
          c0[i] = Isa::DotBytes(c0[i], a, b0);
          c1[i] = Isa::DotBytes(c1[i], a, b1);
        } else {
          c0[i] = Isa::DotBytes(c0[i], b0, a);
          c1[i] = Isa::DotBytes(c1[i], b1, a);
        }
      }
      bp += 4 * kQ8Nr;
    }
    StoreTileRows<R>(c0, c1, tile, ldt);
  }
  template <bool kAUnsigned>
  static void Tile8Of(int64_t rows, const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t kquads, int32_t* tile,
                      int64_t ldt) {
    switch (rows) {
      case 1: return Tile8Rows<1, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
      case 2: return Tile8Rows<2, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
      case 3: return Tile8Rows<3, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
      default: return Tile8Rows<4, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
    }
  }
  static void Tile8(int64_t rows, bool a_unsigned, const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t kquads,
                    int32_t* tile, int64_t ldt) {
    if (a_unsigned) Tile8Of<true>(rows, ap, lda, bp, kquads, tile, ldt);
    else Tile8Of<false>(rows, ap, lda, bp, kquads, tile, ldt);
  }

  // 4 x 16 bytes -> 16 x 4 per full panel: interleave rows (0,1) and (2,3) bytewise, then the pairs.
  static void PackQuadPanels(const uint8_t* const* r, int64_t full, int64_t panel_step, uint8_t* d) {
    static const uint8_t kZeros[kQ8Nr] = {};
    for (int64_t p = 0; p < full; ++p, d += panel_step) {
      auto row = [&](int i) { return reinterpret_cast<const __m128i*>(r[i] ? r[i] + p * kQ8Nr : kZeros); };
      const __m128i a0 = _mm_loadu_si128(row(0)), a1 = _mm_loadu_si128(row(1));
      const __m128i a2 = _mm_loadu_si128(row(2)), a3 = _mm_loadu_si128(row(3));
      const __m128i l01 = _mm_unpacklo_epi8(a0, a1), h01 = _mm_unpackhi_epi8(a0, a1);
      const __m128i l23 = _mm_unpacklo_epi8(a2, a3), h23 = _mm_unpackhi_epi8(a2, a3);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(l01, l23));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16), _mm_unpackhi_epi16(l01, l23));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32), _mm_unpacklo_epi16(h01, h23));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 48), _mm_unpackhi_epi16(h01, h23));
    }
  }

  // ---- the implicit-GEMM conv (kernels/cpu/qconv_nhwc.cc)
  // tile = R output positions (A rows at a[i]) x 16 output channels (one B panel at bp): for every
  // segment s, seg_quads groups of four bytes from a[i] + seg_off[s].
  template <int R>
  [[gnu::always_inline]] static inline void ConvTileRows(const uint8_t* const* a, const int64_t* seg_off,
                                                         int64_t segments, int64_t seg_quads, const uint8_t* bp,
                                                         int32_t* tile, int64_t ldt) {
    __m256i c0[R], c1[R];
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) c0[i] = c1[i] = _mm256_setzero_si256();
    for (int64_t s = 0; s < segments; ++s) {
      const uint8_t* ap[R];
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i) ap[i] = a[i] + seg_off[s];
      for (int64_t q = 0; q < seg_quads; ++q) {
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32));
#pragma GCC unroll 4
        for (int i = 0; i < R; ++i) {
          const __m256i av = _mm256_set1_epi32(LoadInt32(ap[i] + 4 * q));
          c0[i] = Isa::DotBytes(c0[i], av, b0);
          c1[i] = Isa::DotBytes(c1[i], av, b1);
        }
        bp += 4 * kQ8Nr;
      }
    }
    StoreTileRows<R>(c0, c1, tile, ldt);
  }
  // rows consecutive output positions (pos: their offsets in the padded image xp) x one column
  // panel into out (row stride ldt), four positions per micro-tile, in one call.
  static void ConvBand(int64_t rows, const uint8_t* xp, const int64_t* pos, const int64_t* seg_off, int64_t segments,
                       int64_t seg_quads, const uint8_t* bp, int32_t* out, int64_t ldt) {
    static_assert(kQ8Mr == 4, "ConvBand handles up to 4 rows per tile");
    ForConvBandTiles(rows, xp, pos, [&](const uint8_t* const* a, int64_t n, int64_t r) {
      int32_t* o = out + r * ldt;
      switch (n) {
        case 1: return ConvTileRows<1>(a, seg_off, segments, seg_quads, bp, o, ldt);
        case 2: return ConvTileRows<2>(a, seg_off, segments, seg_quads, bp, o, ldt);
        case 3: return ConvTileRows<3>(a, seg_off, segments, seg_quads, bp, o, ldt);
        default: return ConvTileRows<4>(a, seg_off, segments, seg_quads, bp, o, ldt);
      }
    });
  }

  // dst[c] = max over the kh x kw window of src[i * row + j * ld + c], 8 channels at a time.
  static int64_t MaxOverWindow(const int32_t* src, int64_t ld, int64_t row, int64_t kh, int64_t kw, int64_t n,
                               int32_t* dst) {
    int64_t c = 0;
    auto at = [&](int64_t off) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + off)); };
    if (kh == 2 && kw == 2) {  // the common window, unrolled
      for (; c + 8 <= n; c += 8)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c),
                            _mm256_max_epi32(_mm256_max_epi32(at(c), at(ld + c)),
                                             _mm256_max_epi32(at(row + c), at(row + ld + c))));
    }
    for (; c + 8 <= n; c += 8) {
      __m256i m = at(c);
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j) m = _mm256_max_epi32(m, at(i * row + j * ld + c));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + c), m);
    }
    return c;
  }
  static int64_t MaxOverWindows(const int32_t* src, int64_t ld, int64_t row, int64_t kh, int64_t kw, int64_t n,
                                int64_t count, int64_t step, int32_t* dst) {
    int64_t c = 0;
    for (int64_t w = 0; w < count; ++w) c = MaxOverWindow(src + w * step, ld, row, kh, kw, n, dst + w * ld);
    return c;
  }

  // ---- the requantizing epilogue (kernels/cpu/qgemm_epilogue.cc)
  // The epilogue's constants in registers: stores through byte pointers may alias the Epilogue
  // struct, so reading its fields inside the loop would reload them on every vector.
  struct EpilogueRegs {
    __m256 lo, hi;
    __m256i zp;
    bool u8, relu;
    explicit EpilogueRegs(const Epilogue& e)
        : lo(_mm256_set1_ps(e.lo)), hi(_mm256_set1_ps(e.hi)), zp(_mm256_set1_epi32(e.zp)), u8(e.u8), relu(e.relu) {}
  };

  // 8 outputs from 8 accumulators; bias and multiplier already per lane.
  template <QOutput::Kind kKind>
  static inline void Epilogue8(const EpilogueRegs& e, __m256i a, __m256i b, __m256 m, void* y, int64_t j) {
    a = _mm256_add_epi32(a, b);
    if constexpr (kKind == QOutput::Kind::kInt32) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<int32_t*>(y) + j), a);
    } else if constexpr (kKind == QOutput::Kind::kFloat) {
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(a), m);
      if (e.relu) v = _mm256_max_ps(v, _mm256_setzero_ps());
      _mm256_storeu_ps(static_cast<float*>(y) + j, v);
    } else {
      __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(a), m);
      v = _mm256_min_ps(_mm256_max_ps(v, e.lo), e.hi);
      // Default MXCSR rounding: half to even.
      const __m256i q = _mm256_add_epi32(_mm256_cvtps_epi32(v), e.zp);
      const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
      const __m128i b8 = e.u8 ? _mm_packus_epi16(w16, w16) : _mm_packs_epi16(w16, w16);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(static_cast<uint8_t*>(y) + j), b8);
    }
  }

  // rows x n accumulators (row stride lda) of local rows r0.., columns c0.. -> y (already offset
  // to (r0, c0), row stride ldy elements of es bytes); the vector part of each row.
  template <QOutput::Kind kKind>
  static int64_t EpilogueVector(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n,
                                int64_t r0, int64_t c0, char* y, int64_t ldy, size_t es) {
    const int64_t nv = n / 8 * 8;
    const EpilogueRegs regs(e);
    // Locals: the stores through y may alias e's fields.
    const int32_t* const bias = e.bias.data();
    const float* const mult = e.mult.data();
    if (e.channel_is_row) {
      for (int64_t i = 0; i < rows; ++i, acc += lda, y += static_cast<size_t>(ldy) * es) {
        const __m256i b = _mm256_set1_epi32(bias[r0 + i]);
        const __m256 m = _mm256_set1_ps(mult[r0 + i]);
        for (int64_t j = 0; j < nv; j += 8)
          Epilogue8<kKind>(regs, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)), b, m, y, j);
      }
    } else {
      for (int64_t i = 0; i < rows; ++i, acc += lda, y += static_cast<size_t>(ldy) * es)
        for (int64_t j = 0; j < nv; j += 8)
          Epilogue8<kKind>(regs, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + c0 + j)),
                           _mm256_loadu_ps(mult + c0 + j), y, j);
    }
    return nv;
  }

  static int64_t EpilogueRowsVector(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n,
                                    int64_t r0, int64_t c0, char* y, int64_t ldy, size_t es) {
    switch (e.kind) {
      case QOutput::Kind::kInt32:
        return EpilogueVector<QOutput::Kind::kInt32>(e, acc, lda, rows, n, r0, c0, y, ldy, es);
      case QOutput::Kind::kFloat:
        return EpilogueVector<QOutput::Kind::kFloat>(e, acc, lda, rows, n, r0, c0, y, ldy, es);
      case QOutput::Kind::kQuantized:
        if constexpr (Isa::kAvx512) return Isa::EpilogueQuantized512(e, acc, lda, rows, n, r0, c0, y, ldy);
        else return EpilogueVector<QOutput::Kind::kQuantized>(e, acc, lda, rows, n, r0, c0, y, ldy, es);
    }
    return 0;
  }

  // ---- the depthwise conv's tap sums (kernels/cpu/qlinear.cc): per block of 32 outputs the sums
  // stay in registers across the taps; bytes zero-extended to int32 lanes (x in the low int16, 0
  // in the high one) and vpmaddwd with (w, 0) pairs gives x * w exactly in one multiply.
  static void DepthwiseTaps(int32_t* acc, const uint8_t* const* src, const int32_t* w, int taps, int64_t n) {
    if constexpr (Isa::kAvx512) {
      Isa::DepthwiseTaps512(acc, src, w, taps, n);
    } else {
      for (int64_t p = 0; p < n; p += 32) {
        __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                        _mm256_setzero_si256()};
        for (int t = 0; t < taps; ++t) {
          const __m256i wt = _mm256_set1_epi32(static_cast<uint16_t>(w[t]));
          const uint8_t* q = src[t] + p;
          for (int k = 0; k < 4; ++k)
            a[k] = _mm256_add_epi32(
                a[k],
                _mm256_madd_epi16(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + 8 * k))),
                                  wt));
        }
        for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc + p + 8 * k), a[k]);
      }
    }
  }

  static constexpr QIsaKernels Table(const char* name) {
    return QIsaKernels{name,           Isa::kExactBytes, &Tile16,        &Tile8,         &ConvBand,
                       &InterleavePair, &PackQuadPanels, &MaxOverWindows, &EpilogueRowsVector, &DepthwiseTaps};
  }
};

}  // namespace whittle::qgemm_internal
