#include "kernels/cpu/qgemm.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.h>
#include <string>

#include "kernels/cpu/parallel.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace whittle {
namespace {

// The backend split (own kernel vs oneDNN) is measured by tests/bench/qgemm_bench.cc. On the
// AVX2 machine without VNNI (Zen 3) oneDNN was at most ~1.2x faster on the MLP shapes, slower on
// the conv shapes, and its accumulators differ from the exact int32 sums on full-range data
// (vpmaddubsw saturates int16 pair sums): ours is used. On an AVX512-VNNI machine (Sapphire
// Rapids class) oneDNN is exact and 2-4x faster than ours for K >= 128: it is used there.

// The common value of a zero-point vector (null: 0); false when the entries differ.
bool ScalarZp(const std::vector<int32_t>* zp, int32_t* v) {
  *v = zp && !zp->empty() ? (*zp)[0] : 0;
  if (!zp) return true;
  for (int32_t z : *zp)
    if (z != *v) return false;
  return true;
}

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

int32_t ZpAt(const std::vector<int32_t>* zp, int64_t i) {
  if (!zp) return 0;
  return zp->size() == 1 ? (*zp)[0] : (*zp)[static_cast<size_t>(i)];
}

// Per-call epilogue state: the output format in plain fields (so stores through byte pointers do
// not force reloads) and each local row's or column's multiplier and bias, padded to kQNr.
struct Epilogue {
  const QOutput* out = nullptr;
  QOutput::Kind kind = QOutput::Kind::kInt32;
  bool u8 = false, relu = false, channel_is_row = false;
  float lo = 0.f, hi = 0.f;  // clamp bounds relative to the zero point
  int32_t zp = 0;
  std::vector<float> mult;
  std::vector<int32_t> bias;
};

Epilogue MakeEpilogue(const QOutput& out, bool channel_is_row, int64_t channel_offset, int64_t rows, int64_t cols) {
  Epilogue e;
  e.out = &out;
  e.kind = out.kind;
  e.u8 = out.dtype == DType::kUInt8;
  e.relu = out.relu;
  e.channel_is_row = channel_is_row;
  e.lo = static_cast<float>(out.qmin - out.zero_point);
  e.hi = static_cast<float>(out.qmax - out.zero_point);
  e.zp = out.zero_point;
  const int64_t n = channel_is_row ? rows : cols;
  const int64_t np = RoundUp(std::max<int64_t>(n, 1), kQNr);
  e.mult.assign(static_cast<size_t>(np), 0.f);
  e.bias.assign(static_cast<size_t>(np), 0);
  for (int64_t c = 0; c < n; ++c) {
    if (!out.multiplier.empty()) e.mult[static_cast<size_t>(c)] = out.MultiplierAt(channel_offset + c);
    e.bias[static_cast<size_t>(c)] = out.BiasAt(channel_offset + c);
  }
  return e;
}

size_t OutElemSize(DType t) { return t == DType::kUInt8 || t == DType::kInt8 ? 1 : 4; }

// Scalar epilogue of one element — the reference formula, written so the vector path's
// clamp-then-round order gives identical results (the bounds are integers).
void EpilogueScalar(const Epilogue& e, int32_t acc, float mult, int32_t bias, void* y, int64_t i) {
  const int32_t a = WrapAdd(acc, bias);
  switch (e.kind) {
    case QOutput::Kind::kInt32:
      static_cast<int32_t*>(y)[i] = a;
      return;
    case QOutput::Kind::kFloat: {
      const float v = QRequantize(a, mult);
      static_cast<float*>(y)[i] = e.relu ? std::max(v, 0.f) : v;
      return;
    }
    case QOutput::Kind::kQuantized: {
      const float v = std::min(std::max(QRequantize(a, mult), e.lo), e.hi);
      const int32_t q = static_cast<int32_t>(std::nearbyint(v)) + e.zp;
      if (e.u8) static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(q);
      else static_cast<int8_t*>(y)[i] = static_cast<int8_t>(q);
      return;
    }
  }
}

#if defined(__AVX2__)
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
inline void Epilogue8(const EpilogueRegs& e, __m256i a, __m256i b, __m256 m, void* y, int64_t j) {
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

template <QOutput::Kind kKind>
int64_t EpilogueVector(const Epilogue& e, const int32_t* acc, int64_t n, int64_t r, int64_t c0, void* y) {
  int64_t j = 0;
  const EpilogueRegs regs(e);
  if (e.channel_is_row) {
    const __m256i b = _mm256_set1_epi32(e.bias[static_cast<size_t>(r)]);
    const __m256 m = _mm256_set1_ps(e.mult[static_cast<size_t>(r)]);
    for (; j + 8 <= n; j += 8)
      Epilogue8<kKind>(regs, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)), b, m, y, j);
  } else {
    const int32_t* bias = e.bias.data() + c0;
    const float* mult = e.mult.data() + c0;
    for (; j + 8 <= n; j += 8)
      Epilogue8<kKind>(regs, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + j)),
                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias + j)), _mm256_loadu_ps(mult + j), y, j);
  }
  return j;
}
#endif

// n accumulators of local row r, columns c0.. -> y (already offset to (r, c0)).
void EpilogueSegment(const Epilogue& e, const int32_t* acc, int64_t n, int64_t r, int64_t c0, void* y) {
  int64_t j = 0;
#if defined(__AVX2__)
  switch (e.kind) {
    case QOutput::Kind::kInt32: j = EpilogueVector<QOutput::Kind::kInt32>(e, acc, n, r, c0, y); break;
    case QOutput::Kind::kFloat: j = EpilogueVector<QOutput::Kind::kFloat>(e, acc, n, r, c0, y); break;
    case QOutput::Kind::kQuantized: j = EpilogueVector<QOutput::Kind::kQuantized>(e, acc, n, r, c0, y); break;
  }
#endif
  for (; j < n; ++j) {
    const size_t c = static_cast<size_t>(e.channel_is_row ? r : c0 + j);
    EpilogueScalar(e, acc[j], e.mult[c], e.bias[c], y, j);
  }
}

