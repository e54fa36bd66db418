#include "passes/quantize/weight_only.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/common/int4.h"
#include "passes/quantize/conv_weight_only.h"
#include "lib/ir/domain.h"
#include "lib/ir/format.h"
#include "passes/cost.h"
#include "passes/layer_inputs.h"
#include "passes/layer_selection.h"
#include "passes/linear_weight.h"
#include "passes/quantize/awq.h"
#include "passes/quantize/gptq.h"
#include "passes/quantize/opset_upgrade.h"
#include "runtime/rewrite/fuse_nbits.h"

namespace whittle {
namespace {

struct WeightOnlyConfig {
  std::string spec;
  int bits = 4;  // 4: --int4; 8: --int8 mode=weight-only
  int64_t block = 32;
  bool symmetric = false;
  std::string method = "rtn";   // rtn | gptq | awq
  bool clip = true;             // awq: the paper's weight clipping search
  std::string format = "qdq";   // qdq | matmulnbits (4 bits only)
  int64_t accuracy_level = 0;   // matmulnbits: the nodes' accuracy_level (4: int8 activations allowed)
  LayerSelection select;
  std::string pass() const { return bits == 4 ? "int4" : "int8"; }
  std::string flag() const { return bits == 4 ? "--int4" : "--int8 mode=weight-only"; }
};

// The layer's quantized weight as ONNX opset 21 stores it for DequantizeLinear(axis 0): [K, N]
// codes (uint4/uint8 with a zero point of that type, or int4/int8 without one when symmetric),
// scale [blocks, N].
struct QdqWeight {
  Tensor w, scale, zero;  // zero undefined when symmetric
};

// Writes code v (already shifted to the stored type's range) as element i.
void SetCode(uint8_t* p, int64_t i, int v, int bits) {
  if (bits == 4) {
    int4::Set4(p, i, v);
  } else {
    p[i] = static_cast<uint8_t>(v);  // int8 stores q's two's complement byte
  }
}

QdqWeight ToQdq(const quant::IntBlocks& q) {
  const int64_t K = q.k, N = q.n, nb = q.blocks();
  const int half = 1 << (q.bits - 1);
  const bool four = q.bits == 4;
  QdqWeight t;
  t.w = Tensor(q.symmetric ? (four ? DType::kInt4 : DType::kInt8) : (four ? DType::kUInt4 : DType::kUInt8), {K, N});
  auto* pw = static_cast<uint8_t*>(t.w.raw_data());
  for (int64_t c = 0; c < K; ++c)
    for (int64_t r = 0; r < N; ++r) {
      const int code = q.codes[static_cast<size_t>(r * K + c)];
      SetCode(pw, c * N + r, q.symmetric ? code - half : code, q.bits);  // signed types store q = code - 2^(bits-1)
    }
  t.scale = Tensor(DType::kFloat32, {nb, N});
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t r = 0; r < N; ++r) t.scale.data<float>()[j * N + r] = q.scale[static_cast<size_t>(r * nb + j)];
  if (!q.symmetric) {
    t.zero = Tensor(four ? DType::kUInt4 : DType::kUInt8, {nb, N});
    auto* pz = static_cast<uint8_t*>(t.zero.raw_data());
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t r = 0; r < N; ++r) SetCode(pz, j * N + r, q.zero[static_cast<size_t>(r * nb + j)], q.bits);
  }
  return t;
}

// The weight as the emitted graph computes with it: the blocks' values, over AWQ's input scale
// (inv_scale empty: none).
double RelativeError(const std::vector<float>& w, const quant::IntBlocks& q, const std::vector<float>& inv_scale) {
  double err = 0, energy = 0;
  for (int64_t r = 0; r < q.n; ++r)
    for (int64_t c = 0; c < q.k; ++c) {
      const double v = w[static_cast<size_t>(r * q.k + c)];
      const double d = v - q.Dequant(r, c) * (inv_scale.empty() ? 1.f : inv_scale[static_cast<size_t>(c)]);
      err += d * d;
      energy += v * v;
    }
  return energy > 0 ? std::sqrt(err / energy) : 0.0;
}

// One layer's result: the blocks, and AWQ's input multiplier (empty for rtn and gptq).
struct QuantizedLayer {
  quant::IntBlocks q;
  std::vector<float> inv_scale;
  std::string how = "rtn";
};

