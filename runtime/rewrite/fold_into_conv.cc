#include "runtime/rewrite/fold_into_conv.h"

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
      // The output shape must stay the Conv's (no broadcast to a larger rank).
      const Value& yv = g.value(y);
      const Value& ov = g.value(a.outputs[0]);
      if (!yv.shape || !ov.shape || *yv.shape != *ov.shape) continue;
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

}  // namespace whittle
