#include "kernels/cpu/movement.h"

#include <cstring>
#include <numeric>

#include "kernels/common/broadcast.h"
#include "kernels/common/dtype_dispatch.h"
#include "kernels/cpu/isa/features.h"
#include "kernels/cpu/isa/kernels.h"

namespace whittle {
namespace {

// One axis of an outer iteration: its size and the element strides it moves in the input and
// the output.
struct Axis {
  int64_t size, in_stride, out_stride;
};

// Walks the row-major outer iteration over axes, keeping the input/output offsets incrementally
// (no div/mod per step once positioned).
class OffsetWalker {
 public:
  explicit OffsetWalker(const std::vector<Axis>& axes) : axes_(axes), idx_(axes.size(), 0) {}
  void Seek(int64_t u) {
    in_ = out_ = 0;
    for (size_t k = axes_.size(); k-- > 0;) {
      const int64_t i = u % axes_[k].size;
      u /= axes_[k].size;
      idx_[k] = i;
      in_ += i * axes_[k].in_stride;
      out_ += i * axes_[k].out_stride;
    }
  }
  void Next() {
    for (size_t k = axes_.size(); k-- > 0;) {
      in_ += axes_[k].in_stride;
      out_ += axes_[k].out_stride;
      if (++idx_[k] < axes_[k].size) return;
      in_ -= axes_[k].size * axes_[k].in_stride;
      out_ -= axes_[k].size * axes_[k].out_stride;
      idx_[k] = 0;
    }
  }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }

 private:
  const std::vector<Axis>& axes_;
  std::vector<int64_t> idx_;
  int64_t in_ = 0, out_ = 0;
};

int64_t CountOf(const std::vector<Axis>& axes) {
  int64_t n = 1;
  for (const Axis& a : axes) n *= a.size;
  return n;
}

bool Big(const Tensor& t) { return static_cast<int64_t>(t.nbytes()) >= kParallelMinBytes; }

// ---------------------------------------------------------------- Transpose

// Drops size-1 axes and merges input axes that stay adjacent in perm, so [N,C,H,W] -> NHWC
// becomes a batch of [C, H*W] -> [H*W, C] matrix transposes.
void SimplifyTranspose(const Dims& dims, const std::vector<int64_t>& perm, Dims* md, std::vector<int64_t>* mp) {
  std::vector<int64_t> newid(dims.size(), -1);
  Dims d1;
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] != 1) {
      newid[k] = static_cast<int64_t>(d1.size());
      d1.push_back(dims[k]);
    }
  std::vector<int64_t> p1;
  for (int64_t p : perm)
    if (newid[static_cast<size_t>(p)] >= 0) p1.push_back(newid[static_cast<size_t>(p)]);
  std::vector<std::pair<int64_t, int64_t>> groups;  // [first, last] input axes, in output order
  for (int64_t p : p1) {
    if (!groups.empty() && p == groups.back().second + 1) groups.back().second = p;
    else groups.push_back({p, p});
  }
  std::vector<size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return groups[a].first < groups[b].first; });
  md->assign(groups.size(), 1);
  mp->assign(groups.size(), 0);
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const auto& g = groups[order[pos]];
    for (int64_t a = g.first; a <= g.second; ++a) (*md)[pos] *= d1[static_cast<size_t>(a)];
    (*mp)[order[pos]] = static_cast<int64_t>(pos);
  }
}

