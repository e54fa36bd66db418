#include "passes/cluster/cluster_pass.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "lib/ir/codebook_format.h"
#include "lib/ir/domain.h"
#include "lib/ir/format.h"
#include "passes/cluster/kmeans.h"
#include "passes/cost.h"
#include "passes/layer_selection.h"
#include "passes/linear_weight.h"
#include "passes/lowering.h"

namespace whittle {
namespace {

struct ClusterConfig {
  std::string spec;
  int64_t k = 16;
  int64_t iterations = 100;
  LayerSelection select;
  LayerOverrides layers;  // layer=NAME:k=K, layer=NAME:skip=1
};

using Match = WeightMatch;

class ClusterPass : public Pass {
 public:
  explicit ClusterPass(ClusterConfig c) : c_(std::move(c)) {}
  std::string name() const override { return "cluster"; }

  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override {
    WH_RETURN_IF_ERROR(c_.select.Check(g, {"Gemm", "MatMul"}));
    PassReport rep;
    rep.pass = "cluster";
    rep.config = c_.spec;
    const std::vector<Match> work = CollectWeightLayers(g, MatchGemmWeight, c_.select, &rep);
    int64_t done = 0;
    for (const Match& m : work) {
      Node node = g.nodes()[static_cast<size_t>(m.node)];  // a copy: the graph grows below
      ctx.Progress("cluster: k-means of " + node.name, done++, static_cast<int64_t>(work.size()));
      const int64_t k = c_.layers.For(node.name, c_.k);
      const int64_t bits = k <= 16 ? 4 : 8;
      const int64_t count = m.n * m.k;
      const int64_t dense_bytes = count * 4, packed_bytes = PackedIndexBytes(count, bits) + k * 4;
      LayerReport lr;
      lr.node = node.name;
      lr.op_type = node.op_type;
      lr.params_before = NodeParams(g, node);
      lr.macs_before = lr.macs_after = NodeMacs(g, node);
      if (packed_bytes >= dense_bytes) {
        lr.action = "skipped";
        lr.reason = "too small: a " + std::to_string(k) + "-entry codebook and " + std::to_string(bits) +
                    "-bit indices take " + std::to_string(packed_bytes) + " bytes, the weight " + std::to_string(dense_bytes);
        lr.params_after = lr.params_before;
        rep.layers.push_back(lr);
        continue;
      }
      const KMeans1D km = RunKMeans1D(m.w.data(), count, static_cast<int>(k), ctx.seed ^ static_cast<uint64_t>(m.node),
                                      static_cast<int>(c_.iterations));
      double energy = 0;
      for (float v : m.w) energy += static_cast<double>(v) * v;
      Tensor cb = Tensor::FromVector<float>({static_cast<int64_t>(km.centroids.size())}, km.centroids);
      Tensor idx(DType::kUInt8, {PackedIndexBytes(count, bits)});
      uint8_t* p = idx.data<uint8_t>();
      std::fill(p, p + idx.numel(), uint8_t{0});
      for (int64_t e = 0; e < count; ++e) {
        const uint8_t a = km.assign[static_cast<size_t>(e)];
        if (bits == 8) p[e] = a;
        else p[e >> 1] = static_cast<uint8_t>(p[e >> 1] | (a << ((e & 1) * 4)));
      }
      Node nn;
      nn.name = node.name;
      nn.op_type = "CodebookMatMul";
      nn.domain = kWhittleDomain;
      nn.inputs = {node.inputs[0], g.AddInitializer(g.UniqueName(node.name + "/codebook"), cb),
                   g.AddInitializer(g.UniqueName(node.name + "/codebook_indices"), idx)};
      if (m.bias >= 0) nn.inputs.push_back(WhittleBiasInput(g, m, node.name));
      nn.attrs.Set("bits", Attribute::Int(bits));
      nn.attrs.Set("out_features", Attribute::Int(m.n));
      nn.attrs.Set("in_features", Attribute::Int(m.k));
      nn.outputs = node.outputs;
      g.nodes()[static_cast<size_t>(m.node)] = std::move(nn);
      lr.action = "cluster";
      lr.setting = static_cast<int64_t>(km.centroids.size());
      lr.detail = std::to_string(km.centroids.size()) + " shared values, " + std::to_string(bits) + "-bit indices: " +
                  std::to_string(dense_bytes) + " -> " + std::to_string(packed_bytes) + " bytes, weight error " +
                  Fmt("%.4f", energy > 0 ? std::sqrt(km.sse / energy) : 0.0) + " (relative)";
      rep.layers.push_back(lr);
    }
    ctx.Progress("cluster: k-means", done, static_cast<int64_t>(work.size()));
    // The params a layer reports after: its weights (each an index now), codebook and bias.
    WH_RETURN_IF_ERROR(FinishWhittleRewrite(g, !work.empty(), "cluster", &rep));
    return rep;
  }