class WeightOnlyPass : public Pass {
 public:
  explicit WeightOnlyPass(WeightOnlyConfig c) : c_(std::move(c)) {}
  std::string name() const override { return c_.pass(); }

  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override {
    if (c_.bits == 8) {
      WH_RETURN_IF_ERROR(c_.select.Check(g, {"Gemm", "MatMul", "Conv"}));
    } else {
      WH_RETURN_IF_ERROR(c_.select.Check(g, {"Gemm", "MatMul"}));
    }
    PassReport rep;
    rep.pass = c_.pass();
    rep.config = c_.spec;
    // The layers without their weights: each float weight is copied out only while its layer is
    // quantized, so a gigabyte model is never held twice.
    const WeightMatcher match_only = [](const Graph& gr, int i, WeightMatch* m, std::string* why) {
      const bool ok = MatchGemmWeight(gr, i, m, why);
      std::vector<float>().swap(m->w);
      return ok;
    };
    const std::vector<WeightMatch> work = CollectWeightLayers(g, match_only, c_.select, &rep);
    // 8 bits with GPTQ: the Convs' input statistics on the model as given, before anything changes.
    std::vector<int> conv_layers;
    std::optional<ConvGrams> conv_grams;
    if (c_.bits == 8) {
      conv_layers = ConvWeightOnlyLayers(g, c_.select);
      if (c_.method == "gptq" && !conv_layers.empty()) {
        if (!ctx.calibration)
          return InvalidArgument(c_.flag() + " method=gptq needs --calibration-data: GPTQ weighs rounding errors by "
                                             "the layer inputs' statistics");
        auto cg = CollectConvGrams(g, conv_layers, *ctx.calibration, ctx);
        if (!cg.ok())
          return cg.status().WithContext(c_.flag() + ": running the calibration data '" +
                                         ctx.calibration->description + "'");
        conv_grams = std::move(cg).value();
      }
    }
    if (c_.format == "qdq" && !work.empty())
      WH_RETURN_IF_ERROR(quant::UpgradeOpset(g, 21, c_.flag(), "blocked int" + std::to_string(c_.bits) +
                                                                   " DequantizeLinear", &rep.notes));
    int64_t done = 0;
    auto quantize = [&](const WeightMatch& layer, const InputGram* ig) -> Status {
      const Node node = g.nodes()[static_cast<size_t>(layer.node)];  // a copy: the graph grows below
      ctx.Progress(c_.pass() + ": " + c_.method + " of " + node.name, done++, static_cast<int64_t>(work.size()));
      WeightMatch m;
      std::string why;
      if (!MatchGemmWeight(g, layer.node, &m, &why))
        return Internal(node.DebugName() + ": no longer matches its weight (" + why + ")");
      const QuantizedLayer ql = Quantize(m, ig);
      if (ql.how == "rtn" && c_.method != "rtn")
        rep.notes.push_back(node.name + ": " + (c_.method == "gptq" ? "GPTQ" : "AWQ") +
                            " had no usable input statistics; rounded to nearest instead");
      LayerReport lr;
      lr.node = node.name;
      lr.op_type = node.op_type;
      // The layer keeps its weights (params), in fewer bytes (detail); in the QDQ form the MatMul
      // itself reads no initializer any more, so NodeParams after would say 0.
      lr.params_before = lr.params_after = NodeParams(g, node);
      lr.macs_before = lr.macs_after = NodeMacs(g, node);
      WH_RETURN_IF_ERROR(Emit(g, m, node, ql));
      const int64_t nb = ql.q.blocks();
      const int64_t dense = m.n * m.k * 4, packed = (m.n * m.k * c_.bits + 7) / 8 + m.n * nb * (c_.symmetric ? 4 : 5);
      lr.action = c_.pass();
      lr.setting = c_.block;
      lr.detail = ql.how + ", blocks of " + std::to_string(c_.block) + (c_.symmetric ? ", symmetric" : ", zero points") +
                  ": " + std::to_string(dense) + " -> ~" + std::to_string(packed) + " bytes, weight error " +
                  Fmt("%.4f", RelativeError(m.w, ql.q, ql.inv_scale)) + " (relative)";
      rep.layers.push_back(lr);
      return Status::Ok();
    };
    if (c_.method == "rtn" || work.empty()) {
      for (const WeightMatch& layer : work) WH_RETURN_IF_ERROR(quantize(layer, nullptr));
    } else {
      // GPTQ/AWQ: the layers' input statistics in groups within a memory budget (one pass over the
      // calibration data per group), each group's layers quantized before the next is gathered.
      // Node indices stay valid while Emit appends to the graph (Reindex comes last).
      if (!ctx.calibration)
        return InvalidArgument(c_.flag() + " method=" + c_.method + " needs --calibration-data: " +
                               (c_.method == "gptq" ? "GPTQ weighs rounding errors by the layer inputs' statistics"
                                                    : "AWQ scales each weight column by its input channel's magnitude"));
      std::vector<int> nodes;
      std::set<int> covered;
      std::string why;
      for (const WeightMatch& m : work)
        if (LayerInputSupported(g, m.node, &why)) nodes.push_back(m.node);
      const std::string stage = c_.pass() + ": " + (c_.method == "gptq" ? "GPTQ" : "AWQ") + " input statistics";
      const Status st = ForEachInputGrams(g, nodes, *ctx.calibration, ctx, stage, GramBudgetBytes(g, ctx),
                                          [&](std::map<int, InputGram>& grams) -> Status {
                                            for (const WeightMatch& layer : work) {
                                              auto it = grams.find(layer.node);
                                              if (it == grams.end()) continue;
                                              covered.insert(layer.node);
                                              WH_RETURN_IF_ERROR(quantize(layer, &it->second));
                                              it->second.shared.reset();  // its matrix goes now
                                            }
                                            return Status::Ok();
                                          });
      if (!st.ok())
        return st.WithContext(c_.flag() + ": running the calibration data '" + ctx.calibration->description + "'");
      for (const WeightMatch& layer : work)
        if (!covered.count(layer.node)) WH_RETURN_IF_ERROR(quantize(layer, nullptr));
    }
    ctx.Progress(c_.pass() + ": quantized", done, static_cast<int64_t>(work.size()));
    if (c_.format == "matmulnbits" && !work.empty() && g.OpsetFor(kMicrosoftDomain) == 0)
      g.opset_imports[kMicrosoftDomain] = 1;
    if (c_.bits == 8) {
      if (c_.method == "awq" && !conv_layers.empty())
        rep.notes.push_back("method=awq applies to Gemm/MatMul; the Convs are rounded to nearest");
      WH_RETURN_IF_ERROR(QuantizeConvWeightsInt8(g, c_.select, &rep, conv_grams ? &*conv_grams : nullptr));
    }
    g.Reindex();
    WH_RETURN_IF_ERROR(g.Compact());
    return rep;
  }