template <class E>
void TransposeTyped(const E* src, E* dst, const Dims& md, const std::vector<int64_t>& mp, int threads, bool par) {
  const size_t n = md.size();
  const std::vector<int64_t> is = StridesOf(md);
  Dims od(n);
  for (size_t k = 0; k < n; ++k) od[k] = md[static_cast<size_t>(mp[k])];
  const std::vector<int64_t> os = StridesOf(od);
  if (mp[n - 1] == static_cast<int64_t>(n - 1)) {
    // The innermost axis stays innermost: copy contiguous runs.
    const int64_t run = md[n - 1];
    std::vector<Axis> outer;
    for (size_t k = 0; k + 1 < n; ++k) outer.push_back({od[k], is[static_cast<size_t>(mp[k])], os[k]});
    ParallelChunks(CountOf(outer), threads, par, [&](int64_t b, int64_t e) {
      OffsetWalker w(outer);
      w.Seek(b);
      for (int64_t u = b; u < e; ++u, w.Next()) std::memcpy(dst + w.out(), src + w.in(), sizeof(E) * run);
    });
    return;
  }
  // Batched 2-D transpose: input-contiguous axis (output position q) x output-contiguous axis
  // (input axis a), done in tiles so both sides stay in cache.
  const size_t a = static_cast<size_t>(mp[n - 1]);
  size_t q = 0;
  while (mp[q] != static_cast<int64_t>(n - 1)) ++q;
  const int64_t rows = md[n - 1], cols = md[a], in_col_stride = is[a], out_row_stride = os[q];
  std::vector<Axis> outer;
  for (size_t k = 0; k + 1 < n; ++k)
    if (k != q) outer.push_back({od[k], is[static_cast<size_t>(mp[k])], os[k]});
  constexpr int64_t kTile = 16;
  const bool use_avx2 = cpu::CpuFeatures().Avx2();
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t units = CountOf(outer) * row_tiles;
  ParallelChunks(units, threads, par, [&](int64_t b, int64_t e) {
    OffsetWalker w(outer);
    int64_t cur = -1;
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / row_tiles, rb = (u % row_tiles) * kTile;
      if (cur < 0) w.Seek(o);
      else
        while (cur < o) {
          w.Next();
          ++cur;
        }
      cur = o;
      const E* s = src + w.in();
      E* d = dst + w.out();
      const int64_t re = std::min(rows, rb + kTile);
      for (int64_t cb = 0; cb < cols; cb += kTile) {
        const int64_t ce = std::min(cols, cb + kTile);
        // 32-bit elements: whole 8x8 sub-blocks in AVX2 registers, the rest one by one.
        int64_t rf = rb, cf = cb;
        if (sizeof(E) == 4 && use_avx2) {
          rf = rb + (re - rb) / 8 * 8;
          cf = cb + (ce - cb) / 8 * 8;
          // src rows are the input's columns c (stride in_col_stride), dst rows the output's r.
          cpu::movement_avx2::TransposeBlocks32(s + cb * in_col_stride + rb, in_col_stride, d + rb * out_row_stride + cb,
                                       out_row_stride, cf - cb, rf - rb);
        }
        for (int64_t r = rb; r < re; ++r)
          for (int64_t c = r < rf ? cf : cb; c < ce; ++c) d[r * out_row_stride + c] = s[c * in_col_stride + r];
      }
    }
  });
}

// ---------------------------------------------------------------- Slice

template <class E>
void SliceTyped(const E* src, E* dst, const Dims& dims, const SliceParams& p, int threads, bool par) {
  // Trailing full axes fold into the previous axis when it has step 1, so runs get longer.
  Dims d = dims, start = p.start, step = p.step, len = p.len;
  while (d.size() > 1) {
    const size_t k = d.size() - 1;
    if (!(start[k] == 0 && step[k] == 1 && len[k] == d[k] && step[k - 1] == 1)) break;
    start[k - 1] *= d[k];
    len[k - 1] *= d[k];
    d[k - 1] *= d[k];
    d.pop_back();
    start.pop_back();
    step.pop_back();
    len.pop_back();
  }
  const size_t n = d.size();
  const std::vector<int64_t> is = StridesOf(d);
  int64_t base = 0;
  for (size_t k = 0; k < n; ++k) base += start[k] * is[k];
  const int64_t run = len[n - 1], last_step = step[n - 1];
  std::vector<Axis> outer;
  for (size_t k = 0; k + 1 < n; ++k) outer.push_back({len[k], step[k] * is[k], 0});
  const std::vector<int64_t> os = StridesOf(len);
  for (size_t k = 0; k + 1 < n; ++k) outer[k].out_stride = os[k];
  ParallelChunks(CountOf(outer), threads, par, [&](int64_t b, int64_t e) {
    OffsetWalker w(outer);
    w.Seek(b);
    for (int64_t u = b; u < e; ++u, w.Next()) {
      const E* s = src + base + w.in();
      E* o = dst + w.out();
      if (last_step == 1) std::memcpy(o, s, sizeof(E) * run);
      else
        for (int64_t i = 0; i < run; ++i) o[i] = s[i * last_step];
    }
  });
}

// ---------------------------------------------------------------- Expand

template <class E>
void ExpandTyped(const E* src, E* dst, const Dims& od, const std::vector<int64_t>& bstride, int threads, bool par) {
  const size_t n = od.size();
  const int64_t run = od[n - 1];
  const bool broadcast_last = bstride[n - 1] == 0 && run > 1;
  std::vector<Axis> outer;
  const std::vector<int64_t> os = StridesOf(od);
  for (size_t k = 0; k + 1 < n; ++k) outer.push_back({od[k], bstride[k], os[k]});
  ParallelChunks(CountOf(outer), threads, par, [&](int64_t b, int64_t e) {
    OffsetWalker w(outer);
    w.Seek(b);
    for (int64_t u = b; u < e; ++u, w.Next()) {
      E* o = dst + w.out();
      if (broadcast_last) std::fill(o, o + run, src[w.in()]);
      else std::memcpy(o, src + w.in(), sizeof(E) * run);
    }
  });
}

// ---------------------------------------------------------------- Pad

