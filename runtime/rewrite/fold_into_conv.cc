#include "runtime/rewrite/fold_into_conv.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/pads.h"
#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

// The pads of a Pad node that pads with zeros in constant mode, when they are known at load.
bool ZeroPadAmounts(const Graph& g, const Node& pad, std::vector<int64_t>* pads) {
  if (pad.attrs.GetString("mode", "constant") != "constant" || pad.outputs.size() != 1) return false;
  if (!ConstantPads(g, pad, pads)) return false;
  if (g.OpsetFor("") < 11) return pad.attrs.GetFloat("value", 0.f) == 0.f;
  const int cv = rewrite::InputAt(pad, 2);
  const Tensor* v = rewrite::ConstValue(g, cv);
  return cv < 0 || (v && v->dtype() == DType::kFloat32 && v->numel() == 1 && v->data<float>()[0] == 0.f);
}

}  // namespace

Status FoldPadIntoConv(Graph& g, int* count) {
  std::set<int> dead;
  for (size_t pi = 0; pi < g.nodes().size(); ++pi) {
    const Node& pad = g.nodes()[pi];
    if (!rewrite::IsOp(pad, "Pad") || pad.inputs.empty() || pad.inputs[0] < 0) continue;
    std::vector<int64_t> pads;
    if (!ZeroPadAmounts(g, pad, &pads) || pads.size() < 6) continue;
    const size_t rank = pads.size() / 2, spatial = rank - 2;
    // Nothing on N and C; nothing negative (a crop).
    bool ok = pads[0] == 0 && pads[1] == 0 && pads[rank] == 0 && pads[rank + 1] == 0;
    for (int64_t v : pads) ok &= v >= 0;
    const int y = pad.outputs[0];
    if (!ok || y < 0 || g.IsGraphOutput(y)) continue;
    const std::vector<int> readers = g.Consumers(y);
    if (readers.empty()) continue;
    for (int r : readers) {
      const Node& c = g.nodes()[static_cast<size_t>(r)];
      ok &= rewrite::FoldableConv(g, c) && c.inputs[0] == y && c.attrs.GetString("auto_pad", "NOTSET") == "NOTSET";
      for (size_t k = 1; k < c.inputs.size(); ++k) ok &= c.inputs[k] != y;
      const std::vector<int64_t> cp = c.attrs.GetInts("pads", std::vector<int64_t>(2 * spatial, 0));
      ok &= cp.size() == 2 * spatial;
    }
    if (!ok) continue;
    for (int r : readers) {
      Node& c = g.nodes()[static_cast<size_t>(r)];
      std::vector<int64_t> cp = c.attrs.GetInts("pads", std::vector<int64_t>(2 * spatial, 0));
      for (size_t d = 0; d < spatial; ++d) {
        cp[d] += pads[2 + d];
        cp[spatial + d] += pads[rank + 2 + d];
      }
      c.attrs.Set("pads", Attribute::Ints(cp));
      c.inputs[0] = pad.inputs[0];
    }
    dead.insert(static_cast<int>(pi));
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

Status FoldConvAffine(Graph& g, int* count) {
  for (bool changed = true; changed;) {
    changed = false;
    std::set<int> dead;
    for (size_t ci = 0; ci < g.nodes().size(); ++ci) {
      if (dead.count(static_cast<int>(ci)) || !rewrite::FoldableConv(g, g.nodes()[ci]) || g.nodes()[ci].outputs.empty()) continue;
      const int y = g.nodes()[ci].outputs[0];
      const int ai = rewrite::SoleConsumer(g, y);
      if (ai < 0 || dead.count(ai)) continue;
      const Node& a = g.nodes()[static_cast<size_t>(ai)];
      const bool mul = rewrite::IsOp(a, "Mul");
      if (!(mul || rewrite::IsOp(a, "Add")) || a.inputs.size() != 2 || a.outputs.size() != 1) continue;
      const Tensor* k = rewrite::ConstInput(g, a, a.inputs[0] == y ? 1 : 0);
      const Tensor& w = *rewrite::ConstInput(g, g.nodes()[ci], 1);
      const int64_t m = w.dim(0), spatial = w.rank() - 2;
      if (!k || k->dtype() != DType::kFloat32) continue;
      // One value, or M values along the channel axis with ones after it (and at most a leading 1).
      bool per_channel = k->numel() == m && k->rank() >= 1 && k->rank() <= spatial + 2;
      if (per_channel && k->numel() > 1) {
        const int axis = k->rank() - 1 - static_cast<int>(spatial);
        per_channel = axis >= 0 && k->dim(axis) == m;
        for (int d = 0; d < k->rank(); ++d) per_channel &= d == axis || k->dim(d) == 1;
      }
      const bool scalar = k->numel() == 1 && k->rank() <= spatial + 2;
      if (!per_channel && !scalar) continue;
      // The output shape stays the Conv's whatever its dims are (symbolic ones too): k's rank is at
      // most the Conv output's (the weight's rank) and its dims are 1 but for the channel's.
      Node& c = g.nodes()[ci];
      const Tensor* b = rewrite::ConstInput(g, c, 2);
      const int64_t per = w.numel() / m;
      auto kv = [&](int64_t ch) { return k->data<float>()[scalar ? 0 : ch]; };
      Tensor nb(DType::kFloat32, {m});
      for (int64_t ch = 0; ch < m; ++ch) {
        const float b0 = b ? b->data<float>()[ch] : 0.f;
        nb.data<float>()[ch] = mul ? b0 * kv(ch) : b0 + kv(ch);
      }
      if (mul) {
        Tensor nw = w.Clone();
        for (int64_t ch = 0; ch < m; ++ch) {
          float* wp = nw.data<float>() + ch * per;
          for (int64_t i = 0; i < per; ++i) wp[i] *= kv(ch);
        }
        const int wid = g.AddInitializer(g.UniqueName(g.value(c.inputs[1]).name + "_scaled"), std::move(nw));
        g.nodes()[ci].inputs[1] = wid;
      }
      const int bid = g.AddInitializer(g.UniqueName(g.nodes()[ci].name + "_bias_folded"), std::move(nb));
      Node& conv = g.nodes()[ci];
      conv.inputs.resize(std::max<size_t>(conv.inputs.size(), 3), -1);
      conv.inputs[2] = bid;
      conv.outputs[0] = g.nodes()[static_cast<size_t>(ai)].outputs[0];
      dead.insert(ai);
    }
    if (!dead.empty()) {
      g.RemoveNodes(dead);
      *count += static_cast<int>(dead.size());
      changed = true;
    }
  }
  return Status::Ok();
}

namespace {

// The kernel rows (or columns) [*first, *last] that some output position reads inside the input
// of size `in`; false when none does (every tap reads padding) or all do.
bool LiveTaps(int64_t in, int64_t k, int64_t stride, int64_t dil, int64_t pad_begin, int64_t pad_end, int64_t* first,
              int64_t* last) {
  const int64_t out = (in + pad_begin + pad_end - dil * (k - 1) - 1) / stride + 1;
  *first = k;
  *last = -1;
  for (int64_t i = 0; i < k; ++i) {
    // Tap i of output o reads at = o * stride + base, rising with o: the first o with at >= 0 is
    // the one to look at (a closed form: a hostile pad of 2^62 must not mean 2^62 steps).
    const int64_t base = i * dil - pad_begin;
    const int64_t o = base >= 0 ? 0 : (-base + stride - 1) / stride;
    int64_t at = 0;
    if (o < out && !__builtin_mul_overflow(o, stride, &at) && !__builtin_add_overflow(at, base, &at) && at < in) {
      *first = std::min(*first, i);
      *last = std::max(*last, i);
    }
  }
  return *last >= 0 && (*first > 0 || *last < k - 1);
}

}  // namespace

Status CropDeadConvTaps(Graph& g, int* count) {
  for (Node& c : g.nodes()) {
    if (!rewrite::FoldableConv(g, c) || c.attrs.GetString("auto_pad", "NOTSET") != "NOTSET") continue;
    const Tensor& w = *rewrite::ConstInput(g, c, 1);
    if (w.rank() != 4 || c.inputs[0] < 0) continue;
    const std::optional<SymShape>& xs = g.value(c.inputs[0]).shape;
    if (!xs || xs->size() != 4 || !(*xs)[2].known() || !(*xs)[3].known()) continue;
    const std::vector<int64_t> strides = c.attrs.GetInts("strides", {1, 1}), dil = c.attrs.GetInts("dilations", {1, 1});
    std::vector<int64_t> pads = c.attrs.GetInts("pads", {0, 0, 0, 0});
    if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) continue;
    int64_t first[2], last[2];
    bool crop = false, ok = true;
    for (int a = 0; a < 2; ++a) {
      const int64_t k = w.dim(2 + a);
      if (LiveTaps((*xs)[static_cast<size_t>(2 + a)].value, k, strides[static_cast<size_t>(a)], dil[static_cast<size_t>(a)],
                   pads[static_cast<size_t>(a)], pads[static_cast<size_t>(2 + a)], &first[a], &last[a])) {
        crop = true;
      } else if (last[a] < 0) {
        ok = false;  // no live tap at all: the output is the bias; left as it is
      } else {
        first[a] = 0;
        last[a] = k - 1;
      }
      // The same output size with the kernel cut to [first, last]: the pads shrink by the cut taps.
      const int64_t pb = pads[static_cast<size_t>(a)] - first[a] * dil[static_cast<size_t>(a)];
      const int64_t pe = pads[static_cast<size_t>(2 + a)] - (k - 1 - last[a]) * dil[static_cast<size_t>(a)];
      ok &= pb >= 0 && pe >= 0;
      pads[static_cast<size_t>(a)] = pb;
      pads[static_cast<size_t>(2 + a)] = pe;
    }
    if (!crop || !ok) continue;
    const int64_t M = w.dim(0), C = w.dim(1), kh = last[0] - first[0] + 1, kw = last[1] - first[1] + 1;
    Tensor cut(DType::kFloat32, {M, C, kh, kw});
    const float* src = w.data<float>();
    float* dst = cut.data<float>();
    for (int64_t mc = 0; mc < M * C; ++mc)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          dst[(mc * kh + i) * kw + j] = src[(mc * w.dim(2) + first[0] + i) * w.dim(3) + first[1] + j];
    c.inputs[1] = g.AddInitializer(g.UniqueName(g.value(c.inputs[1]).name + "_live_taps"), std::move(cut));
    c.attrs.Set("pads", Attribute::Ints(pads));
    c.attrs.Set("kernel_shape", Attribute::Ints({kh, kw}));
    ++*count;
  }
  return Status::Ok();
}

}  // namespace whittle
