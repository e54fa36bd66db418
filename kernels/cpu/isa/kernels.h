// Entry points of small per-ISA translation units that shared CPU kernels call by run-time
// choice. As everywhere in kernels/cpu, a per-ISA file family_isa.cc (compiled for exactly that
// ISA: CMakeLists.txt) defines namespace whittle::cpu::family_isa. Call one only where
// CpuFeatures() (kernels/cpu/isa/features.h) says the CPU runs it; each has a scalar twin in its
// shared file that gives the same results (bit for bit: max and data-movement paths).
#pragma once

#include <cstdint>

namespace whittle::cpu {

namespace movement_avx2 {
// dst[j * ld_dst + i] = src[i * ld_src + j] (32-bit elements) for i < rows and
// j < cols, both multiples of 8, as 8x8 register transposes.
void TransposeBlocks32(const void* src, int64_t ld_src, void* dst, int64_t ld_dst, int64_t rows, int64_t cols);
}  // namespace movement_avx2

namespace pool_avx2 {
// out[o] = max of the 2x2 block at columns 2o, 2o+1 of rows r0 and r1, o < ow.
void MaxRow2x2(const float* r0, const float* r1, int64_t ow, float* out);
// The same on 8-bit values; returns how many leading outputs it did (the caller does the rest).
int64_t MaxRow2x2U8(const uint8_t* r0, const uint8_t* r1, int64_t ow, uint8_t* out);
int64_t MaxRow2x2S8(const int8_t* r0, const int8_t* r1, int64_t ow, int8_t* out);
// d[i] = max(r0[i], r1[i]) for i < n; returns how many it did (0 below 8).
int64_t VerticalMaxU8(const uint8_t* r0, const uint8_t* r1, int64_t n, uint8_t* d);
int64_t VerticalMaxS8(const int8_t* r0, const int8_t* r1, int64_t n, int8_t* d);
}  // namespace pool_avx2

namespace pool_grad_avx2 {
// MaxPoolGrad of n 2x2 stride-2 windows of one row (kernels/cpu/pool.h).
void MaxPoolGrad2x2Stride2Row(const float* r0, const float* r1, const float* dy, int64_t n, float* d0, float* d1);
}  // namespace pool_grad_avx2

}  // namespace whittle::cpu