int32_t LoadPair(const int16_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

#if defined(__AVX2__)
// c + (pairwise int16 products summed into int32). With AVX-VNNI / AVX512-VNNI this is one
// vpdpwssd (non-saturating, so the same bits as vpmaddwd + vpaddd).
inline __m256i MulAddPairs(__m256i c, __m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpwssd_epi32(c, a, b);
#elif defined(__AVXVNNI__)
  return _mm256_dpwssd_avx_epi32(c, a, b);
#else
  return _mm256_add_epi32(c, _mm256_madd_epi16(a, b));
#endif
}
#endif

// tile[R][kQNr] (row stride ldt) = R rows of A (row stride lda int16) * B panel over kpairs
// k-pairs. R < kQMr for the last row panel (and for single-row GEMVs at batch 1), so no work is
// spent on A's zero padding rows.
template <int R>
void MicroKernelRows(const int16_t* ap, int64_t lda, const int16_t* bp, int64_t kpairs, int32_t* tile, int64_t ldt) {
  static_assert(R >= 1 && R <= kQMr && kQNr == 16, "micro-kernel shape");
#if defined(__AVX2__)
  if constexpr (R == 1) {
    // One row has only two accumulators: alternate four pairs of them over k so consecutive
    // multiply-adds do not wait on each other's latency, then sum (int32 adds wrap alike).
    __m256i c[4][2];
    for (auto& v : c) v[0] = v[1] = _mm256_setzero_si256();
    int64_t kk = 0;
    for (; kk + 4 <= kpairs; kk += 4) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u) {
        const __m256i a = _mm256_set1_epi32(LoadPair(ap + 2 * (kk + u)));
        c[u][0] = MulAddPairs(c[u][0], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32 * u)));
        c[u][1] = MulAddPairs(c[u][1], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32 * u + 16)));
      }
      bp += 4 * 2 * kQNr;
    }
    for (; kk < kpairs; ++kk) {
      const __m256i a = _mm256_set1_epi32(LoadPair(ap + 2 * kk));
      c[0][0] = MulAddPairs(c[0][0], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp)));
      c[0][1] = MulAddPairs(c[0][1], a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 16)));
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
      const __m256i a = _mm256_set1_epi32(LoadPair(ap + i * lda + 2 * kk));
      c0[i] = MulAddPairs(c0[i], a, b0);
      c1[i] = MulAddPairs(c1[i], a, b1);
    }
    bp += 2 * kQNr;
  }
#pragma GCC unroll 6
  for (int i = 0; i < R; ++i) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * ldt), c0[i]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * ldt + 8), c1[i]);
  }
#else
  for (int64_t i = 0; i < R; ++i) std::fill(tile + i * ldt, tile + i * ldt + kQNr, 0);
  for (int64_t kk = 0; kk < kpairs; ++kk) {
    for (int64_t i = 0; i < R; ++i) {
      const int32_t x0 = ap[i * lda + 2 * kk], x1 = ap[i * lda + 2 * kk + 1];
      for (int64_t j = 0; j < kQNr; ++j)
        tile[i * ldt + j] = WrapAdd(tile[i * ldt + j], x0 * bp[2 * j] + x1 * bp[2 * j + 1]);
    }
    bp += 2 * kQNr;
  }
#endif
}

inline int32_t Load4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

#if defined(__AVX2__)
// c + the four-byte dot products of unsigned u and signed s, per int32 lane.
inline __m256i DotBytes(__m256i c, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(c, u, s);
#elif defined(__AVXVNNI__)
  return _mm256_dpbusd_avx_epi32(c, u, s);
#else
  const __m256i pairs = _mm256_maddubs_epi16(u, s);  // exact under Q8WeightsFit
  return _mm256_add_epi32(c, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}
#endif

// tile[R][kQ8Nr] = R rows of A (row stride lda bytes) * one B panel over kquads groups of 4 k.
// kAUnsigned: A holds the unsigned operand (GEMM: activations) and B the weights; else the
// reverse (conv).
template <int R, bool kAUnsigned>
void MicroKernel8Rows(const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t kquads, int32_t* tile, int64_t ldt) {
  static_assert(R >= 1 && R <= kQ8Mr && kQ8Nr == 16, "micro-kernel shape");
#if defined(__AVX2__)
  __m256i c0[R], c1[R];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) c0[i] = c1[i] = _mm256_setzero_si256();
  for (int64_t kq = 0; kq < kquads; ++kq) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 32));
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const __m256i a = _mm256_set1_epi32(Load4(ap + i * lda + 4 * kq));
      if constexpr (kAUnsigned) {
        c0[i] = DotBytes(c0[i], a, b0);
        c1[i] = DotBytes(c1[i], a, b1);
      } else {
        c0[i] = DotBytes(c0[i], b0, a);
        c1[i] = DotBytes(c1[i], b1, a);
      }
    }
    bp += 4 * kQ8Nr;
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * ldt), c0[i]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tile + i * ldt + 8), c1[i]);
  }
#else
  for (int64_t i = 0; i < R; ++i) std::fill(tile + i * ldt, tile + i * ldt + kQ8Nr, 0);
  for (int64_t kq = 0; kq < kquads; ++kq) {
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < kQ8Nr; ++j) {
        int32_t dot = 0;
        for (int64_t r = 0; r < 4; ++r) {
          const int32_t av = kAUnsigned ? static_cast<int32_t>(ap[i * lda + 4 * kq + r])
                                        : static_cast<int32_t>(static_cast<int8_t>(ap[i * lda + 4 * kq + r]));
          const int32_t bv = kAUnsigned ? static_cast<int32_t>(static_cast<int8_t>(bp[4 * j + r]))
                                        : static_cast<int32_t>(bp[4 * j + r]);
          dot += av * bv;
        }
        tile[i * ldt + j] = WrapAdd(tile[i * ldt + j], dot);
      }
    bp += 4 * kQ8Nr;
  }
#endif
}