template <class E>
void PadTyped(const E* src, E* dst, const Dims& id, const Dims& od, const std::vector<int64_t>& pads, PadMode mode,
              E value, int threads, bool par) {
  const size_t r = id.size();
  const std::vector<int64_t> is = StridesOf(id);
  const int64_t lo = od[r - 1], d = id[r - 1], pb = pads[r - 1];
  const int64_t mid_b = std::clamp<int64_t>(pb, 0, lo), mid_e = std::clamp<int64_t>(pb + d, 0, lo);
  int64_t rows = 1;
  for (size_t k = 0; k + 1 < r; ++k) rows *= od[k];
  ParallelChunks(rows, threads, par, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row) {
      E* o = dst + row * lo;
      int64_t off = 0, u = row;
      bool inside = true;
      for (size_t k = r - 1; k-- > 0;) {
        const int64_t ok = u % od[k];
        u /= od[k];
        const int64_t s = PadSourceIndex(ok, pads[k], id[k], mode);
        inside &= s >= 0;
        off += s * is[k];
      }
      if (!inside) {
        std::fill(o, o + lo, value);
        continue;
      }
      const E* s = src + off;
      for (int64_t i = 0; i < mid_b; ++i) {
        const int64_t j = PadSourceIndex(i, pb, d, mode);
        o[i] = j >= 0 ? s[j] : value;
      }
      if (mid_e > mid_b) std::memcpy(o + mid_b, s + (mid_b - pb), sizeof(E) * (mid_e - mid_b));
      for (int64_t i = std::max(mid_e, mid_b); i < lo; ++i) {
        const int64_t j = PadSourceIndex(i, pb, d, mode);
        o[i] = j >= 0 ? s[j] : value;
      }
    }
  });
}

}  // namespace

Status TransposeCpu(const Tensor& in, const std::vector<int64_t>& perm, Tensor* out, int threads) {
  if (out->numel() == 0) return Status::Ok();
  Dims md;
  std::vector<int64_t> mp;
  SimplifyTranspose(in.dims(), perm, &md, &mp);
  if (md.size() <= 1) {
    std::memcpy(out->raw_data(), in.raw_data(), in.nbytes());
    return Status::Ok();
  }
  const bool par = Big(*out);
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    TransposeTyped<E>(static_cast<const E*>(in.raw_data()), static_cast<E*>(out->raw_data()), md, mp, threads, par);
    return Status::Ok();
  });
}

Status ConcatCpu(const std::vector<const Tensor*>& ins, int64_t axis, Tensor* out, int threads) {
  const size_t es = DTypeSize(out->dtype());
  int64_t outer = 1;
  for (int k = 0; k < axis; ++k) outer *= out->dim(k);
  std::vector<int64_t> chunk(ins.size()), offset(ins.size());
  int64_t row = 0;
  for (size_t i = 0; i < ins.size(); ++i) {
    int64_t c = static_cast<int64_t>(es);
    for (int k = static_cast<int>(axis); k < ins[i]->rank(); ++k) c *= ins[i]->dim(k);
    chunk[i] = c;
    offset[i] = row;
    row += c;
  }
  if (row * outer != static_cast<int64_t>(out->nbytes())) return Internal("Concat output size mismatch");
  char* dst = static_cast<char*>(out->raw_data());
  const int64_t units = outer * static_cast<int64_t>(ins.size());
  ParallelChunks(units, threads, Big(*out), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / static_cast<int64_t>(ins.size());
      const size_t i = static_cast<size_t>(u % static_cast<int64_t>(ins.size()));
      if (chunk[i] == 0) continue;
      std::memcpy(dst + o * row + offset[i], static_cast<const char*>(ins[i]->raw_data()) + o * chunk[i],
                  static_cast<size_t>(chunk[i]));
    }
  });
  return Status::Ok();
}

Status SplitCpu(const Tensor& in, int64_t axis, const std::vector<Tensor*>& outs, int threads) {
  const size_t es = DTypeSize(in.dtype());
  int64_t outer = 1;
  for (int k = 0; k < axis; ++k) outer *= in.dim(k);
  std::vector<int64_t> chunk(outs.size()), offset(outs.size());
  int64_t row = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    int64_t c = static_cast<int64_t>(es);
    for (int k = static_cast<int>(axis); k < outs[i]->rank(); ++k) c *= outs[i]->dim(k);
    chunk[i] = c;
    offset[i] = row;
    row += c;
  }
  if (row * outer != static_cast<int64_t>(in.nbytes())) return Internal("Split outputs do not cover the input");
  const char* src = static_cast<const char*>(in.raw_data());
  const int64_t units = outer * static_cast<int64_t>(outs.size());
  ParallelChunks(units, threads, Big(in), [&](int64_t b, int64_t e) {
    for (int64_t u = b; u < e; ++u) {
      const int64_t o = u / static_cast<int64_t>(outs.size());
      const size_t i = static_cast<size_t>(u % static_cast<int64_t>(outs.size()));
      if (chunk[i] == 0) continue;
      std::memcpy(static_cast<char*>(outs[i]->raw_data()) + o * chunk[i], src + o * row + offset[i],
                  static_cast<size_t>(chunk[i]));
    }
  });
  return Status::Ok();
}

