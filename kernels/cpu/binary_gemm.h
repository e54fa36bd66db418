// Per-ISA inner loops of the binarized layers' CPU kernels (kernels/cpu/binary.cc), each in a file
// compiled for its ISA (see CMakeLists.txt) and chosen at run time:
//   XorPopcount: out[r * ldo + j] = popcount(a_r XOR w_j) over `words` uint64 words, for rows
//     r < rows of a (lda words apart) and columns j < n of w (words apart). The XNOR-Net dot
//     product is then K - 2 * out (padding bits are zero in both operands).
//     popcnt: 64-bit POPCNT per word; avx2: vpshufb nibble lookup on 256-bit vectors, byte
//     counts summed with vpsadbw; avx512: VPOPCNTDQ on 512-bit vectors (masked tail loads).
//     Rows shorter than one vector take the POPCNT loop on the vector paths too.
//   PackSigns: lib/ir/binary_format.h's PackSigns (bit = x >= 0, returns sum |x|) vectorized:
//     compare masks per 64 inputs, |x| summed in float lanes (then in double).
//   DecodeSignPanel (activations=float): one packed-GEMM panel of nr output channels,
//     out[k * nr + j] = bit j of masks[k] ? alpha[j] : -alpha[j] for k < K: the weights sign * alpha,
//     made by selecting between alpha and -alpha (no multiply), for the packed GEMM's tiles.
//   Column-panel kernels the BinaryMatMul op runs on layouts made once at load: the XNOR count
//     on AVX-512 (XorPopcountPanels) and AVX2 (XorPopcountNibbles); activations=float without
//     any decode on AVX-512 (SignMaskGemm: masked adds) and on AVX2 for <= 4 rows (SignXorGemm).
#pragma once

#include <cstdint>
#include <vector>

namespace whittle::cpu {

enum class PopcountPath { kPortable = 0, kPopcnt = 1, kAvx2 = 2, kAvx512 = 3 };

// The fastest path this CPU runs, capped by WHITTLE_ISA (scalar keeps POPCNT; avx2 stops below
// AVX-512 VPOPCNTDQ). AVX-512 needs AVX512F, VL, BW and AVX512_VPOPCNTDQ.
PopcountPath ActivePopcountPath();
// Whether this CPU runs a path (tests call every one it runs).
bool CpuHasPopcountPath(PopcountPath p);
const char* PopcountPathName(PopcountPath p);

using XorPopcountFn = void (*)(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n,
                               int64_t words, int32_t* out, int64_t ldo);
XorPopcountFn XorPopcountFor(PopcountPath p);
using PackSignsFn = double (*)(const float* x, int64_t k, uint64_t* out);
PackSignsFn PackSignsFor(PopcountPath p);

namespace binary_portable {
void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo);
}  // namespace binary_portable
namespace binary_popcnt {
void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo);
}  // namespace binary_popcnt
namespace binary_avx2 {
double PackSigns(const float* x, int64_t k, uint64_t* out);
void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo);
// XorPopcount against NibbleColumns panels (the first at `panels`, n columns from there), 32
// columns per 256-bit vector: a row's nibble selects a 16-entry popcount(x ^ w) table and one
// vpshufb looks up 32 columns' weight nibbles in it. Tiles of 4 rows x 96 columns.
void XorPopcountNibbles(int64_t rows, const uint64_t* a, int64_t lda, const uint8_t* panels, int64_t n,
                        int64_t words, int32_t* out, int64_t ldo);
// activations=float for a few rows without decoding (AVX2 has no masked adds): Y[r, j] =
// alpha[j] * sum_k sign(W[j, k]) x[r, k] + bias[j] (then max(., 0) when relu), from sign masks in
// panels of 16 columns (masks[p * K + k] bit c = column 16p + c, SignPanels' AVX2 layout); x is
// XORed with the sign each mask bit gives and added. alpha padded to whole panels.
void SignXorGemm(int64_t rows, const float* a, int64_t lda, const uint32_t* masks, int64_t K, int64_t n,
                 const float* alpha, const float* bias, bool relu, float* y, int64_t ldy);
// nr = 16 (packed_gemm_avx2::kNr); masks[k] bits 0..15.
void DecodeSignPanel(const uint32_t* masks, int64_t K, const float* alpha, float* out);
}  // namespace binary_avx2
// Column panels for XorPopcountPanels: w [n][words] as ceil(n / 8) panels of [words][8] words
// (word i of columns 8p..8p+7 adjacent), columns past n zero.
std::vector<uint64_t> InterleaveColumns(const uint64_t* w, int64_t n, int64_t words);

// Nibble panels for binary_avx2::XorPopcountNibbles: w [n][words] as ceil(n / 32) panels of
// [16 * words][32] bytes, byte c of row q = nibble q (bits 4q..4q+3) of column 32p + c; columns
// past n zero.
std::vector<uint8_t> NibbleColumns(const uint64_t* w, int64_t n, int64_t words);

namespace binary_avx512 {
double PackSigns(const float* x, int64_t k, uint64_t* out);
// XorPopcount against InterleaveColumns panels (the first of them at `panels`, n columns from
// there): each 512-bit lane accumulates one column's count as word i of a row is broadcast
// against word i of eight columns, so no horizontal sums are needed (2.7x the row-major tile at
// M = 64, N = K = 1024). Tiles of 4 rows x 16 columns.
void XorPopcountPanels(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* panels, int64_t n, int64_t words,
                       int32_t* out, int64_t ldo);
void XorPopcount(int64_t rows, const uint64_t* a, int64_t lda, const uint64_t* w, int64_t n, int64_t words,
                 int32_t* out, int64_t ldo);
// activations=float without decoding: Y[r, j] = alpha[j] * (sum_k sign(W[j, k]) x[r, k]) + bias[j]
// (then max(., 0) when relu) for r < rows, j < n, from sign masks in panels of 32 columns
// (masks[p * K + k] bit c = column 32p + c, as SignPanels in binary.cc lays them out) and
// rowsum[r] = sum_k x[r, k]: masked adds of broadcast x[r, k] into the columns whose bit is set
// give S, and the signed sum is 2 S - rowsum. No multiply in the k loop, 1 bit read per weight.
// alpha, bias (null or n floats) and y start at column 0 of the first panel.
void SignMaskGemm(int64_t rows, const float* a, int64_t lda, const float* rowsum, const uint32_t* masks, int64_t K,
                  int64_t n, const float* alpha, const float* bias, bool relu, float* y, int64_t ldy);
// out[r] = sum of the k floats of row r (32 lanes of partial sums; lda apart).
void SumRows(int64_t rows, const float* a, int64_t lda, int64_t k, float* out);
// nr = 32 (packed_gemm_avx512::kNr).
void DecodeSignPanel(const uint32_t* masks, int64_t K, const float* alpha, float* out);
}  // namespace binary_avx512

}  // namespace whittle::cpu
