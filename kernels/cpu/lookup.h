#pragma once
// y[i] = table[x[i]] (the ai.whittle Lookup node's tables). Bytes: 64 at a time by
// vpermi2b where the CPU has AVX-512 VBMI, 32 at a time by pshufb over the table's 16 rows with
// AVX2, else one by one. All give the same bytes.
#include <cstdint>

namespace whittle::cpu {

void LookupBytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);
// The same with 256 floats: 16 at a time by vpermt2ps with AVX-512, else one by one.
void LookupFloats(const uint8_t* x, int64_t n, const float* table, float* y);

// The per-ISA forms, called where kernels/cpu/isa/features.h says the CPU runs them.
namespace lookup_avx512vbmi {  // lookup_avx512vbmi.cc
void Bytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);
}
namespace lookup_avx2 {  // lookup_avx2.cc: the first n / 32 * 32 bytes; returns how many
int64_t Bytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);
}
namespace lookup_avx512 {  // lookup_avx512.cc
void Floats(const uint8_t* x, int64_t n, const float* table, float* y);
}

namespace lookup_internal {
// Tests: 0 keeps the vector forms (VBMI bytes, AVX-512 floats) off, -1 back to automatic.
void SetLookupVector(int use);
}  // namespace lookup_internal

}  // namespace whittle::cpu