template <bool kAUnsigned>
void MicroKernel8(int64_t rows, const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t kquads, int32_t* tile,
                  int64_t ldt) {
  switch (rows) {
    case 1: return MicroKernel8Rows<1, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
    case 2: return MicroKernel8Rows<2, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
    case 3: return MicroKernel8Rows<3, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
    default: return MicroKernel8Rows<4, kAUnsigned>(ap, lda, bp, kquads, tile, ldt);
  }
}

void MicroKernel(int64_t rows, const int16_t* ap, int64_t lda, const int16_t* bp, int64_t kpairs, int32_t* tile,
                 int64_t ldt) {
  switch (rows) {
    case 1: return MicroKernelRows<1>(ap, lda, bp, kpairs, tile, ldt);
    case 2: return MicroKernelRows<2>(ap, lda, bp, kpairs, tile, ldt);
    case 3: return MicroKernelRows<3>(ap, lda, bp, kpairs, tile, ldt);
    case 4: return MicroKernelRows<4>(ap, lda, bp, kpairs, tile, ldt);
    case 5: return MicroKernelRows<5>(ap, lda, bp, kpairs, tile, ldt);
    default: return MicroKernelRows<6>(ap, lda, bp, kpairs, tile, ldt);
  }
}

// Row r of a byte matrix minus zero points (one, or per column) as int16.
template <class T>
void RowToInt16(const T* src, int64_t n, const std::vector<int32_t>* zp, int64_t zp_offset, bool zp_per_col,
                int16_t* dst) {
  if (!zp_per_col) {
    const int16_t z = static_cast<int16_t>(zp ? (*zp)[0] : 0);
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<int16_t>(static_cast<int16_t>(src[j]) - z);
  } else {
    const int32_t* z = zp->data() + zp_offset;
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<int16_t>(static_cast<int32_t>(src[j]) - z[j]);
  }
}

void ByteRowToInt16(const void* src, DType dt, int64_t n, const std::vector<int32_t>* zp, int64_t zp_offset,
                    bool zp_per_col, int16_t* dst) {
  if (dt == DType::kUInt8) RowToInt16(static_cast<const uint8_t*>(src), n, zp, zp_offset, zp_per_col, dst);
  else RowToInt16(static_cast<const int8_t*>(src), n, zp, zp_offset, zp_per_col, dst);
}

// Interleaves int16 rows r0 (k) and r1 (k + 1) of n columns (r1 may be null: zeros) into the
// panel layout at k-pair kk: dst + panel * kQNr * Kp + kk * 2 * kQNr.
void InterleavePair(const int16_t* r0, const int16_t* r1, int64_t n, int64_t Kp, int64_t kk, int16_t* dst) {
  int64_t j = 0;
#if defined(__AVX2__)
  for (; j + kQNr <= n; j += kQNr) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + j));
    const __m256i y = r1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + j)) : _mm256_setzero_si256();
    const __m256i lo = _mm256_unpacklo_epi16(x, y);  // cols 0-3 | 8-11
    const __m256i hi = _mm256_unpackhi_epi16(x, y);  // cols 4-7 | 12-15
    int16_t* d = dst + (j / kQNr) * kQNr * Kp + kk * 2 * kQNr;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
#endif
  for (; j < RoundUp(n, kQNr); ++j) {  // the last panel's padding columns are zeros
    int16_t* d = dst + (j / kQNr) * kQNr * Kp + kk * 2 * kQNr + (j % kQNr) * 2;
    d[0] = j < n ? r0[j] : int16_t{0};
    d[1] = j < n && r1 ? r1[j] : int16_t{0};
  }
}

// dst[0, n) = 0; may write up to 15 elements past n (see CopyRowOvershoot).
inline void ZeroRowOvershoot(int64_t n, int16_t* dst) {
#if defined(__AVX2__)
  // The first two chunks unrolled: a plain loop becomes a memset call, too slow for short rows.
  const __m256i z = _mm256_setzero_si256();
  if (n > 0) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), z);
  if (n > 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 16), z);
  for (int64_t j = 32; j < n; j += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), z);
#else
  for (int64_t j = 0; j < n; ++j) dst[j] = 0;
#endif
}

// dst[0, n) = src[0, n); may write up to 15 elements past n (the caller's buffers are padded and
// overwrite them later). Short rows are the common case: no library call per row.
inline void CopyRowOvershoot(const int16_t* src, int64_t n, int16_t* dst) {
#if defined(__AVX2__)
  auto copy16 = [&](int64_t j) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + j)));
  };
  // The first two chunks unrolled: a plain loop becomes a memcpy call, too slow for short rows.
  if (n > 0) copy16(0);
  if (n > 16) copy16(16);
  for (int64_t j = 32; j < n; j += 16) copy16(j);
#else
  for (int64_t j = 0; j < n; ++j) dst[j] = src[j];
#endif
}

}  // namespace

void QPackA(const QMatrix& a, int64_t M, int64_t K, QPackedA* out, int threads) {
  out->M = M;
  out->K = K;
  out->Kp = RoundUp(K, 2);
  const int64_t Kp = out->Kp;
  out->data.assign(static_cast<size_t>(RoundUp(M, kQMr) * Kp), 0);
  const bool per_row = a.zero_point && a.zero_point->size() > 1;
  const size_t es = 1;
  ParallelFor(M, M * K >= (1 << 17) ? threads : 1, [&](int64_t i) {
    const std::vector<int32_t> zp{ZpAt(a.zero_point, per_row ? i : 0)};
    ByteRowToInt16(static_cast<const char*>(a.data) + static_cast<size_t>(i * a.ld) * es, a.dtype, K, &zp, 0, false,
                   out->data.data() + i * Kp);
  });
}

