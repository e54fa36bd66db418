// Decoding of weight-shared panels for the codebook kernel (kernels/cpu/codebook.cc): rows k < K
// of one packed-GEMM panel, out[k * kNr + j] = table[idx[k * kNr + j]], with the indices
// already laid out in panel order (one byte each). Codebooks of up to 16 entries are looked up
// in registers (vpermps); larger ones with a gather. Per ISA, compiled with its flags.
#pragma once

#include <cstdint>

namespace whittle::cpu {

namespace codebook_avx2 {
// kNr = 16 (packed_gemm_avx2::kNr).
void DecodePanel(const uint8_t* idx, int64_t K, const float* cb, int64_t ncb, float* out);
}  // namespace codebook_avx2
namespace codebook_avx512 {
// kNr = 32 (packed_gemm_avx512::kNr).
void DecodePanel(const uint8_t* idx, int64_t K, const float* cb, int64_t ncb, float* out);
}  // namespace codebook_avx512

}  // namespace whittle::cpu
