// The int8 kernels' per-ISA pieces (micro-kernels, packing shuffles, the requantizing epilogue's
// vector part, the depthwise tap sums) as one table of function pointers, chosen once from
// CpuFeatures() (kernels/cpu/isa/features.h). Each table is made by kernels/cpu/isa/
// qgemm_kernels_impl.h in a translation unit compiled for its ISA (qgemm_kernels_avx2.cc, …);
// null (a scalar CPU, or WHITTLE_ISA=scalar) means the shared files' scalar loops run. Every
// entry gives the same int32 sums and output bytes as those loops.
#pragma once

#include <cstddef>
#include <cstdint>

namespace whittle::qgemm_internal {

struct Epilogue;

struct QIsaKernels {
  const char* name;
  // vpdpbusd (no int16 step): the byte kernels are exact for any int8 weights (Q8WeightsFit).
  bool exact_bytes;
  // tile[rows][16] (row stride ldt) = rows (<= kQMr) of A (int16, row stride lda) * one B panel
  // over kpairs k-pairs (kernels/cpu/qgemm.cc).
  void (*tile16)(int64_t rows, const int16_t* ap, int64_t lda, const int16_t* bp, int64_t kpairs, int32_t* tile,
                 int64_t ldt);
  // The byte kernel's tile: rows (<= kQ8Mr) of A (4-byte quads) * one B panel over kquads quads;
  // a_unsigned: A holds the unsigned operand (kernels/cpu/qgemm8.cc).
  void (*tile8)(int64_t rows, bool a_unsigned, const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t kquads,
                int32_t* tile, int64_t ldt);
  // The implicit-GEMM conv's band of rows positions x one panel (kernels/cpu/qconv_nhwc.cc).
  void (*conv_band)(int64_t rows, const uint8_t* xp, const int64_t* pos, const int64_t* seg_off, int64_t segments,
                    int64_t seg_quads, const uint8_t* bp, int32_t* out, int64_t ldt);
  // Interleaves int16 rows r0, r1 (r1 may be null: zeros) into the int16 panels at k-pair kk for
  // the columns of whole panels; returns how many columns it did.
  int64_t (*interleave_pair)(const int16_t* r0, const int16_t* r1, int64_t n, int64_t Kp, int64_t kk, int16_t* dst);
  // Q8PackRowsB's full panels for one k-quad: panel p's 16 x 4 bytes at d + p * panel_step from
  // rows r[0..3] (null: zeros) at column p * 16.
  void (*pack_quad_panels)(const uint8_t* const* r, int64_t full, int64_t panel_step, uint8_t* d);
  // For each of count windows w (at src + w * step): dst[w * ld + c] = max over its kh x kw window
  // of int32 accumulators; returns how many leading c it did (the same for every window). One call
  // per row of windows: a call per window cost a tenth of a pooled int8 conv's time.
  int64_t (*max_over_windows)(const int32_t* src, int64_t ld, int64_t row, int64_t kh, int64_t kw, int64_t n,
                              int64_t count, int64_t step, int32_t* dst);
  // The epilogue's vector part (kernels/cpu/qgemm_epilogue.cc); returns how many columns of
  // every row it did.
  int64_t (*epilogue)(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n, int64_t r0,
                      int64_t c0, char* y, int64_t ldy, size_t es);
  // The depthwise conv's tap sums over n rounded up to 32 outputs (kernels/cpu/qlinear.cc).
  void (*depthwise_taps)(int32_t* acc, const uint8_t* const* src, const int32_t* w, int taps, int64_t n);
};

// The table this CPU runs (WHITTLE_ISA caps it), or null: the scalar loops.
const QIsaKernels* QKernels();

}  // namespace whittle::qgemm_internal

// The tables, each defined in its ISA's translation unit (namespace = file name).
namespace whittle::cpu {
namespace qgemm_kernels_avx2 {
extern const qgemm_internal::QIsaKernels kTable;  // AVX2 + FMA
}
namespace qgemm_kernels_vnni_avx2 {
extern const qgemm_internal::QIsaKernels kTable;  // + AVX-VNNI
}
namespace qgemm_kernels_avx512 {
extern const qgemm_internal::QIsaKernels kTable;  // AVX-512 F/BW/VL
}
namespace qgemm_kernels_avx512vnni {
extern const qgemm_internal::QIsaKernels kTable;  // + AVX512-VNNI
}
}  // namespace whittle::cpu