void QPackB(const QMatrix& b, int64_t K, int64_t N, QPackedB* out, int threads) {
  out->K = K;
  out->N = N;
  out->Kp = RoundUp(K, 2);
  const int64_t Kp = out->Kp;
  out->data.resize(static_cast<size_t>(RoundUp(N, kQNr) * Kp));  // InterleavePair writes every element
  const bool per_col = b.zero_point && b.zero_point->size() > 1;
  ParallelFor(Kp / 2, K * N >= (1 << 17) ? threads : 1, [&](int64_t kk) {
    std::vector<int16_t> r0(static_cast<size_t>(N)), r1(static_cast<size_t>(N));
    const char* base = static_cast<const char*>(b.data);
    ByteRowToInt16(base + 2 * kk * b.ld, b.dtype, N, b.zero_point, 0, per_col, r0.data());
    const bool has1 = 2 * kk + 1 < K;
    if (has1) ByteRowToInt16(base + (2 * kk + 1) * b.ld, b.dtype, N, b.zero_point, 0, per_col, r1.data());
    InterleavePair(r0.data(), has1 ? r1.data() : nullptr, N, Kp, kk, out->data.data());
  });
}

void QPackIm2Col(const ConvShape& s, const void* x_image, DType x_dtype, int32_t x_zp, int64_t group,
                 QPackedB* out) {
  const WindowGeometry& g = s.geo;
  const int64_t cg = s.in_channels / s.group, ksize = g.KernelSize(), in_size = g.InSize();
  const int64_t K = cg * ksize, N = g.OutSize();
  out->K = K;
  out->N = N;
  out->Kp = RoundUp(K, 2);
  const int64_t Kp = out->Kp;
  out->data.resize(static_cast<size_t>(RoundUp(N, kQNr) * Kp));  // InterleavePair writes every element
  // Each im2col row (channel, tap) is built as int16 (x - x_zp, 0 in the padding), then pairs of
  // rows are interleaved into the panels.
  // Both padded for CopyRowOvershoot.
  std::vector<int16_t> rows(static_cast<size_t>(2 * N + 16));
  std::vector<int16_t> xrow(static_cast<size_t>(in_size + 16));
  const std::vector<int32_t> zp{x_zp};
  int64_t k_idx[kMaxSpatialDims], o_idx[kMaxSpatialDims];
  int64_t cur_c = -1;
  for (int64_t k = 0; k < Kp; ++k) {
    int16_t* dst = rows.data() + (k & 1) * N;
    if (k < K) {
      const int64_t c = k / ksize, t = k % ksize;
      if (c != cur_c) {  // the channel's plane as int16 once
        ByteRowToInt16(static_cast<const char*>(x_image) + (group * cg + c) * in_size, x_dtype, in_size, &zp, 0, false,
                       xrow.data());
        cur_c = c;
      }
      for (int64_t d = g.spatial - 1, r = t; d >= 0; --d) {
        k_idx[d] = r % g.kernel[d];
        r /= g.kernel[d];
      }
      if (g.spatial == 2) {
        const int64_t sw = g.stride[1], off = k_idx[1] * g.dilation[1] - g.pad_begin[1];
        // Outputs [lo, hi) of a row read inside the input row (iw = ow * sw + off); the rest is padding.
        const int64_t lo = std::min(g.out[1], off >= 0 ? 0 : (-off + sw - 1) / sw);
        const int64_t hi = std::max(lo, std::min(g.out[1], g.in[1] - 1 - off < 0 ? 0 : (g.in[1] - 1 - off) / sw + 1));
        for (int64_t oh = 0; oh < g.out[0]; ++oh) {
          const int64_t ih = oh * g.stride[0] - g.pad_begin[0] + k_idx[0] * g.dilation[0];
          int16_t* drow = dst + oh * g.out[1];
          if (ih < 0 || ih >= g.in[0]) {
            ZeroRowOvershoot(g.out[1], drow);
            continue;
          }
          const int16_t* srow = xrow.data() + ih * g.in[1] + off;
          // Left padding first, then the copy, then the right padding; each may overshoot into
          // later positions that are written afterwards (no memset/memcpy call per short row).
          ZeroRowOvershoot(lo, drow);
          if (sw == 1) {
            CopyRowOvershoot(srow + lo, hi - lo, drow + lo);
          } else {
            for (int64_t ow = lo; ow < hi; ++ow) drow[ow] = srow[ow * sw];
          }
          ZeroRowOvershoot(g.out[1] - hi, drow + hi);
        }
      } else {
        for (int64_t o = 0; o < N; ++o) {
          for (int64_t d = g.spatial - 1, r = o; d >= 0; --d) {
            o_idx[d] = r % g.out[d];
            r /= g.out[d];
          }
          int64_t off = 0;
          bool inside = true;
          for (int d = 0; d < g.spatial; ++d) {
            const int64_t p = o_idx[d] * g.stride[d] - g.pad_begin[d] + k_idx[d] * g.dilation[d];
            if (p < 0 || p >= g.in[d]) inside = false;
            off = off * g.in[d] + p;
          }
          dst[o] = inside ? xrow[static_cast<size_t>(off)] : int16_t{0};
        }
      }
    }
    if (k & 1) InterleavePair(rows.data(), k < K ? rows.data() + N : nullptr, N, Kp, k / 2, out->data.data());
  }
}

bool QConvUsesPaddedPlanes(const ConvShape& s) {
  const WindowGeometry& g = s.geo;
  if (g.spatial != 2 || g.stride[0] != 1 || g.stride[1] != 1) return false;
  const int64_t hp = g.in[0] + g.pad_begin[0] + g.pad_end[0], wp = g.in[1] + g.pad_begin[1] + g.pad_end[1];
  // Stride 1: the output spans the padded plane minus the dilated kernel.
  return g.out[0] == hp - g.dilation[0] * (g.kernel[0] - 1) && g.out[1] == wp - g.dilation[1] * (g.kernel[1] - 1);
}