 private:
  ClusterConfig c_;
};

}  // namespace

StatusOr<std::unique_ptr<Pass>> MakeClusterPass(PassOptions o) {
  ClusterConfig c;
  c.spec = o.spec();
  WH_ASSIGN_OR_RETURN(c.k, o.GetInt("k", 16, 2, 256));
  WH_ASSIGN_OR_RETURN(c.iterations, o.GetInt("iterations", 100, 1, 10000));
  WH_ASSIGN_OR_RETURN(c.select, LayerSelection::Parse(o, LayerSelection::Skip::kAllowed));
  WH_ASSIGN_OR_RETURN(c.layers, ParseLayerOverrides(o, "k", 16, 2, 256));
  WH_RETURN_IF_ERROR(o.Finish());
  return std::unique_ptr<Pass>(new ClusterPass(std::move(c)));
}

const char* ClusterPassHelp() {
  return "weight sharing: the weight of each Gemm/MatMul with a constant 2-D weight is clustered by 1-D "
         "k-means (k-means++ seeding with --seed, deterministic) into a K-entry float codebook plus one index per "
         "weight, packed 4-bit for K <= 16 and 8-bit up to 256; the node becomes ai.whittle CodebookMatMul, which "
         "Whittle's runtime multiplies by without expanding the matrix (--portable lowers it to Gather + MatMul "
         "for other runtimes). Options (comma-separated key=value):\n"
         "  k=16           codebook entries per layer (2..256)\n"
         "  iterations=100 Lloyd iterations at most (stops when the clusters stop changing)\n"
         "  exclude=NAME,...         leave these nodes alone\n"
         "  layer=NAME:k=K | layer=NAME:skip=1   per-layer codebook size, or leave the layer alone\n"
         "  Layers too small to shrink (codebook + indices >= the float weight) are skipped and reported.\n";
}

StatusOr<int> LowerCodebooks(Graph& g) {
  return LowerEachNode(
      g, [](const Node& node) { return node.domain == kWhittleDomain && node.op_type == "CodebookMatMul"; },
      [&](const Node& node) -> Status {
        const CodebookAttrs a = CodebookAttrsOf(node.attrs);
        const Tensor* cb = g.ConstInput(node, 1);
        const Tensor* packed = g.ConstInput(node, 2);
        if (!cb || !packed) return Unimplemented(node.DebugName() + ": lowering needs a constant codebook and indices");
        const Tensor* bias = node.inputs.size() > 3 && node.inputs[3] >= 0 ? g.ConstInput(node, 3) : nullptr;
        WH_RETURN_IF_ERROR(CheckCodebookTensors(a, *cb, *packed, bias, true));
        // One uint8 index per weight, laid out [K, N] so that Gather(codebook, idx) is MatMul's B.
        Tensor idx(DType::kUInt8, {a.k, a.n});
        for (int64_t o = 0; o < a.n; ++o)
          for (int64_t i = 0; i < a.k; ++i)
            idx.data<uint8_t>()[i * a.n + o] = static_cast<uint8_t>(CodebookIndexAt(packed->data<uint8_t>(), o * a.k + i, a.bits));
        auto add = [&](const std::string& op, std::vector<int> in, AttributeMap at = {}) {
          return g.AddOp(node.name + "/" + op, op, std::move(in), std::move(at));
        };
        AttributeMap to;
        to.Set("to", Attribute::Int(static_cast<int64_t>(6)));  // INT32: Gather's indices type
        const int idx32 = add("Cast", {g.AddInitializer(g.UniqueName(node.name + "/indices"), idx)}, to);
        const int w = add("Gather", {node.inputs[1], idx32});
        const int y = add("MatMul", {node.inputs[0], w});
        if (node.inputs.size() > 3 && node.inputs[3] >= 0) add("Add", {y, node.inputs[3]});
        return Status::Ok();
      });
}

}  // namespace whittle