Status SliceCpu(const Tensor& in, const SliceParams& p, Tensor* out, int threads) {
  if (p.len != out->dims())
    return Internal("slice output dims " + DimsToString(out->dims()) + " differ from " + DimsToString(p.len));
  if (out->numel() == 0) return Status::Ok();
  if (in.rank() == 0) {
    std::memcpy(out->raw_data(), in.raw_data(), in.nbytes());
    return Status::Ok();
  }
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    SliceTyped<E>(static_cast<const E*>(in.raw_data()), static_cast<E*>(out->raw_data()), in.dims(), p, threads,
                  Big(*out));
    return Status::Ok();
  });
}

Status GatherCpu(const Tensor& data, const Tensor& indices, int64_t axis, Tensor* out, int threads) {
  const int a = static_cast<int>(axis);
  const int64_t d = data.dim(a), n = indices.numel();
  WH_ASSIGN_OR_RETURN(std::vector<int64_t> idx, ResolveGatherIndices(indices, axis, d));
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < a; ++k) outer *= data.dim(k);
  for (int k = a + 1; k < data.rank(); ++k) inner *= data.dim(k);
  return DispatchByElementSize(DTypeSize(data.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    const E* src = static_cast<const E*>(data.raw_data());
    E* dst = static_cast<E*>(out->raw_data());
    ParallelChunks(outer * n, threads, Big(*out), [&](int64_t b, int64_t end) {
      for (int64_t u = b; u < end; ++u) {
        const int64_t o = u / std::max<int64_t>(n, 1), i = u % std::max<int64_t>(n, 1);
        const E* s = src + (o * d + idx[static_cast<size_t>(i)]) * inner;
        if (inner == 1) dst[u] = *s;
        else std::memcpy(dst + u * inner, s, sizeof(E) * static_cast<size_t>(inner));
      }
    });
    return Status::Ok();
  });
}

Status ExpandCpu(const Tensor& in, Tensor* out, int threads) {
  const int r = out->rank(), ir = in.rank();
  if (ir > r) return Internal("Expand output has a lower rank than its input");
  if (out->numel() == 0) return Status::Ok();
  if (r == 0) {
    std::memcpy(out->raw_data(), in.raw_data(), in.nbytes());
    return Status::Ok();
  }
  WH_ASSIGN_OR_RETURN(const std::vector<int64_t> bstride, ExpandStrides(in.dims(), out->dims()));
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    ExpandTyped<E>(static_cast<const E*>(in.raw_data()), static_cast<E*>(out->raw_data()), out->dims(), bstride,
                   threads, Big(*out));
    return Status::Ok();
  });
}

Status PadCpu(const Tensor& in, const std::vector<int64_t>& pads, PadMode mode, uint64_t value_bits, Tensor* out,
              int threads) {
  const size_t r = static_cast<size_t>(in.rank());
  if (pads.size() != 2 * r) return Internal("pads length does not match rank");
  for (size_t k = 0; k < r; ++k)
    if (in.dims()[k] + pads[k] + pads[k + r] != out->dims()[k]) return Internal("pad output dims mismatch");
  if (out->numel() == 0) return Status::Ok();
  if (r == 0) {
    std::memcpy(out->raw_data(), in.raw_data(), in.nbytes());
    return Status::Ok();
  }
  return DispatchByElementSize(DTypeSize(in.dtype()), [&](auto e) -> Status {
    using E = decltype(e);
    E value;
    std::memcpy(&value, &value_bits, sizeof(E));
    PadTyped<E>(static_cast<const E*>(in.raw_data()), static_cast<E*>(out->raw_data()), in.dims(), out->dims(), pads,
                mode, value, threads, Big(*out));
    return Status::Ok();
  });
}

namespace cpu {

void TransposeLast2(const float* src, int64_t batch, int64_t rows, int64_t cols, float* dst, int threads) {
  const int64_t n = batch * rows * cols;
  if (n == 0) return;
  if (rows == 1 || cols == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  TransposeTyped<uint32_t>(reinterpret_cast<const uint32_t*>(src), reinterpret_cast<uint32_t*>(dst),
                           Dims{batch, rows, cols}, {0, 2, 1}, threads,
                           n * static_cast<int64_t>(sizeof(float)) >= kParallelMinBytes);
}
const MovementFns kMovementFns{TransposeCpu, ConcatCpu, SplitCpu, SliceCpu, GatherCpu,
                               ExpandCpu,    PadCpu,    nullptr,  nullptr};
}  // namespace cpu

}  // namespace whittle