void QPackConvPadded(const ConvShape& s, const void* x_image, DType x_dtype, int32_t x_zp, int64_t group,
                     std::vector<int16_t>* planes, QPackedB* out, int64_t* pitch) {
  const WindowGeometry& g = s.geo;
  const int64_t cg = s.in_channels / s.group, taps = g.KernelSize();
  const int64_t hp = g.in[0] + g.pad_begin[0] + g.pad_end[0], wp = g.in[1] + g.pad_begin[1] + g.pad_end[1];
  // Slices start at most (KH-1)*dh rows + (KW-1)*dw into a plane and run OH * Wp elements: the
  // last one ends (KW-1)*dw past the plane, inside this slack.
  const int64_t plane = hp * wp + g.dilation[1] * (g.kernel[1] - 1) + 16;
  const int64_t N = g.out[0] * wp, K = cg * taps;
  planes->assign(static_cast<size_t>(cg * plane), 0);
  const std::vector<int32_t> zp{x_zp};
  // Each channel is converted in one vectorizable pass, then its rows are placed with 16-element
  // copies whose overshoot is re-zeroed right after (padding must read as 0; later rows overwrite
  // the rest), so short rows cost no library call and no scalar tail.
  std::vector<int16_t> conv(static_cast<size_t>(g.InSize() + 16));
  for (int64_t c = 0; c < cg; ++c) {
    const char* src = static_cast<const char*>(x_image) + (group * cg + c) * g.InSize();
    ByteRowToInt16(src, x_dtype, g.InSize(), &zp, 0, false, conv.data());
    int16_t* dst = planes->data() + c * plane + g.pad_begin[0] * wp + g.pad_begin[1];
    for (int64_t ih = 0; ih < g.in[0]; ++ih) {
      CopyRowOvershoot(conv.data() + ih * g.in[1], g.in[1], dst + ih * wp);
      ZeroRowOvershoot(16, dst + ih * wp + g.in[1]);
    }
  }
  out->K = K;
  out->N = N;
  out->Kp = RoundUp(K, 2);
  out->data.resize(static_cast<size_t>(RoundUp(N, kQNr) * out->Kp));  // InterleavePair writes every element
  auto row = [&](int64_t k) -> const int16_t* {
    const int64_t c = k / taps, t = k % taps;
    const int64_t kh = t / g.kernel[1], kw = t % g.kernel[1];
    return planes->data() + c * plane + kh * g.dilation[0] * wp + kw * g.dilation[1];
  };
  for (int64_t kk = 0; kk < out->Kp / 2; ++kk)
    InterleavePair(row(2 * kk), 2 * kk + 1 < K ? row(2 * kk + 1) : nullptr, N, out->Kp, kk, out->data.data());
  *pitch = wp;
}

void QCompactConvRows(const void* tmp, int64_t rows, int64_t oh, int64_t ow, int64_t pitch, size_t elem_size, void* y) {
  const char* src = static_cast<const char*>(tmp);
  char* dst = static_cast<char*>(y);
  const size_t run = static_cast<size_t>(ow) * elem_size;
  const int64_t runs = rows * oh;
  for (int64_t i = 0; i < runs; ++i) {
    const char* s = src + static_cast<size_t>(i * pitch) * elem_size;
    char* d = dst + static_cast<size_t>(i) * run;
#if defined(__AVX2__)
    // 16- or 8-byte chunks, each shorter than a run: the overshoot lands on the next run (written
    // next) and the reads stay inside the next source row. The last run is exact: past it lies
    // memory another thread may be writing.
    if (i + 1 < runs && run >= 16) {
      for (size_t b = 0; b < run; b += 16)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + b), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + b)));
      continue;
    }
    if (i + 1 < runs && run >= 8) {
      for (size_t b = 0; b < run; b += 8)
        _mm_storel_epi64(reinterpret_cast<__m128i*>(d + b), _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s + b)));
      continue;
    }
#endif
    std::memcpy(d, s, run);
  }
}

void QGemmPacked(const QPackedA& a, const QPackedB& b, const QOutput& out, bool channel_is_row,
                 int64_t channel_offset, void* y, int64_t ldy, int threads) {
  WH_CHECK(a.Kp == b.Kp);
  const int64_t M = a.M, N = b.N, Kp = a.Kp;
  const Epilogue e = MakeEpilogue(out, channel_is_row, channel_offset, M, N);
  const int64_t nrp = (M + kQMr - 1) / kQMr, ncp = (N + kQNr - 1) / kQNr;
  const size_t es = OutElemSize(out.dtype);
  // Below ~1M multiply-adds (a batch-1 GEMV) an OpenMP fork/join costs more than it saves.
  const int work_threads = M * N * Kp >= (1 << 20) ? threads : 1;
  // A work item is one row panel times up to kChunkPanels column panels: the micro-kernel fills an
  // L1-resident strip of accumulators and the epilogue then runs over whole strip rows.
  constexpr int64_t kChunkPanels = 16;
  // Few row panels (small batches): narrower chunks, so that every thread gets work.
  int64_t chunk_panels = kChunkPanels;
  while (chunk_panels > 1 && nrp * ((ncp + chunk_panels - 1) / chunk_panels) < 4 * work_threads) chunk_panels /= 2;
  const int64_t nchunks = (ncp + chunk_panels - 1) / chunk_panels;
  ParallelFor(nrp * nchunks, work_threads, [&](int64_t t) {
    const int64_t chunk = t / nrp, rp = t % nrp;
    alignas(32) int32_t strip[kQMr * kChunkPanels * kQNr];
    const int64_t cp0 = chunk * chunk_panels, cp1 = std::min(ncp, cp0 + chunk_panels);
    const int64_t ldt = (cp1 - cp0) * kQNr;
    const int16_t* ap = a.data.data() + rp * kQMr * Kp;
    const int64_t r0 = rp * kQMr, nr = std::min(kQMr, M - r0);
    for (int64_t cp = cp0; cp < cp1; ++cp)
      MicroKernel(nr, ap, Kp, b.data.data() + cp * kQNr * Kp, Kp / 2, strip + (cp - cp0) * kQNr, ldt);
    const int64_t c0 = cp0 * kQNr;
    const int64_t nc = std::min(ldt, N - c0);
    for (int64_t i = 0; i < nr; ++i)
      EpilogueSegment(e, strip + i * ldt, nc, r0 + i, c0,
                      static_cast<char*>(y) + static_cast<size_t>((r0 + i) * ldy + c0) * es);
  });
}

