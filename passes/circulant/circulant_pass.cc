#include "passes/circulant/circulant_pass.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/circulant_format.h"
#include "lib/ir/domain.h"
#include "lib/ir/format.h"
#include "passes/circulant/lowering.h"
#include "passes/cost.h"
#include "passes/layer_selection.h"
#include "passes/linear_weight.h"
#include "passes/lowering.h"

namespace whittle {
namespace {

struct CirculantConfig {
  std::string spec;
  int64_t block = 8;
  LayerSelection select;
  LayerOverrides layers;  // layer=NAME:block=B, layer=NAME:skip=1
};

// A matched layer: W [n, k] (output, input) read from the node's weight, its bias when it has one.
using Match = WeightMatch;  // conv: a 1x1 Conv on NCHW, the op runs between NHWC transposes

// A 2-D Conv that is a per-pixel matrix product: 1x1 kernel, stride 1, no padding, one group,
// constant float32 weight [Cout, Cin, 1, 1] and bias [Cout].
bool MatchConv1x1(const Graph& g, int index, Match* m, std::string* reason) {
  const Node& node = g.nodes()[static_cast<size_t>(index)];
  const Tensor* w = node.inputs.size() > 1 ? g.ConstInput(node, 1, DType::kFloat32) : nullptr;
  if (!w || w->rank() != 4) {
    *reason = "the weight is not a constant float32 4-D tensor";
    return false;
  }
  if (w->dim(2) != 1 || w->dim(3) != 1) return false;  // k x k convolutions are not this pass's
  // A 4-D weight makes the input 4-D (NCHW) by Conv's own rules.
  bool unit = node.attrs.GetInt("group", 1) == 1;
  for (int64_t v : node.attrs.GetInts("strides")) unit &= v == 1;
  for (int64_t v : node.attrs.GetInts("pads")) unit &= v == 0;
  const std::string pad = node.attrs.GetString("auto_pad", "NOTSET");
  unit &= pad == "NOTSET" || pad == "VALID" || pad.empty();
  if (!unit) {
    *reason = "1x1 Conv with groups, strides or padding";
    return false;
  }
  m->node = index;
  m->conv = true;
  m->n = w->dim(0);
  m->k = w->dim(1);
  if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
    const Tensor* c = g.ConstInput(node, 2, DType::kFloat32);
    if (!c || c->rank() != 1 || c->numel() != m->n) {
      *reason = "the bias is not a constant float32 [Cout]";
      return false;
    }
    m->bias = node.inputs[2];
  }
  m->w.assign(w->data<float>(), w->data<float>() + m->n * m->k);
  return true;
}

bool MatchLayer(const Graph& g, int index, Match* m, std::string* reason) {
  const Node& node = g.nodes()[static_cast<size_t>(index)];
  if (node.domain.empty() && node.op_type == "Conv") return MatchConv1x1(g, index, m, reason);
  return MatchGemmWeight(g, index, m, reason);
}

class CirculantPass : public Pass {
 public:
  explicit CirculantPass(CirculantConfig c) : c_(std::move(c)) {}
  std::string name() const override { return "circulant"; }

  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override {
    WH_RETURN_IF_ERROR(c_.select.Check(g, {"Gemm", "MatMul", "Conv"}));
    PassReport rep;
    rep.pass = "circulant";
    rep.config = c_.spec;
    rep.notes.push_back("MACs after count the FFT form: the frequency-domain products exactly plus B*ceil(log2 B) "
                        "per real FFT of length B (an estimate); the dense MACs are the MACs before");
    const std::vector<Match> work = CollectWeightLayers(g, MatchLayer, c_.select, &rep);
    int64_t done = 0;
    std::set<std::string> rewritten;
    for (const Match& m : work) {
      Node node = g.nodes()[static_cast<size_t>(m.node)];  // a copy: the graph grows below
      ctx.Progress("circulant: fitting " + node.name, done++, static_cast<int64_t>(work.size()));
      CirculantAttrs a;
      a.block = c_.layers.For(node.name, c_.block);
      a.n = m.n;
      a.k = m.k;
      const int64_t stored = a.p() * a.q() * a.block, dense = m.n * m.k;
      LayerReport lr;
      lr.node = node.name;
      lr.op_type = node.op_type;
      lr.params_before = NodeParams(g, node);
      lr.macs_before = lr.macs_after = NodeMacs(g, node);
      if (stored >= dense) {
        lr.action = "skipped";
        lr.reason = a.block == 1 ? "block=1 does not shrink the layer"
                                 : "does not shrink: " + std::to_string(m.n) + "x" + std::to_string(m.k) +
                                       " padded to blocks of " + std::to_string(a.block) + " stores " +
                                       std::to_string(stored) + " values, the weight " + std::to_string(dense);
        lr.params_after = lr.params_before;
        rep.layers.push_back(lr);
        continue;
      }
      WH_RETURN_IF_ERROR(CheckCirculantAttrs(a));
      Tensor blocks(DType::kFloat32, {a.p(), a.q(), a.block});
      FitCirculant(a, m.w.data(), blocks.data<float>());
      std::vector<float> fitted(m.w.size());
      ExpandCirculant(a, blocks.data<float>(), fitted.data());
      double energy = 0, err = 0;
      for (size_t e = 0; e < m.w.size(); ++e) {
        energy += static_cast<double>(m.w[e]) * m.w[e];
        err += (static_cast<double>(m.w[e]) - fitted[e]) * (static_cast<double>(m.w[e]) - fitted[e]);
      }
      Node nn;
      nn.name = node.name;
      nn.op_type = "BlockCirculantMatMul";
      nn.domain = kWhittleDomain;
      nn.inputs = {node.inputs[0], g.AddInitializer(g.UniqueName(node.name + "/circulant_blocks"), blocks)};
      if (m.bias >= 0) nn.inputs.push_back(WhittleBiasInput(g, m, node.name));
      nn.attrs.Set("block", Attribute::Int(a.block));
      nn.attrs.Set("out_features", Attribute::Int(m.n));
      nn.attrs.Set("in_features", Attribute::Int(m.k));
      nn.outputs = node.outputs;
      if (m.conv) {  // NCHW -> NHWC, the product over channels, back to NCHW
        AttributeMap to_nhwc, to_nchw;
        to_nhwc.Set("perm", Attribute::Ints({0, 2, 3, 1}));
        to_nchw.Set("perm", Attribute::Ints({0, 3, 1, 2}));
        Node t0, t1;
        t0.name = g.UniqueName(node.name + "/to_nhwc");
        t0.op_type = "Transpose";
        t0.attrs = to_nhwc;
        t0.inputs = {node.inputs[0]};
        t0.outputs = {g.AddValue(g.UniqueName(t0.name + "_out"))};
        nn.inputs[0] = t0.outputs[0];
        t1.name = g.UniqueName(node.name + "/to_nchw");
        t1.op_type = "Transpose";
        t1.attrs = to_nchw;
        nn.outputs = {g.AddValue(g.UniqueName(node.name + "/nhwc_out"))};
        t1.inputs = nn.outputs;
        t1.outputs = node.outputs;
        g.nodes()[static_cast<size_t>(m.node)] = std::move(nn);
        g.AddNode(std::move(t0));
        g.AddNode(std::move(t1));
      } else {
        g.nodes()[static_cast<size_t>(m.node)] = std::move(nn);
      }
      lr.action = "circulant";
      lr.setting = a.block;
      // Per sample: the dense MACs are rows x N x K, the FFT form rows x CirculantMacsPerRow
      // (what cost.cc's NodeMacs gives the new node once its output shape is inferred).
      lr.macs_after = lr.macs_before / dense * CirculantMacsPerRow(a);
      lr.detail = "block " + std::to_string(a.block) + ": " + std::to_string(a.p()) + "x" + std::to_string(a.q()) +
                  " circulant blocks, " + std::to_string(dense) + " -> " + std::to_string(stored) +
                  " weights, weight error " + Fmt("%.4f", energy > 0 ? std::sqrt(err / energy) : 0.0) +
                  " (relative); MACs/row " + std::to_string(dense) + " dense -> " +
                  std::to_string(CirculantMacsPerRow(a)) + " FFT form";
      rep.layers.push_back(lr);
      rewritten.insert(node.name);
    }
    ctx.Progress("circulant: fitting", done, static_cast<int64_t>(work.size()));
    // Params after: the block vectors and the bias. (A Conv's node now produces a new NHWC value.)
    WH_RETURN_IF_ERROR(FinishWhittleRewrite(g, !work.empty(), "circulant", &rep));
    return rep;
  }

