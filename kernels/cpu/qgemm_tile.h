// Internals shared by the int8 GEMM drivers (kernels/cpu/qgemm.cc: int16 kernel, qgemm8.cc: byte
// kernel) and the epilogues (qgemm_epilogue.cc): the per-call epilogue state and the tiled loop
// over row panels x column-panel chunks that both kernels run. Not part of the public interface.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/common/quant_params.h"
#include "kernels/cpu/parallel.h"

namespace whittle::qgemm_internal {

inline int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }
inline size_t OutElemSize(DType t) { return t == DType::kUInt8 || t == DType::kInt8 ? 1 : 4; }
// Four bytes at p (two int16 or four int8/uint8 operands) as one int32 lane value, unaligned.
inline int32_t LoadInt32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The portable micro-kernels accumulate in place: rows x n accumulators start at 0.
inline void ZeroTileRows(int64_t rows, int64_t n, int32_t* tile, int64_t ldt) {
  for (int64_t i = 0; i < rows; ++i) std::fill(tile + i * ldt, tile + i * ldt + n, 0);
}

// Per-call epilogue state: the output format in plain fields (so stores through byte pointers do
// not force reloads) and each local row's or column's multiplier and bias, padded to kQNr.
struct Epilogue {
  const QOutput* out = nullptr;
  QOutput::Kind kind = QOutput::Kind::kInt32;
  bool u8 = false, relu = false, channel_is_row = false;
  float lo = 0.f, hi = 0.f;  // clamp bounds relative to the zero point
  int32_t zp = 0;
  std::vector<float> mult;
  std::vector<int32_t> bias;
};

// Multiplier and bias per local channel (rows or columns), padded to a multiple of 16.
Epilogue MakeEpilogue(const QOutput& out, bool channel_is_row, int64_t channel_offset, int64_t rows, int64_t cols);

// Folds -zx * sums[c] into the bias of channels c < n (int32 wrap-around, as the reference sums):
// the unsigned operand's zero point zx times each channel's sum of the signed operand.
inline void FoldZeroPointIntoBias(Epilogue& e, int32_t zx, const int32_t* sums, int64_t n) {
  for (int64_t c = 0; c < n && c < static_cast<int64_t>(e.bias.size()); ++c)
    e.bias[static_cast<size_t>(c)] = static_cast<int32_t>(static_cast<uint32_t>(e.bias[static_cast<size_t>(c)]) -
                                                          static_cast<uint32_t>(zx) * static_cast<uint32_t>(sums[c]));
}

// rows x n accumulators (row stride lda) of local rows r0.., columns c0.. -> y (already offset
// to (r0, c0), row stride ldy elements).
void EpilogueRows(const Epilogue& e, const int32_t* acc, int64_t lda, int64_t rows, int64_t n, int64_t r0, int64_t c0,
                  void* y, int64_t ldy);
// n accumulators of local row r, columns c0.. -> y (already offset to (r, c0)).
inline void EpilogueSegment(const Epilogue& e, const int32_t* acc, int64_t n, int64_t r, int64_t c0, void* y) {
  EpilogueRows(e, acc, 0, 1, n, r, c0, y, 0);
}

// The implicit-GEMM conv's band (kernels/cpu/qconv_nhwc.cc): rows consecutive output positions
// (pos: their offsets in the padded image xp) in micro-tiles of 4 (fewer in the last):
// tile(a, n, r) with a[i] = xp + pos[r + i] for i < n.
template <class Tile>
inline void ForConvBandTiles(int64_t rows, const uint8_t* xp, const int64_t* pos, const Tile& tile) {
  for (int64_t r = 0; r < rows; r += 4) {
    const int64_t n = std::min<int64_t>(4, rows - r);
    const uint8_t* a[4] = {xp, xp, xp, xp};
    for (int64_t i = 0; i < n; ++i) a[i] = xp + pos[r + i];
    tile(a, n, r);
  }
}

// The int8 convolutions' threading: at batch >= threads, contiguous blocks of images in parallel
// (4 per thread; each block sets up its scratch once), one thread inside each image; else one
// block, with all threads inside each image. body(n0, n1, gemm_threads) runs images [n0, n1).
template <class Body>
void ForImageBlocks(int64_t batch, int threads, const Body& body) {
  const bool per_image = batch >= threads;
  const int64_t blocks = per_image ? std::min<int64_t>(batch, 4 * threads) : 1;
  ParallelFor(blocks, per_image ? threads : 1, [&](int64_t blk) {
    body(blk * batch / blocks, (blk + 1) * batch / blocks, per_image ? 1 : threads);
  });
}

// Whether QGemmPacked8 runs that tile: the CPU has AVX512-VNNI (kernels/cpu/isa/features.h) and
// WHITTLE_ISA does not cap it below AVX-512; SetQ8Avx512Vnni (tests) turns it off (0), on where
// supported (1) or back to
// that default (-1).
bool Q8Avx512Vnni();
void SetQ8Avx512Vnni(int use);