void QEpilogueCpu(const QOutput& out, const int32_t* acc, int64_t rows, int64_t cols, bool channel_is_row,
                  int64_t channel_offset, void* y, int64_t ldy, int threads) {
  const Epilogue e = MakeEpilogue(out, channel_is_row, channel_offset, rows, cols);
  const size_t es = OutElemSize(out.dtype);
  ParallelFor(rows, rows * cols >= (1 << 15) ? threads : 1, [&](int64_t r) {
    EpilogueSegment(e, acc + r * cols, cols, r, 0, static_cast<char*>(y) + static_cast<size_t>(r * ldy) * es);
  });
}

bool QGemmAccOneDnn(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K, int32_t* acc, int threads,
                    bool a_trans, bool b_trans) {
  if (b.dtype != DType::kInt8 || (a.dtype != DType::kUInt8 && a.dtype != DType::kInt8)) return false;
  int32_t azp = 0, bzp = 0;
  if (!ScalarZp(a.zero_point, &azp) || !ScalarZp(b.zero_point, &bzp)) return false;
  if (bzp < -128 || bzp > 127 || azp < (a.dtype == DType::kUInt8 ? 0 : -128) || azp > (a.dtype == DType::kUInt8 ? 255 : 127))
    return false;
  const int32_t co = 0;
  ScopedOmpThreads team(threads);
  const char ta = a_trans ? 'T' : 'N', tb = b_trans ? 'T' : 'N';
  dnnl_status_t st;
  if (a.dtype == DType::kUInt8) {
    st = dnnl_gemm_u8s8s32(ta, tb, 'F', M, N, K, 1.f, static_cast<const uint8_t*>(a.data), a.ld,
                           static_cast<uint8_t>(azp), static_cast<const int8_t*>(b.data), b.ld,
                           static_cast<int8_t>(bzp), 0.f, acc, N, &co);
  } else {
    st = dnnl_gemm_s8s8s32(ta, tb, 'F', M, N, K, 1.f, static_cast<const int8_t*>(a.data), a.ld,
                           static_cast<int8_t>(azp), static_cast<const int8_t*>(b.data), b.ld,
                           static_cast<int8_t>(bzp), 0.f, acc, N, &co);
  }
  return st == dnnl_success;
}

bool CpuHasVnni() {
  // oneDNN's effective ISA, not just CPUID: it honours ONEDNN_MAX_CPU_ISA, and a oneDNN limited to
  // AVX2 on a VNNI CPU would add pairs in int16 again.
  static const bool has = (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core_vnni) == dnnl_cpu_isa_avx512_core_vnni;
  return has;
}

namespace {
std::atomic<int> g_backend_override{-1};
}  // namespace

QGemmBackend DefaultQGemmBackend() {
  const int forced = g_backend_override.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<QGemmBackend>(forced);
  static const QGemmBackend backend = [] {
    const char* env = std::getenv("WHITTLE_QGEMM");
    const std::string v = env ? env : "";
    if (v == "own") return QGemmBackend::kOwn;
    if (v == "onednn") return QGemmBackend::kOneDnn;
    if (v == "own16") return QGemmBackend::kOwn16;
    return QGemmBackend::kAuto;
  }();
  return backend;
}

void SetQGemmBackend(QGemmBackend backend) {
  g_backend_override.store(static_cast<int>(backend), std::memory_order_relaxed);
}

bool PreferOneDnnQGemm(const QMatrix& a, const QMatrix& b, int64_t M, int64_t N, int64_t K) {
  switch (DefaultQGemmBackend()) {
    case QGemmBackend::kOwn:
    case QGemmBackend::kOwn16:
      return false;
    case QGemmBackend::kOneDnn:
      return true;
    case QGemmBackend::kAuto:
      break;
  }
  int32_t zp = 0;
  return CpuHasVnni() && a.dtype == DType::kUInt8 && b.dtype == DType::kInt8 && K >= kOneDnnMinK &&
         M * N >= kOneDnnMinOutputs &&
         ScalarZp(a.zero_point, &zp) && ScalarZp(b.zero_point, &zp);
}

void QIm2ColBytes(const ConvShape& s, const uint8_t* x_image, uint8_t x_zp, uint8_t flip, uint8_t* dst, int64_t ld) {
  const WindowGeometry& g = s.geo;
  const int64_t ksize = g.KernelSize(), in_size = g.InSize();
  const int64_t K = s.in_channels / s.group * ksize;
  const int64_t kw = g.kernel[g.spatial - 1];
  const int64_t IH = g.spatial == 2 ? g.in[0] : 1, IW = g.in[g.spatial - 1];
  const int64_t OH = g.spatial == 2 ? g.out[0] : 1, OW = g.out[g.spatial - 1];
  const int64_t sh = g.spatial == 2 ? g.stride[0] : 1, sw = g.stride[g.spatial - 1];
  const int64_t dh = g.spatial == 2 ? g.dilation[0] : 1, dw = g.dilation[g.spatial - 1];
  const int64_t ph = g.spatial == 2 ? g.pad_begin[0] : 0, pw = g.pad_begin[g.spatial - 1];
  const uint8_t pad = static_cast<uint8_t>(x_zp ^ flip);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t c = k / ksize, t = k % ksize, ti = t / kw, tj = t % kw;
    const uint8_t* plane = x_image + c * in_size;
    uint8_t* row = dst + k * ld;
    const int64_t off = tj * dw - pw;
    const int64_t lo = std::min(OW, off >= 0 ? 0 : (-off + sw - 1) / sw);
    const int64_t hi = std::max(lo, std::min(OW, IW - 1 - off < 0 ? 0 : (IW - 1 - off) / sw + 1));
    for (int64_t oh = 0; oh < OH; ++oh) {
      uint8_t* out = row + oh * OW;
      const int64_t ih = oh * sh - ph + ti * dh;
      if (ih < 0 || ih >= IH) {
        std::memset(out, pad, static_cast<size_t>(OW));
        continue;
      }
      const uint8_t* in = plane + ih * IW + off;
      std::memset(out, pad, static_cast<size_t>(lo));
      if (sw == 1) {
        for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow] ^ flip;
      } else {
        for (int64_t ow = lo; ow < hi; ++ow) out[ow] = in[ow * sw] ^ flip;
      }
      std::memset(out + hi, pad, static_cast<size_t>(OW - hi));
    }
  }
}