 private:
  // The k x k block of a Gram matrix stored with its extra constant feature ((k+1)^2).
  static std::vector<double> GramOf(const InputGram& ig, int64_t k) {
    if (ig.features != k) return {};
    std::vector<double> h(static_cast<size_t>(k * k));
    for (int64_t i = 0; i < k; ++i)
      for (int64_t j = 0; j < k; ++j) h[static_cast<size_t>(i * k + j)] = ig.gram()[static_cast<size_t>(i * (k + 1) + j)];
    return h;
  }

  // The configured method where the layer's input statistics allow it, else round to nearest.
  QuantizedLayer Quantize(const WeightMatch& m, const InputGram* ig) const {
    QuantizedLayer ql;
    const std::vector<double> h = ig ? GramOf(*ig, m.k) : std::vector<double>();
    if (!h.empty() && c_.method == "gptq" &&
        quant::QuantizeGptq(m.w.data(), m.n, m.k, c_.block, c_.symmetric, h, &ql.q, c_.bits)) {
      ql.how = "gptq";
      return ql;
    }
    quant::AwqResult a;
    if (!h.empty() && c_.method == "awq" &&
        quant::QuantizeAwq(m.w.data(), m.n, m.k, c_.block, c_.symmetric, c_.bits, h, c_.clip, &a)) {
      ql.q = std::move(a.q);
      ql.inv_scale = std::move(a.inv_scale);
      ql.how = "awq alpha " + Fmt("%.2f", a.alpha) +
               (c_.clip ? ", " + std::to_string(a.clipped) + " of " + std::to_string(m.n * ql.q.blocks()) +
                              " blocks clipped"
                        : std::string()) +
               ", calibration output error " +
               (a.rtn_error > 0 ? Fmt("%.3f", a.error / a.rtn_error) + "x rounding's" : std::string("0"));
      return ql;
    }
    ql.q = quant::QuantizeRtn(m.w.data(), m.n, m.k, c_.block, c_.symmetric, c_.bits);
    return ql;
  }

