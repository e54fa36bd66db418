// The register tile of packed_gemm.h, written once over a vector-traits struct V (included by the
// per-ISA translation units inside their own namespace, after defining V). V provides F, kWidth,
// Zero, Load, Set, Fma, Add, Max, Store and StoreN (the first n lanes).
//
// Tile<MR, NP>: MR rows of A times NP panels of kNr = NV*kWidth columns. Each k step loads the
// NP*NV vectors of packed B once and broadcasts MR scalars of A: MR*NP*NV independent FMA chains.

// How many k steps ahead a tile prefetches its packed B rows (16: 2-3 KB ahead per panel; measured
// against 8 and 32 with run-model --bench on single-MatMul models, see packed_gemm.h).
constexpr int64_t kPrefetchK = 16;

template <int MR, int NP, int NV>
struct PackedTile {
  static void Run(int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
                  int64_t ldc, int64_t ncols, const float* bias, bool relu) {
    constexpr int kNr = NV * V::kWidth;
    typename V::F acc[MR][NP * NV];
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < NP * NV; ++j) acc[r][j] = V::Zero();
    const float* arow[MR];
    for (int r = 0; r < MR; ++r) arow[r] = a + r * lda;
    for (int64_t k = 0; k < K; ++k) {
      // B streams through once per tile, from L2 or memory (a layer's weights are read once per
      // run): prefetched kPrefetchK steps ahead, each panel's row being kNr floats of whole lines.
      if (k + kPrefetchK < K)
        for (int p = 0; p < NP; ++p)
          for (int l = 0; l < kNr; l += 16) __builtin_prefetch(bp + p * panel_stride + (k + kPrefetchK) * kNr + l);
      typename V::F b[NP * NV];
      for (int p = 0; p < NP; ++p)
        for (int v = 0; v < NV; ++v) b[p * NV + v] = V::Load(bp + p * panel_stride + k * kNr + v * V::kWidth);
      for (int r = 0; r < MR; ++r) {
        const typename V::F av = V::Set(arow[r][k]);
        for (int j = 0; j < NP * NV; ++j) acc[r][j] = V::Fma(av, b[j], acc[r][j]);
      }
    }
    for (int j = 0; j < NP * NV; ++j) {
      const int64_t col = static_cast<int64_t>(j) * V::kWidth;
      if (col >= ncols) break;
      const int64_t n = ncols - col < V::kWidth ? ncols - col : V::kWidth;
      const typename V::F bv = bias ? V::LoadN(bias + col, n) : V::Zero();
      for (int r = 0; r < MR; ++r) {
        typename V::F v = V::Add(acc[r][j], bv);
        if (relu) v = V::Max(v, V::Zero());
        if (n == V::kWidth) V::Store(c + r * ldc + col, v);
        else V::StoreN(c + r * ldc + col, v, n);
      }
    }
  }
};

// rows in [1, kMaxRows], np in [1, PackedGemmPanelsPerTile(rows)] (fewer at the last panels):
// the instantiation for exactly that many rows and panels.
template <int R, int NV>
void TileForPanels(int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride, float* c,
                   int64_t ldc, int64_t ncols, const float* bias, bool relu) {
  constexpr int kNp = PackedGemmPanelsPerTile(R);
  if (kNp >= 4 && np >= 3) PackedTile<R, kNp, NV>::Run(K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);
  else if (kNp >= 2 && np >= 2) PackedTile<R, 2, NV>::Run(K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);
  else PackedTile<R, 1, NV>::Run(K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);
}

template <int NV, int kMax>
void TileDispatch(int rows, int np, int64_t K, const float* a, int64_t lda, const float* bp, int64_t panel_stride,
                  float* c, int64_t ldc, int64_t ncols, const float* bias, bool relu) {
  switch (rows) {
#define WHITTLE_PACKED_TILE(R)                                                                      \
  case R:                                                                                           \
    if constexpr (R <= kMax)                                                                        \
      TileForPanels<R, NV>(np, K, a, lda, bp, panel_stride, c, ldc, ncols, bias, relu);             \
    return;
    WHITTLE_PACKED_TILE(1)
    WHITTLE_PACKED_TILE(2)
    WHITTLE_PACKED_TILE(3)
    WHITTLE_PACKED_TILE(4)
    WHITTLE_PACKED_TILE(5)
    WHITTLE_PACKED_TILE(6)
    WHITTLE_PACKED_TILE(7)
    WHITTLE_PACKED_TILE(8)
    WHITTLE_PACKED_TILE(9)
    WHITTLE_PACKED_TILE(10)
    WHITTLE_PACKED_TILE(11)
    WHITTLE_PACKED_TILE(12)
#undef WHITTLE_PACKED_TILE
    default:
      return;
  }
}
