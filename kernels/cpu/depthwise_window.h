#pragma once
// The int8 depthwise convolution's window kernel (kernels/cpu/qlinear.cc, DepthwiseBytes): each
// 4-byte lane of a vector gathers one output's taps of one kernel row from a single 64-byte load
// (vpermb), and one vpdpbusd multiplies and adds the four. Chosen at run time: AVX-512 VBMI and
// VNNI (Ice Lake and later).
#include <cstdint>

namespace whittle::cpu::depthwise {

// Whether a kernel row at column stride sw and dilation dw fits one load: 16 outputs' group of 4
// taps reads bytes up to 15 * sw + 3 * dw of it.
inline bool WindowFits(int64_t sw, int64_t dw) { return 15 * sw + 3 * dw <= 63; }

// acc[oh * out_w + ow] = sum over kernel rows i < kh and taps j of rows[i][oh * pitch + sw * ow +
// j * dw] * w_ij, for oh < out_h, ow < out_w. wq[i * groups + g] holds taps 4g .. 4g + 3 of row i
// as int8 bytes, low byte first, 0 past the row's last tap. Each output row is read in vectors of
// 16 outputs, so rows[i] must be readable 64 + 16 * sw + 4 * groups * dw bytes past the last
// output's window. Exact: vpdpbusd accumulates u8 x s8 products in int32.
void Windows(int32_t* acc, const uint8_t* const* rows, int kh, const int32_t* wq, int groups, int64_t sw, int64_t dw,
             int64_t out_h, int64_t out_w, int64_t pitch);

// Tests: 0 turns the window kernel off (DepthwiseBytes then takes its tap-by-tap path), -1 back to
// automatic.
void SetWindowKernel(int use);

// Row r of width bytes at src + r * width, XORed with flip, to dst + dst_at[r], for r < rows.
void CopyRows(uint8_t* dst, const int64_t* dst_at, const uint8_t* src, int64_t rows, int64_t width, uint8_t flip);

}  // namespace whittle::cpu::depthwise