  // Replaces the layer by MatMul(A, DequantizeLinear(codes)) [+ Add(bias)] or by MatMulNBits,
  // with AWQ's Mul(A, 1/s) in front when the layer has one.
  Status Emit(Graph& g, const WeightMatch& m, const Node& node, const QuantizedLayer& ql) const {
    QdqWeight t = ToQdq(ql.q);
    int a = node.inputs[0];
    if (!ql.inv_scale.empty()) {
      Tensor inv(DType::kFloat32, {m.k});
      std::copy(ql.inv_scale.begin(), ql.inv_scale.end(), inv.data<float>());
      const int sv = g.AddInitializer(g.UniqueName(node.name + "/awq_inv_scale"), std::move(inv));
      a = g.AddOp(node.name + "/awq_scale", "Mul", {a, sv});
    }
    Node nn;
    nn.name = node.name;
    nn.outputs = node.outputs;
    if (c_.format == "matmulnbits") {
      WH_ASSIGN_OR_RETURN(NBitsTensors nb, BlockedToNBits(t.w, t.scale, t.zero.defined() ? &t.zero : nullptr, c_.block));
      nn.op_type = "MatMulNBits";
      nn.domain = kMicrosoftDomain;
      nn.inputs = {a, g.AddInitializer(g.UniqueName(node.name + "/B_q4"), std::move(nb.b)),
                   g.AddInitializer(g.UniqueName(node.name + "/B_scales"), std::move(nb.scales))};
      nn.inputs.push_back(nb.zero_points.defined()
                              ? g.AddInitializer(g.UniqueName(node.name + "/B_zero_points"), std::move(nb.zero_points))
                              : -1);
      if (m.bias >= 0) {
        nn.inputs.push_back(-1);  // g_idx
        nn.inputs.push_back(WhittleBiasInput(g, m, node.name));
      }
      while (!nn.inputs.empty() && nn.inputs.back() < 0) nn.inputs.pop_back();
      nn.attrs.Set("K", Attribute::Int(m.k));
      nn.attrs.Set("N", Attribute::Int(m.n));
      nn.attrs.Set("bits", Attribute::Int(4));
      nn.attrs.Set("block_size", Attribute::Int(c_.block));
      if (c_.accuracy_level != 0) nn.attrs.Set("accuracy_level", Attribute::Int(c_.accuracy_level));
      g.nodes()[static_cast<size_t>(m.node)] = std::move(nn);
      return Status::Ok();
    }
    const std::string q = "/W_q" + std::to_string(c_.bits);
    std::vector<int> dq_in{g.AddInitializer(g.UniqueName(node.name + q), std::move(t.w)),
                           g.AddInitializer(g.UniqueName(node.name + "/W_scale"), std::move(t.scale))};
    if (t.zero.defined()) dq_in.push_back(g.AddInitializer(g.UniqueName(node.name + "/W_zero_point"), std::move(t.zero)));
    AttributeMap dq_attrs;
    dq_attrs.Set("axis", Attribute::Int(0));
    dq_attrs.Set("block_size", Attribute::Int(c_.block));
    const int w = g.AddOp(node.name + "/DequantizeLinear", "DequantizeLinear", std::move(dq_in), std::move(dq_attrs));
    nn.op_type = "MatMul";
    nn.inputs = {a, w};
    if (m.bias >= 0) {
      // MatMul into a fresh value, then the bias Add writes the layer's output.
      const int y = g.AddValue(g.UniqueName(node.name + "/MatMul_output"));
      nn.outputs = {y};
      Node add;
      add.name = node.name + "/bias";
      add.op_type = "Add";
      add.inputs = {y, m.bias};
      add.outputs = node.outputs;
      g.nodes()[static_cast<size_t>(m.node)] = std::move(nn);
      g.AddNode(std::move(add));
      return Status::Ok();
    }
    g.nodes()[static_cast<size_t>(m.node)] = std::move(nn);
    return Status::Ok();
  }

  WeightOnlyConfig c_;
};

}  // namespace

