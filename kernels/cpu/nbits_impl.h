// The per-ISA body of nbits_rows.h's DotRows, written once over a SIMD trait V (kernels/cpu/isa/)
// and a Codes struct that turns Codes::kBytes bytes of 4-bit codes into the floats of their low
// and high nibbles (V::kWidth lanes each; how is the ISA's own business: a vpermt2ps table on
// AVX-512, mask and convert on AVX2) and reads up to V::kWidth one-byte zero points. Included
// inside a per-ISA namespace after V and Codes are defined (nbits_avx2.cc, nbits_avx512.cc), so
// each ISA gets its own copy, compiled with its flags.

// sum_j scales[j] * zp[j] * asum[j] over one row's nb blocks.
inline float ZeroTerm(const NBitsRowsArgs& x, int64_t r, const float* asum) {
  const float* s = x.scales + r * x.nb;
  typename V::F t = V::Zero();
  for (int64_t j = 0; j < x.nb; j += V::kWidth) {
    const int64_t n = std::min<int64_t>(V::kWidth, x.nb - j);
    const typename V::F z = x.zp8  ? Codes::ZeroPoints(x.zp8 + r * x.nb + j, n)
                            : x.zf ? V::LoadN(x.zf + r * x.nb + j, n)
                                   : V::Set(x.zdefault);
    t = V::Fma(V::Mul(V::LoadN(s + j, n), z), V::LoadN(asum + j, n), t);
  }
  return V::Sum(t);
}

// MR rows of A times NR rows of codes (from row r0): every code decoded once, MR * NR chains.
template <int MR, int NR>
void Tile(const NBitsRowsArgs& x, int64_t r0, float* out, int64_t ldo) {
  using F = typename V::F;
  constexpr int64_t kStep = 2 * Codes::kBytes;  // weights per code load
  const int64_t nb = x.nb, block = x.block, steps = block / kStep, blob = block / 2, rb = x.row_bytes;
  const uint8_t* b = x.b + r0 * rb;
  const float* s = x.scales + r0 * nb;
  F tot[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) tot[m][r] = V::Zero();
  // The NR rows after the next NR are fetched while these run, a block's worth per block: rows are
  // short (K/2 bytes) and read side by side, which the hardware prefetcher follows too late.
  const char* ahead = reinterpret_cast<const char*>(b + 2 * NR * rb);
  for (int64_t j = 0; j < nb; ++j) {
    for (int64_t p = 0; p < NR * blob; p += 64) _mm_prefetch(ahead + j * NR * blob + p, _MM_HINT_T0);
    // Low and high nibbles in chains of their own: one chain per (m, r) would wait on the FMA
    // latency (4 cycles) twice per step.
    F acc[MR][NR], acc2[MR][NR];
    for (int m = 0; m < MR; ++m)
      for (int r = 0; r < NR; ++r) acc[m][r] = acc2[m][r] = V::Zero();
    for (int64_t c = 0; c < steps; ++c) {
      const int64_t off = j * blob + c * Codes::kBytes, k0 = j * block + c * kStep;
      for (int r = 0; r < NR; ++r) {
        F lo, hi;
        Codes::Decode(b + r * rb + off, &lo, &hi);
        for (int m = 0; m < MR; ++m) {
          acc[m][r] = V::Fma(lo, V::Load(x.a_perm + m * x.lda + k0), acc[m][r]);
          acc2[m][r] = V::Fma(hi, V::Load(x.a_perm + m * x.lda + k0 + V::kWidth), acc2[m][r]);
        }
      }
    }
    for (int r = 0; r < NR; ++r) {
      const F sc = V::Set(s[r * nb + j]);
      for (int m = 0; m < MR; ++m) tot[m][r] = V::Fma(sc, V::Add(acc[m][r], acc2[m][r]), tot[m][r]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int r = 0; r < NR; ++r) out[m * ldo + r] = V::Sum(tot[m][r]) - ZeroTerm(x, r0 + r, x.asum + m * nb);
}

template <int MR, int NR>
void Rows(const NBitsRowsArgs& x, float* out, int64_t ldo) {
  int64_t r = 0;
  for (; r + NR <= x.rows; r += NR) Tile<MR, NR>(x, r, out + r, ldo);
  for (; r < x.rows; ++r) Tile<MR, 1>(x, r, out + r, ldo);
}

// One row of A runs Codes::kRowsForOne rows of codes side by side (independent chains); more rows
// of A give enough chains with fewer.
void DotRowsImpl(const NBitsRowsArgs& x, float* out, int64_t ldo) {
  switch (x.mr) {
    case 1: return Rows<1, Codes::kRowsForOne>(x, out, ldo);
    case 2: return Rows<2, 2>(x, out, ldo);
    case 3: return Rows<3, 1>(x, out, ldo);
    default: return Rows<4, 1>(x, out, ldo);
  }
}
