#pragma once
// y[i] = table[x[i]] over bytes (the ai.whittle Lookup node's byte tables): 64 at a time by
// vpermi2b where the CPU has AVX-512 VBMI, 32 at a time by pshufb over the table's 16 rows with
// AVX2, else one by one. All give the same bytes.
#include <cstdint>

namespace whittle::cpu {

void LookupBytes(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);

namespace lookup_internal {
// The AVX-512 VBMI form (kernels/cpu/lookup_avx512vbmi.cc), called where the CPU has it.
void LookupBytesVbmi(const uint8_t* x, int64_t n, const uint8_t* table, uint8_t* y);
// Tests: 0 keeps the VBMI form off, -1 back to automatic.
void SetLookupVbmi(int use);
}  // namespace lookup_internal

}  // namespace whittle::cpu