StatusOr<std::unique_ptr<Pass>> MakeWeightOnlyPass(PassOptions o, int bits) {
  WeightOnlyConfig c;
  c.spec = o.spec();
  c.bits = bits;
  if (bits == 8) {
    WH_RETURN_IF_ERROR(o.GetChoice("mode", "weight-only", {"weight-only"}).status());
  } else if (bits != 4) {
    return InvalidArgument("weight-only quantization to " + std::to_string(bits) + " bits: only 4 and 8 are supported");
  }
  WH_ASSIGN_OR_RETURN(c.block, o.GetInt("block", 32, 16, 256));
  if ((c.block & (c.block - 1)) != 0)
    return InvalidArgument(c.flag() + ": block=" + std::to_string(c.block) +
                           " must be a power of two (16, 32, 64, 128, 256)");
  WH_ASSIGN_OR_RETURN(int64_t sym, o.GetInt("symmetric", 0, 0, 1));
  c.symmetric = sym != 0;
  WH_ASSIGN_OR_RETURN(c.method, o.GetChoice("method", "rtn", {"rtn", "gptq", "awq"}));
  if (o.Has("clip") && c.method != "awq")
    return InvalidArgument(c.flag() + ": clip= applies to method=awq (its weight clipping search)");
  WH_ASSIGN_OR_RETURN(int64_t clip, o.GetInt("clip", 1, 0, 1));
  c.clip = clip != 0;
  if (bits == 4) {
    WH_ASSIGN_OR_RETURN(c.format, o.GetChoice("format", "qdq", {"qdq", "matmulnbits"}));
    if (o.Has("accuracy_level") && c.format != "matmulnbits")
      return InvalidArgument(c.flag() + ": accuracy_level= applies to format=matmulnbits (an attribute of "
                             "MatMulNBits; DequantizeLinear + MatMul always runs in float)");
    WH_ASSIGN_OR_RETURN(c.accuracy_level, o.GetInt("accuracy_level", 0, 0, 4));
  } else if (o.Has("format") || o.Has("accuracy_level")) {
    return InvalidArgument(c.flag() + ": format= and accuracy_level= apply to --int4; 8-bit weights are always "
                           "written as DequantizeLinear(block_size) + MatMul");
  }
  WH_ASSIGN_OR_RETURN(c.select, LayerSelection::Parse(o, LayerSelection::Skip::kAllowed));
  WH_RETURN_IF_ERROR(o.Finish());
  return std::unique_ptr<Pass>(new WeightOnlyPass(std::move(c)));
}

StatusOr<std::unique_ptr<Pass>> MakeInt4Pass(PassOptions o) { return MakeWeightOnlyPass(std::move(o), 4); }

const char* Int4PassHelp() {
  return "weight-only 4-bit quantization: the weight of each Gemm/MatMul with a constant 2-D weight becomes 4-bit "
         "codes in blocks along its inputs, one float scale (and a 4-bit zero point) per block; activations stay "
         "float. Written as standard ONNX, opset 21 DequantizeLinear(block_size) of an int4/uint4 initializer "
         "feeding MatMul (the model's opset is raised to 21), or as ONNX Runtime's com.microsoft MatMulNBits; "
         "Whittle runs either with a kernel that reads the 4-bit codes in place. Options (comma-separated "
         "key=value):\n"
         "  block=32         inputs per block: 16, 32, 64, 128 or 256\n"
         "  symmetric=0      1: codes -8..7 around zero, no zero points (int4); 0: uint4 codes with a zero point\n"
         "  method=rtn       rtn: round to nearest; gptq: GPTQ (Frantar et al. 2023), each column's rounding error\n"
         "                   spread over the rest by the inverse Hessian of the layer's inputs; awq: AWQ (Lin et\n"
         "                   al. 2024), each input channel's weights scaled up by s = magnitude^alpha before\n"
         "                   rounding (alpha searched per layer for the least output error on the calibration\n"
         "                   inputs) and the layer's input multiplied by 1/s (a Mul before the MatMul). gptq and\n"
         "                   awq need --calibration-data\n"
         "  clip=1           awq: also shrink each block's range where that lowers its output error (the paper's\n"
         "                   clipping search); 0: scaling only\n"
         "  format=qdq       qdq: DequantizeLinear + MatMul (opset 21); matmulnbits: com.microsoft MatMulNBits\n"
         "                   (what ONNX Runtime's matmul_nbits_quantizer and onnxruntime-genai write)\n"
         "  exclude=NAME,...          leave these nodes alone\n"
         "  layer=NAME:skip=1         leave one node alone\n";
}

}  // namespace whittle