// Column panels per work item at most (the strip is kMr x kTileChunkPanels * kNr int32).
constexpr int64_t kTileChunkPanels = 16;

// y (M x N, row stride ldy) = epilogue of the products the micro-kernel computes tile by tile:
// tile(rows, rp, cp, out, ldt) writes rows (<= kMr) x kNr accumulators of row panel rp and column
// panel cp at out (row stride ldt). A work item is a group of row panels times a chunk of up to
// 16 column panels: the micro-kernel fills an L1-resident strip (at most kMr x 16 x kNr int32;
// narrow products take more row panels per item) and the epilogue then runs over the whole strip
// in one call (with N = 16, e.g. a 16-channel conv, per-row-panel epilogues cost as much as the
// products). K (the padded inner size) only sizes the threading decision.
template <int64_t kMr, int64_t kNr, class Tile>
void TiledGemm(int64_t M, int64_t N, int64_t K, const Epilogue& e, void* y, int64_t ldy, int threads,
               const Tile& tile) {
  const int64_t nrp = (M + kMr - 1) / kMr, ncp = (N + kNr - 1) / kNr;
  const size_t es = OutElemSize(e.out->dtype);
  // Below ~1M multiply-adds (a batch-1 GEMV) an OpenMP fork/join costs more than it saves.
  const int work_threads = M * N * K >= (1 << 20) ? threads : 1;
  // Few row panels (small batches): narrower chunks, so that every thread gets work.
  int64_t chunk_panels = kTileChunkPanels;
  while (chunk_panels > 1 && nrp * ((ncp + chunk_panels - 1) / chunk_panels) < 4 * work_threads) chunk_panels /= 2;
  chunk_panels = std::min(chunk_panels, ncp);
  const int64_t nchunks = (ncp + chunk_panels - 1) / chunk_panels;
  int64_t row_group = kTileChunkPanels / chunk_panels;
  while (row_group > 1 && (nrp + row_group - 1) / row_group * nchunks < 4 * work_threads) row_group /= 2;
  const int64_t ngroups = (nrp + row_group - 1) / row_group;
  ParallelFor(ngroups * nchunks, work_threads, [&](int64_t t) {
    const int64_t chunk = t / ngroups, rp0 = t % ngroups * row_group, rp1 = std::min(nrp, rp0 + row_group);
    alignas(32) int32_t strip[kMr * kTileChunkPanels * kNr];
    const int64_t cp0 = chunk * chunk_panels, cp1 = std::min(ncp, cp0 + chunk_panels);
    const int64_t ldt = (cp1 - cp0) * kNr;
    const int64_t r0 = rp0 * kMr, nr = std::min(rp1 * kMr, M) - r0;
    for (int64_t rp = rp0; rp < rp1; ++rp)
      for (int64_t cp = cp0; cp < cp1; ++cp)
        tile(std::min(kMr, M - rp * kMr), rp, cp, strip + (rp - rp0) * kMr * ldt + (cp - cp0) * kNr, ldt);
    const int64_t c0 = cp0 * kNr, nc = std::min(ldt, N - c0);
    EpilogueRows(e, strip, ldt, nr, nc, r0, c0, static_cast<char*>(y) + static_cast<size_t>(r0 * ldy + c0) * es, ldy);
  });
}

}  // namespace whittle::qgemm_internal

// The byte kernel's AVX-512 VNNI tile (qgemm8_avx512vnni.cc): tile[rows][np * 16] = rows (<= kMr)
// of A (4-byte quads, row stride lda) times np (1 or 2) B panels panel_stride bytes apart, over
// kquads quads; a_unsigned: A holds the unsigned operand (activations), else B does. Call only
// where Q8Avx512Vnni() says so.
namespace whittle::cpu::qgemm8_avx512vnni {
constexpr int64_t kMr = 8, kNr = 32;
void Tile(int rows, int np, bool a_unsigned, const uint8_t* ap, int64_t lda, const uint8_t* bp, int64_t panel_stride,
          int64_t kquads, int32_t* tile, int64_t ldt);
// The implicit-GEMM conv's band (qconv_nhwc.cc): `rows` output positions (their first bytes at
// xp + pos[i], unsigned) x np panels, tiles of 8 positions, each position's K bytes in
// `segments` runs of seg_quads quads at seg_off[s] from its first byte.
void ConvBand(int64_t rows, const uint8_t* xp, const int64_t* pos, const int64_t* seg_off, int64_t segments,
              int64_t seg_quads, const uint8_t* bp, int64_t panel_stride, int np, int32_t* out, int64_t ldt);
}  // namespace whittle::cpu::qgemm8_avx512vnni
