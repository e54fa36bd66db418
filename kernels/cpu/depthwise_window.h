#pragma once
// The int8 depthwise convolution's window kernel (kernels/cpu/qlinear.cc, DepthwiseBytes): each
// 4-byte lane of a vector gathers one output's taps of one kernel row from a single 64-byte load
// (vpermb), and one vpdpbusd multiplies and adds the four. Chosen at run time: AVX-512 VBMI and
// VNNI (Ice Lake and later), else the AVX2 form (Windows2: pairs of taps, pshufb and vpmaddwd).
#include <cstdint>

namespace whittle::cpu {
namespace depthwise {

// The byte gathers of a kernel row, made once per convolution: for Windows, lane l's byte k loads
// byte sw * l + k * dw; for Windows2, pair m's shuffle puts output l's taps 2m and 2m + 1 (per
// 128-bit half of 4 outputs) in the low bytes of two int16, the high bytes zero (0x80).
struct WindowTable {
  alignas(64) uint8_t perm[64];
  alignas(32) uint8_t shuffle[8][32];
};
inline WindowTable MakeWindowTable(int64_t sw, int64_t dw, int pairs) {
  WindowTable t{};
  for (int l = 0; l < 16; ++l)
    for (int k = 0; k < 4; ++k) t.perm[4 * l + k] = static_cast<uint8_t>((sw * l + k * dw) & 63);
  for (int m = 0; m < pairs && m < 8; ++m)
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int e = 0; e < 2; ++e) {
          t.shuffle[m][16 * h + 4 * l + 2 * e] = static_cast<uint8_t>((sw * l + (2 * m + e) * dw) & 15);
          t.shuffle[m][16 * h + 4 * l + 2 * e + 1] = 0x80;
        }
  return t;
}

// The requantizing epilogue of one channel, fused into the window kernels where the output is
// quantized: the formula of kernels/cpu/qgemm_epilogue.cc bit for bit, float(acc + bias) * mult
// clamped to [lo, hi], rounded half to even, + zp, stored as uint8 (u8) or int8 bytes at y[p].
struct FusedRequant {
  int32_t bias = 0;
  float mult = 0.f, lo = 0.f, hi = 0.f;
  int32_t zp = 0;
  bool u8 = true;
  void* y = nullptr;
};

// Whether a kernel row at column stride sw and dilation dw fits one load: 16 outputs' group of 4
// taps reads bytes up to 15 * sw + 3 * dw of it.
inline bool WindowFits(int64_t sw, int64_t dw) { return 15 * sw + 3 * dw <= 63; }

// Whether depthwise_avx2::Windows takes a kernel row of kw taps: 4 outputs' taps within one
// 16-byte load.
inline bool WindowFits2(int64_t sw, int64_t kw, int64_t dw) { return 3 * sw + (kw - 1) * dw <= 15; }

// Tests: 0 turns the window kernels off (DepthwiseBytes then takes its tap-by-tap path), 2 takes
// the AVX2 form where the CPU has AVX2 (even with AVX-512), -1 back to automatic.
void SetWindowKernel(int use);

}  // namespace depthwise

// The per-ISA kernels (namespace = file name), called where kernels/cpu/isa/features.h says the
// CPU runs them.
namespace depthwise_avx512vbmi {  // depthwise_avx512vbmi.cc
using depthwise::FusedRequant;
using depthwise::WindowTable;
// The AVX-512 VBMI + VNNI form: acc[oh * out_w + ow] = sum over kernel rows i < kh and taps j of rows[i][oh * pitch + sw * ow +
// j * dw] * w_ij, for oh < out_h, ow < out_w. wq[i * groups + g] holds taps 4g .. 4g + 3 of row i
// as int8 bytes, low byte first, 0 past the row's last tap. Each output row is read in vectors of
// 16 outputs, so rows[i] must be readable 64 + 16 * sw + 4 * groups * dw bytes past the last
// output's window. Exact: vpdpbusd accumulates u8 x s8 products in int32. With rq, the sums go
// through its epilogue to rq->y instead of acc (which may then be null).
void Windows(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wq, int groups,
             int64_t sw, int64_t dw, int64_t out_h, int64_t out_w, int64_t pitch, const FusedRequant* rq);
// Row r of width bytes at src + r * width, XORed with flip, to dst + dst_at[r], for r < rows.
void CopyRows(uint8_t* dst, const int64_t* dst_at, const uint8_t* src, int64_t rows, int64_t width, uint8_t flip);
}  // namespace depthwise_avx512vbmi

namespace depthwise_avx2 {  // depthwise_avx2.cc
using depthwise::FusedRequant;
using depthwise::WindowTable;
// The AVX2 form: 8 outputs per vector, each 128-bit half's 4 gathered from one 16-byte load by
// pshufb as pairs of taps zero-extended to int16, times wp[i * pairs + m] (taps 2m and 2m + 1 of
// row i as int16, low first, 0 past the row) by vpmaddwd. Same result and reads as
// depthwise_avx512vbmi::Windows.
void Windows(const WindowTable& table, int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wp, int pairs,
             int64_t sw, int64_t out_h, int64_t out_w, int64_t pitch, const FusedRequant* rq);
}  // namespace depthwise_avx2

}  // namespace whittle::cpu