 private:
  CirculantConfig c_;
};

}  // namespace

StatusOr<std::unique_ptr<Pass>> MakeCirculantPass(PassOptions o) {
  CirculantConfig c;
  c.spec = o.spec();
  WH_ASSIGN_OR_RETURN(c.block, o.GetInt("block", 8, 1, 4096));
  WH_ASSIGN_OR_RETURN(c.select, LayerSelection::Parse(o, LayerSelection::Skip::kAllowed));
  WH_ASSIGN_OR_RETURN(c.layers, ParseLayerOverrides(o, "block", 8, 1, 4096));
  WH_RETURN_IF_ERROR(o.Finish());
  return std::unique_ptr<Pass>(new CirculantPass(std::move(c)));
}

const char* CirculantPassHelp() {
  return "block-circulant layers (CirCNN): the weight W [N, K] of each Gemm/MatMul with a constant 2-D weight "
         "(and of each 1x1 Conv: stride 1, no padding, one group, between NHWC transposes) becomes a grid of B x B circulant blocks, each the least-squares fit of its block (the mean of each "
         "wrapped diagonal; N and K are zero-padded to multiples of B), storing N*K/B values; the node becomes "
         "ai.whittle BlockCirculantMatMul, which Whittle's runtime computes with FFTs (FFTW), O(B log B) per "
         "block instead of B^2. Options (comma-separated key=value):\n"
         "  block=8                  block size B (1..4096)\n"
         "  exclude=NAME,...         leave these nodes alone\n"
         "  layer=NAME:block=B | layer=NAME:skip=1   per-layer block size, or leave the layer alone\n"
         "  Layers it would not shrink (B=1, or padding eating the saving) are skipped and reported. MACs after\n"
         "  count the FFT form (frequency-domain products + an estimate for the FFTs).\n";
}

