// The requantizing epilogue shared by every int8 path: float(acc + bias) * multiplier,
// round-half-even, + zero point, saturate (Relu: clamp at the zero point), AVX2 8 at a time (and
// AVX-512 16 at a time for quantized outputs, where the CPU runs it: kernels/cpu/isa/
// qgemm_kernels.h) with the same results as the scalar formula of kernels/reference/qlinear.h.
// Also the choice of the int8 kernels' per-ISA table.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/isa/qgemm_kernels.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/qgemm_tile.h"

namespace whittle {
namespace qgemm_internal {

const QIsaKernels* QKernels() {
  static const QIsaKernels* const table = []() -> const QIsaKernels* {
    const cpu::IsaFeatures& f = cpu::CpuFeatures();
    if (f.Avx512()) return f.avx512vnni ? &cpu::qgemm_kernels_avx512vnni::kTable : &cpu::qgemm_kernels_avx512::kTable;
    if (f.Avx2()) return f.avx_vnni ? &cpu::qgemm_kernels_vnni_avx2::kTable : &cpu::qgemm_kernels_avx2::kTable;
    return nullptr;
  }();
  return table;
}

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

}  // namespace

void EpilogueRows(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n, int64_t r0, int64_t c0,
                  void* y, int64_t ldy) {
  int64_t j0 = 0;
  const size_t es = OutElemSize(e.out->dtype);
  char* yc = static_cast<char*>(y);
  if (const QIsaKernels* isa = QKernels()) j0 = isa->epilogue(e, acc, lda, rows, n, r0, c0, yc, ldy, es);
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
