// The requantizing epilogue shared by every int8 path: float(acc + bias) * multiplier,
// round-half-even, + zero point, saturate (Relu: clamp at the zero point), AVX2 8 at a time (and
// AVX-512 16 at a time for quantized outputs, where the build targets it) with the same results
// as the scalar formula of kernels/reference/qlinear.h.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/qgemm_tile.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace whittle {
namespace qgemm_internal {

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


namespace {

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

// rows x n accumulators (row stride lda) of local rows r0.., columns c0.. -> y (already offset
// to (r0, c0), row stride ldy elements of es bytes); the vector part of each row. Returns how
// many columns of every row it did.
template <QOutput::Kind kKind>
int64_t EpilogueVector(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n, int64_t r0,
                       int64_t c0, char* y, int64_t ldy, size_t es) {
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
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
// The quantized epilogue 16 at a time, the row's tail under a mask (rows of a late depthwise
// layer are 25 or 100 long; the AVX2 form did up to 7 of them one by one). Same formula and
// rounding as Epilogue8; after the clamp every value is inside the output type, so vpmovdb's
// truncation is exact.
int64_t EpilogueQuantized512(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n, int64_t r0,
                             int64_t c0, char* y, int64_t ldy) {
  const __m512 lo = _mm512_set1_ps(e.lo), hi = _mm512_set1_ps(e.hi);
  const __m512i zp = _mm512_set1_epi32(e.zp);
  const int32_t* const bias = e.bias.data();
  const float* const mult = e.mult.data();
  const bool per_row = e.channel_is_row;
  auto one = [&](__m512i a, __m512i b, __m512 m) {
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a, b)), m);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    return _mm512_cvtepi32_epi8(_mm512_add_epi32(_mm512_cvtps_epi32(v), zp));
  };
  const int64_t nv = n / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - nv)) - 1);
  for (int64_t i = 0; i < rows; ++i, acc += lda, y += ldy) {
    const __m512i rb = _mm512_set1_epi32(per_row ? bias[r0 + i] : 0);
    const __m512 rm = _mm512_set1_ps(per_row ? mult[r0 + i] : 0.f);
    int64_t j = 0;
    for (; j < nv; j += 16) {
      const __m512i a = _mm512_loadu_si512(acc + j);
      const __m128i q = per_row ? one(a, rb, rm) : one(a, _mm512_loadu_si512(bias + c0 + j), _mm512_loadu_ps(mult + c0 + j));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + j), q);
    }
    if (tail) {
      const __m512i a = _mm512_maskz_loadu_epi32(tail, acc + j);
      const __m128i q = per_row ? one(a, rb, rm)
                                : one(a, _mm512_maskz_loadu_epi32(tail, bias + c0 + j), _mm512_maskz_loadu_ps(tail, mult + c0 + j));
      _mm_mask_storeu_epi8(y + j, tail, q);
    }
  }
  return n;
}
#endif

// n accumulators of local row r, columns c0.. -> y (already offset to (r, c0)).

}  // namespace

void EpilogueRows(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n, int64_t r0, int64_t c0,
                  void* y, int64_t ldy) {
  int64_t j0 = 0;
  const size_t es = OutElemSize(e.out->dtype);
  char* yc = static_cast<char*>(y);
#if defined(__AVX2__)
  switch (e.kind) {
    case QOutput::Kind::kInt32:
      j0 = EpilogueVector<QOutput::Kind::kInt32>(e, acc, lda, rows, n, r0, c0, yc, ldy, es);
      break;
    case QOutput::Kind::kFloat:
      j0 = EpilogueVector<QOutput::Kind::kFloat>(e, acc, lda, rows, n, r0, c0, yc, ldy, es);
      break;
    case QOutput::Kind::kQuantized:
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
      j0 = EpilogueQuantized512(e, acc, lda, rows, n, r0, c0, yc, ldy);
#else
      j0 = EpilogueVector<QOutput::Kind::kQuantized>(e, acc, lda, rows, n, r0, c0, yc, ldy, es);
#endif
      break;
  }
#endif
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = j0; j < n; ++j) {
      const size_t c = static_cast<size_t>(e.channel_is_row ? r0 + i : c0 + j);
      EpilogueScalar(e, acc[i * lda + j], e.mult[c], e.bias[c], yc + static_cast<size_t>(i * ldy) * es, j);
    }
}

}  // namespace qgemm_internal

using qgemm_internal::Epilogue;
using qgemm_internal::EpilogueSegment;
using qgemm_internal::MakeEpilogue;
using qgemm_internal::OutElemSize;
using qgemm_internal::RoundUp;

void QEpilogueCpu(const QOutput& out, const int32_t* acc, int64_t rows, int64_t cols, bool channel_is_row,
                  int64_t channel_offset, void* y, int64_t ldy, int threads) {
  const Epilogue e = MakeEpilogue(out, channel_is_row, channel_offset, rows, cols);
  const size_t es = OutElemSize(out.dtype);
  ParallelFor(rows, rows * cols >= (1 << 15) ? threads : 1, [&](int64_t r) {
    EpilogueSegment(e, acc + r * cols, cols, r, 0, static_cast<char*>(y) + static_cast<size_t>(r * ldy) * es);
  });
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

}  // namespace whittle