StatusOr<CirculantLayer> ReadCirculantLayer(const Graph& g, const Node& node) {
  CirculantLayer l;
  l.a = CirculantAttrsOf(node.attrs);
  l.blocks = g.ConstInput(node, 1);
  if (!l.blocks) return Unimplemented(node.DebugName() + ": lowering needs constant block vectors");
  l.has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  const Tensor* bias = l.has_bias ? g.ConstInput(node, 2) : nullptr;
  if (Status s = CheckCirculantTensors(l.a, *l.blocks, bias); !s.ok())
    return InvalidArgument(node.DebugName() + ": " + s.message());
  return l;
}

StatusOr<int> LowerCirculant(Graph& g) {
  return LowerEachNode(
      g, IsCirculantNode,
      [&](const Node& node) -> Status {
        WH_ASSIGN_OR_RETURN(const CirculantLayer layer, ReadCirculantLayer(g, node));
        const CirculantAttrs& a = layer.a;
        const bool has_bias = layer.has_bias;
        std::vector<float> w(static_cast<size_t>(a.n * a.k));
        ExpandCirculant(a, layer.blocks->data<float>(), w.data());
        Tensor wt(DType::kFloat32, {a.k, a.n});  // MatMul's B: W^T
        for (int64_t r = 0; r < a.n; ++r)
          for (int64_t c = 0; c < a.k; ++c) wt.data<float>()[c * a.n + r] = w[static_cast<size_t>(r * a.k + c)];
        auto add = [&](const std::string& op, std::vector<int> in) { return g.AddOp(node.name + "/" + op, op, std::move(in)); };
        const int y = add("MatMul", {node.inputs[0], g.AddInitializer(g.UniqueName(node.name + "/weight"), wt)});
        if (has_bias) add("Add", {y, node.inputs[2]});
        return Status::Ok();
      });
}

}  // namespace whittle