int64_t QIm2ColBytesPadded(const ConvShape& s, const uint8_t* x_image, uint8_t x_zp, uint8_t flip,
                           std::vector<uint8_t>* planes, uint8_t* dst, int64_t ld) {
  const WindowGeometry& g = s.geo;
  const int64_t C = s.in_channels / s.group, IH = g.in[0], IW = g.in[1];
  const int64_t Hp = IH + g.pad_begin[0] + g.pad_end[0], Wp = IW + g.pad_begin[1] + g.pad_end[1];
  const int64_t kh = g.kernel[0], kw = g.kernel[1], dh = g.dilation[0], dw = g.dilation[1];
  const int64_t plane = Hp * Wp, cols = g.out[0] * Wp;
  const uint8_t pad = static_cast<uint8_t>(x_zp ^ flip);
  // Slack past the last plane: the last taps' rows run (kw - 1) * dw bytes beyond it (garbage
  // columns, dropped by the epilogue).
  planes->resize(static_cast<size_t>(C * plane + (kw - 1) * dw + 64));
  uint8_t* pp = planes->data();
  std::memset(pp, pad, planes->size());
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ih = 0; ih < IH; ++ih) {
      const uint8_t* in = x_image + (c * IH + ih) * IW;
      uint8_t* out = pp + c * plane + (ih + g.pad_begin[0]) * Wp + g.pad_begin[1];
      for (int64_t iw = 0; iw < IW; ++iw) out[iw] = in[iw] ^ flip;
    }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ti = 0; ti < kh; ++ti)
      for (int64_t tj = 0; tj < kw; ++tj)
        std::memcpy(dst + ((c * kh + ti) * kw + tj) * ld, pp + c * plane + ti * dh * Wp + tj * dw,
                    static_cast<size_t>(cols));
  return Wp;
}

void QConvEpilogueCpu(const QOutput& out, const int32_t* acc, int64_t cout, int64_t acc_ld, int64_t images,
                      int64_t image_stride, int64_t oh, int64_t ow, int64_t pitch, void* y, int threads) {
  const Epilogue e = MakeEpilogue(out, true, 0, cout, 0);
  const size_t es = OutElemSize(out.dtype);
  ParallelFor(images * cout, images * cout * oh * ow >= (1 << 15) ? threads : 1, [&](int64_t im) {
    const int64_t i = im / cout, m = im % cout;
    const int32_t* a = acc + m * acc_ld + i * image_stride;
    char* yp = static_cast<char*>(y) + static_cast<size_t>((i * cout + m) * oh * ow) * es;
    // Rows but the last run over whole vectors (n >= ow): the overshoot lands in the next row
    // of the same channel, which is written afterwards (needs ow >= 8 so that the last row's
    // exact write covers the previous row's overshoot; n stays within the accumulator row pair).
    const int64_t n = RoundUp(ow, 8);
    const bool overshoot = ow >= 8 && n <= pitch + ow;
    for (int64_t r = 0; r < oh; ++r)
      EpilogueSegment(e, a + r * pitch, overshoot && r + 1 < oh ? n : ow, m, 0, yp + static_cast<size_t>(r * ow) * es);
  });
}

bool AllowQ8Kernel() { return DefaultQGemmBackend() != QGemmBackend::kOwn16; }

bool Q8WeightsFit(const int8_t* w, int64_t M, int64_t K, bool k_major, const std::vector<int32_t>& w_zp) {
  for (int32_t z : w_zp)
    if (z != 0) return false;
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
  (void)w, (void)M, (void)K, (void)k_major;
  return true;  // vpdpbusd has no int16 step
#else
  // Pairs (k, k + 1) with k even; k_major: w is K x M (element (k, m) at k * M + m).
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k + 1 < K; k += 2) {
      const int a = k_major ? w[k * M + m] : w[m * K + k];
      const int b = k_major ? w[(k + 1) * M + m] : w[m * K + k + 1];
      if (std::abs(a) + std::abs(b) > 128) return false;
    }
  return true;
#endif
}

void Q8PackWeightsA(const int8_t* w, int64_t M, int64_t K, QPacked8* out) {
  out->rows = M;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  out->data.assign(static_cast<size_t>(RoundUp(M, kQ8Mr) * out->Kq), 0);
  out->sums.assign(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m) {
    int32_t sum = 0;
    for (int64_t k = 0; k < K; ++k) {
      out->data[static_cast<size_t>(m * out->Kq + k)] = static_cast<uint8_t>(w[m * K + k]);
      sum += w[m * K + k];
    }
    out->sums[static_cast<size_t>(m)] = sum;
  }
}

void Q8PackWeightsB(const int8_t* w, int64_t K, int64_t N, QPacked8* out) {
  out->rows = N;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  const int64_t panels = (N + kQ8Nr - 1) / kQ8Nr;
  out->data.assign(static_cast<size_t>(panels * out->Kq * kQ8Nr), 0);
  out->sums.assign(static_cast<size_t>(N), 0);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const int8_t v = w[k * N + n];
      const int64_t p = n / kQ8Nr, j = n % kQ8Nr;
      out->data[static_cast<size_t>(((p * (out->Kq / 4) + k / 4) * kQ8Nr + j) * 4 + k % 4)] = static_cast<uint8_t>(v);
      out->sums[static_cast<size_t>(n)] += v;
    }
}

void Q8PackActivationsA(const void* x, int64_t M, int64_t K, int64_t ld, uint8_t flip, QPacked8* out, int threads) {
  out->rows = M;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  const int64_t Kq = out->Kq;
  out->data.resize(static_cast<size_t>(RoundUp(M, kQ8Mr) * Kq));
  const uint8_t* src = static_cast<const uint8_t*>(x);
  uint8_t* dst = out->data.data();
  ParallelFor(RoundUp(M, kQ8Mr), M * K >= (1 << 16) ? threads : 1, [&](int64_t m) {
    uint8_t* d = dst + m * Kq;
    if (m >= M) {
      std::memset(d, 0, static_cast<size_t>(Kq));
      return;
    }
    const uint8_t* r = src + m * ld;
    if (flip == 0) {
      std::memcpy(d, r, static_cast<size_t>(K));
    } else {
      for (int64_t k = 0; k < K; ++k) d[k] = r[k] ^ flip;
    }
    std::memset(d + K, 0, static_cast<size_t>(Kq - K));
  });
}

void Q8PackRowsB(const uint8_t* rows, int64_t K, int64_t N, int64_t ld, QPacked8* out) {
  out->rows = N;
  out->K = K;
  out->Kq = RoundUp(std::max<int64_t>(K, 1), 4);
  const int64_t Kq = out->Kq, panels = (N + kQ8Nr - 1) / kQ8Nr, full = N / kQ8Nr;
  out->data.resize(static_cast<size_t>(panels * Kq * kQ8Nr));
  uint8_t* dst = out->data.data();
  for (int64_t kq = 0; kq < Kq / 4; ++kq) {
    const uint8_t* r[4];
    static const uint8_t kZeros[kQ8Nr] = {};
    for (int64_t i = 0; i < 4; ++i) r[i] = 4 * kq + i < K ? rows + (4 * kq + i) * ld : nullptr;
    for (int64_t p = 0; p < panels; ++p) {
      uint8_t* d = dst + (p * (Kq / 4) + kq) * kQ8Nr * 4;
      if (p < full) {
        const uint8_t* q0 = r[0] ? r[0] + p * kQ8Nr : kZeros;
        const uint8_t* q1 = r[1] ? r[1] + p * kQ8Nr : kZeros;
        const uint8_t* q2 = r[2] ? r[2] + p * kQ8Nr : kZeros;
        const uint8_t* q3 = r[3] ? r[3] + p * kQ8Nr : kZeros;
#if defined(__AVX2__)
        // 4 x 16 bytes -> 16 x 4: interleave rows (0,1) and (2,3) bytewise, then the pairs.
        const __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q0));
        const __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q1));
        const __m128i a2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q2));
        const __m128i a3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q3));
        const __m128i l01 = _mm_unpacklo_epi8(a0, a1), h01 = _mm_unpackhi_epi8(a0, a1);
        const __m128i l23 = _mm_unpacklo_epi8(a2, a3), h23 = _mm_unpackhi_epi8(a2, a3);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(l01, l23));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16), _mm_unpackhi_epi16(l01, l23));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32), _mm_unpacklo_epi16(h01, h23));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 48), _mm_unpackhi_epi16(h01, h23));
        continue;
#else
        for (int64_t j = 0; j < kQ8Nr; ++j) {
          d[4 * j] = q0[j];
          d[4 * j + 1] = q1[j];
          d[4 * j + 2] = q2[j];
          d[4 * j + 3] = q3[j];
        }
        continue;
#endif
      }
      for (int64_t j = 0; j < kQ8Nr; ++j) {
        const int64_t n = p * kQ8Nr + j;
        for (int64_t i = 0; i < 4; ++i) d[4 * j + i] = n < N && r[i] ? r[i][n] : 0;
      }
    }
  }
}

void QGemmPacked8(const QPacked8& a, const QPacked8& b, bool a_is_weights, int32_t zx, const QOutput& out,
                  bool channel_is_row, int64_t channel_offset, void* y, int64_t ldy, int threads) {
  WH_CHECK(a.Kq == b.Kq);
  const int64_t M = a.rows, N = b.rows, Kq = a.Kq;
  Epilogue e = MakeEpilogue(out, channel_is_row, channel_offset, M, N);
  // Fold -zx * sum_k(w) into each channel's bias (int32 wrap-around, as the reference sums).
  const std::vector<int32_t>& sums = a_is_weights ? a.sums : b.sums;
  for (size_t c = 0; c < sums.size() && c < e.bias.size(); ++c)
    e.bias[c] = static_cast<int32_t>(static_cast<uint32_t>(e.bias[c]) -
                                     static_cast<uint32_t>(zx) * static_cast<uint32_t>(sums[c]));
  const int64_t nrp = (M + kQ8Mr - 1) / kQ8Mr, ncp = (N + kQ8Nr - 1) / kQ8Nr;
  const size_t es = OutElemSize(out.dtype);
  const int work_threads = M * N * Kq >= (1 << 20) ? threads : 1;
  constexpr int64_t kChunkPanels = 16;
  int64_t chunk_panels = kChunkPanels;
  while (chunk_panels > 1 && nrp * ((ncp + chunk_panels - 1) / chunk_panels) < 4 * work_threads) chunk_panels /= 2;
  const int64_t nchunks = (ncp + chunk_panels - 1) / chunk_panels;
  ParallelFor(nrp * nchunks, work_threads, [&](int64_t t) {
    const int64_t chunk = t / nrp, rp = t % nrp;
    alignas(32) int32_t strip[kQ8Mr * kChunkPanels * kQ8Nr];
    const int64_t cp0 = chunk * chunk_panels, cp1 = std::min(ncp, cp0 + chunk_panels);
    const int64_t ldt = (cp1 - cp0) * kQ8Nr;
    const uint8_t* ap = a.data.data() + rp * kQ8Mr * Kq;
    const int64_t r0 = rp * kQ8Mr, nr = std::min(kQ8Mr, M - r0);
    for (int64_t cp = cp0; cp < cp1; ++cp) {
      const uint8_t* bp = b.data.data() + cp * kQ8Nr * Kq;
      if (a_is_weights) MicroKernel8<false>(nr, ap, Kq, bp, Kq / 4, strip + (cp - cp0) * kQ8Nr, ldt);
      else MicroKernel8<true>(nr, ap, Kq, bp, Kq / 4, strip + (cp - cp0) * kQ8Nr, ldt);
    }
    const int64_t c0 = cp0 * kQ8Nr, nc = std::min(ldt, N - c0);
    for (int64_t i = 0; i < nr; ++i)
      EpilogueSegment(e, strip + i * ldt, nc, r0 + i, c0,
                      static_cast<char*>(y) + static_cast<size_t>((r0 + i) * ldy + c0) * es);
  });
}

}  // namespace whittle
