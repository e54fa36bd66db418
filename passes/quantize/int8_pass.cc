// The --int8 pass: preparation (opset 13, BatchNormalization folding), the plan, calibration,
// the choice of activation parameters, emission in the chosen format, and the report.
#include "lib/ir/format.h"
#include "passes/quantize/int8_pass.h"

#include <cstdio>
#include <set>

#include "passes/cost.h"
#include "passes/layer_inputs.h"
#include "passes/quantize/calibration.h"
#include "passes/quantize/equalize.h"
#include "passes/quantize/int8_options.h"
#include "passes/quantize/int8_plan.h"
#include "passes/quantize/opset_upgrade.h"
#include "passes/quantize/qdq_emit.h"
#include "passes/quantize/qoperator_emit.h"
#include "passes/quantize/weight_only.h"
#include "runtime/rewrite/fold_conv_bn.h"

namespace whittle {
namespace {

// Share of a tensor's calibration values outside its chosen range above which the pass says so.
constexpr double kClipWarn = 0.01;

using quant::ActParams;
using quant::Int8Config;
using quant::Int8Plan;
using quant::ParamTable;

std::string Describe(const ActParams& p) {
  return "[" + Fmt("%.4g", p.lo) + ", " + Fmt("%.4g", p.hi) + "] scale " + Fmt("%.4g", p.scale) + " zp " +
         std::to_string(p.zero_point);
}

int64_t InitBytes(const Graph& g, int id) {
  return id >= 0 && g.value(id).initializer ? static_cast<int64_t>(g.value(id).initializer->nbytes()) : 0;
}

// Activation parameters of every value the plan quantizes.
// Bias correction (Nagel et al., "Data-Free Quantization"; here with measured input means): a
// layer y = x·W + b quantized to W_q computes x·W_q + b, whose mean differs from the original's
// by E[x]·(W_q − W); the bias absorbs it. E[x] over the layer's input features (Conv: im2col
// patches, so padding counts as zeros) comes from passes/layer_inputs (its constant row).
StatusOr<std::set<int>> CorrectBiases(Graph& g, const Int8Plan& plan, const Dataset& data, const PassContext& ctx) {
  std::vector<int> nodes;
  std::string why;
  for (const quant::QuantLayer& l : plan.layers)
    if (l.bias >= 0 && LayerInputSupported(g, l.node, &why)) nodes.push_back(l.node);
  WH_ASSIGN_OR_RETURN(auto grams, CollectInputGrams(g, nodes, data, ctx, "int8: bias correction statistics"));
  std::set<int> corrected;
  for (const quant::QuantLayer& l : plan.layers) {
    auto it = grams.find(l.node);
    if (it == grams.end() || it->second.rows == 0) continue;
    const InputGram& ig = it->second;
    const int64_t F = ig.features;
    const Tensor& w = *g.value(l.weight).initializer;
    const quant::QuantizedWeight q =
        quant::QuantizeWeightSymmetric(w, l.per_channel ? l.weight_axis : -1, l.weight_qmax);
    const Node& n = g.nodes()[static_cast<size_t>(l.node)];
    const bool conv = n.op_type == "Conv";
    const int64_t m = conv ? w.dim(0) : (l.trans_b ? w.dim(0) : w.dim(1));
    const Tensor& b = *g.value(l.bias).initializer;
    if (b.numel() != m || (conv ? w.numel() / m : w.numel() / m) != F) continue;
    auto scale_of = [&](int64_t idx) {
      if (q.scales.size() == 1) return q.scales[0];
      int64_t c = idx;  // channel of flat weight index idx along weight_axis
      for (int64_t d = w.rank() - 1; d > l.weight_axis; --d) c /= w.dim(static_cast<int>(d));
      return q.scales[static_cast<size_t>(c % w.dim(static_cast<int>(l.weight_axis)))];
    };
    std::vector<double> shift(static_cast<size_t>(m), 0.0);
    for (int64_t idx = 0; idx < w.numel(); ++idx) {
      const double err = static_cast<double>(q.values.data<int8_t>()[idx]) * scale_of(idx) - w.data<float>()[idx];
      int64_t f, o;  // feature and output channel of this weight element
      if (conv) o = idx / F, f = idx % F;
      else if (l.trans_b) o = idx / F, f = idx % F;
      else f = idx / m, o = idx % m;
      const double mean = ig.gram()[static_cast<size_t>(F * (F + 1) + f)] / static_cast<double>(ig.rows);
      shift[static_cast<size_t>(o)] += mean * err;
    }
    Tensor nb(DType::kFloat32, b.dims());
    for (int64_t o = 0; o < m; ++o) nb.data<float>()[o] = static_cast<float>(b.data<float>()[o] - shift[static_cast<size_t>(o)]);
    g.value(l.bias).initializer = std::move(nb);
    corrected.insert(l.node);
  }
  return corrected;
}

StatusOr<ParamTable> ChooseParams(const Graph& g, const Int8Plan& plan, const Int8Config& c,
                                  const std::map<int, quant::TensorRange>& ranges) {
  ParamTable t;
  for (const auto& [v, p] : plan.existing) t.params[v] = p;
  for (int v : plan.calibrate) {
    const quant::TensorRange& r = ranges.at(v);
    t.params[v] = quant::ChooseActParams(r.lo, r.hi, c.activations);
  }
  // Inherited chains resolve in at most |inherit| rounds.
  for (size_t round = 0; round <= plan.inherit.size(); ++round) {
    bool missing = false;
    for (const auto& [out, in] : plan.inherit) {
      if (t.has(out)) continue;
      if (t.has(in)) {
        t.params[out] = t.at(in);
      } else {
        missing = true;
      }
    }
    if (!missing) return t;
  }
  return Internal("--int8: quantization parameters of '" + g.value(plan.inherit.begin()->first).name + "' could not be resolved");
}

class Int8Pass : public Pass {
 public:
  explicit Int8Pass(Int8Config c) : c_(std::move(c)) {}
  std::string name() const override { return "int8"; }

  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override {
    PassReport rep;
    rep.pass = "int8";
    rep.config = c_.spec;
    if (!c_.dynamic && !ctx.calibration)
      return InvalidArgument("--int8 mode=static needs --calibration-data (activation ranges are measured on it); "
                             "or use --int8 mode=dynamic");
    const int64_t bytes_before = ComputeCost(g).param_bytes;
    WH_RETURN_IF_ERROR(quant::UpgradeOpsetTo13(g, &rep.notes));
    if (!c_.dynamic && c_.op_types.count("Conv")) {
      // The runtime's own Conv+BatchNormalization fold, so the folded Conv quantizes as one layer.
      int folded = 0;
      WH_RETURN_IF_ERROR(FoldConvBatchNorm(g, &folded));
      if (folded) rep.notes.push_back(std::to_string(folded) + " BatchNormalization node(s) folded into the Conv before them");
    }
    if (c_.equalize) {
      const std::vector<std::string> pairs = quant::EqualizeChains(g);
      std::string list;
      for (size_t i = 0; i < pairs.size() && i < 6; ++i) list += (i ? ", " : "") + pairs[i];
      if (pairs.size() > 6) list += ", ...";
      rep.notes.push_back("cross-layer equalization of " + std::to_string(pairs.size()) + " layer pair(s)" +
                          (list.empty() ? "" : ": " + list) + " (the float model computes the same function)");
    }
    WH_ASSIGN_OR_RETURN(Int8Plan plan, quant::MakePlan(g, c_));

    ParamTable params;
    if (!c_.dynamic) {
      std::map<int, quant::TensorRange> ranges;
      // Ranges a caller kept from an earlier run on the same graph are not measured again.
      const std::string key = c_.calibration_text + (c_.calib.symmetric ? "|s|" : "|a|");
      std::vector<int> missing;
      for (int v : plan.calibrate) {
        const CalibrationCache* cache = ctx.calibration_cache.get();
        auto it = cache ? cache->ranges.find(key + g.value(v).name) : std::map<std::string, std::array<float, 5>>::const_iterator();
        if (!cache || it == cache->ranges.end()) {
          missing.push_back(v);
          continue;
        }
        const auto& a = it->second;
        ranges[v] = quant::TensorRange{a[0], a[1], a[2], a[3], a[4]};
      }
      if (!missing.empty()) {
        auto r = quant::CalibrateRanges(g, missing, *ctx.calibration, c_.calib, ctx);
        if (!r.ok()) return r.status().WithContext("--int8: calibrating on '" + ctx.calibration->description + "'");
        for (const auto& [v, t] : *r) {
          ranges[v] = t;
          if (ctx.calibration_cache)
            ctx.calibration_cache->ranges[key + g.value(v).name] = {t.min, t.max, t.lo, t.hi, static_cast<float>(t.clipped)};
        }
      }
      WH_ASSIGN_OR_RETURN(params, ChooseParams(g, plan, c_, ranges));
      rep.notes.push_back("calibration " + c_.calibration_text + " on " + std::to_string(ctx.calibration->size()) +
                          " samples (" + std::to_string(plan.calibrate.size()) + " activation tensors measured, " +
                          (c_.calib.method == quant::CalibMethod::kMinMax ? "1 pass: running min/max"
                                                                          : "2 passes: min/max, then 2048-bin histograms") +
                          ")");
      // A range that cuts off a visible share of a tensor's values is the usual cause of an
      // accuracy collapse: say which tensors, so the user can pick another method.
      for (const auto& [v, r] : ranges) {
        if (r.clipped < kClipWarn) continue;
        char buf[320];
        std::snprintf(buf, sizeof(buf),
                      "calibration %s clips %.1f%% of %s's values (range [%.4g, %.4g] of observed [%.4g, %.4g]); if "
                      "accuracy drops, try %s",
                      c_.calibration_text.c_str(), 100 * r.clipped, g.value(v).name.c_str(), r.lo, r.hi, r.min, r.max,
                      c_.calib.method == quant::CalibMethod::kMse ? "calibration=percentile:99.99 or minmax"
                                                                  : "calibration=mse or percentile:99.99");
        rep.notes.push_back(buf);
      }
    }

    std::set<int> corrected;
    if (c_.bias_correction) {
      if (!ctx.calibration)
        return InvalidArgument("--int8 bias-correction=1 needs --calibration-data (the layers' mean inputs are measured on it)");
      WH_ASSIGN_OR_RETURN(corrected, CorrectBiases(g, plan, *ctx.calibration, ctx));
      rep.notes.push_back("bias correction on " + std::to_string(corrected.size()) + " of " +
                          std::to_string(plan.layers.size()) +
                          " layer(s): each bias shifted by the mean output error that rounding its weights causes on "
                          "the calibration data (layers without a bias, or whose inputs are not measurable, unchanged)");
    }

    // Per-layer facts that the emission changes (node indices stay valid until the end).
    std::map<int, LayerReport> done;
    for (const quant::QuantLayer& l : plan.layers) {
      const Node& n = g.nodes()[static_cast<size_t>(l.node)];
      LayerReport r;
      r.node = l.name;
      r.op_type = l.op_type;
      r.action = "int8";
      r.params_before = r.params_after = NodeParams(g, n);
      r.macs_before = r.macs_after = NodeMacs(g, n);
      r.detail = std::string(corrected.count(l.node) ? "bias corrected; " : "") + "weight+bias bytes " +
                 std::to_string(InitBytes(g, l.weight) + InitBytes(g, l.bias));
      done[l.node] = std::move(r);
    }
    std::map<std::string, quant::EmittedWeight> weights;
    std::map<int, std::string> act_detail;
    for (const quant::QuantLayer& l : plan.layers) {
      if (c_.dynamic) continue;
      act_detail[l.node] = "; input " + g.value(l.input).name + " " + Describe(params.at(l.input)) + "; output " +
                           g.value(l.output).name + " " + Describe(params.at(l.output)) +
                           (l.act >= 0 ? " (" + g.nodes()[static_cast<size_t>(l.act)].op_type +
                                             " fused before the output QuantizeLinear)"
                                       : std::string());
    }
    for (int idx : plan.act_matmuls) {
      const Node& n = g.nodes()[static_cast<size_t>(idx)];
      LayerReport r;
      r.node = n.name;
      r.op_type = n.op_type;
      r.action = "int8";
      r.macs_before = r.macs_after = NodeMacs(g, n);
      r.detail = "activations x activations: input " + g.value(n.inputs[0]).name + " " + Describe(params.at(n.inputs[0])) +
                 ", input " + g.value(n.inputs[1]).name + " " + Describe(params.at(n.inputs[1]));
      done[idx] = std::move(r);
    }
    if (c_.dynamic) {
      WH_RETURN_IF_ERROR(quant::EmitDynamic(g, plan, &weights));
    } else if (c_.qoperator) {
      WH_RETURN_IF_ERROR(quant::EmitQOperator(g, plan, params, &weights));
    } else {
      WH_RETURN_IF_ERROR(quant::EmitQdq(g, plan, params, &weights));
    }
    for (const quant::QuantLayer& l : plan.layers) {
      LayerReport& r = done[l.node];
      const quant::EmittedWeight& w = weights.at(l.name);
      r.detail += " -> " + std::to_string(w.bytes) + "; weights int8 " +
                  (w.axis >= 0 ? "per-channel (" + std::to_string(w.scales.size()) + " scales)" : std::string("per-tensor")) +
                  (c_.dynamic ? "; activations quantized at run time (DynamicQuantizeLinear)" : act_detail[l.node]);
    }
    for (auto& [idx, r] : plan.skipped) done[idx] = std::move(r);
    for (auto& [idx, r] : done) rep.layers.push_back(std::move(r));
    WH_RETURN_IF_ERROR(g.Compact());
    const int64_t bytes_after = ComputeCost(g).param_bytes;
    rep.notes.push_back(std::string(c_.dynamic ? "mode dynamic" : "mode static") + ", format " +
                        (c_.dynamic ? "integer ops (DynamicQuantizeLinear + MatMulInteger)" : c_.qoperator ? "qoperator" : "qdq") +
                        ", weights " + (c_.per_channel ? "per-channel" : "per-tensor") + " symmetric int8" +
                        (c_.dynamic ? "" : std::string(", activations ") + (c_.activations == DType::kInt8 ? "s8 symmetric" : "u8 asymmetric")) +
                        "; " + std::to_string(plan.layers.size()) + " layer(s) quantized" +
                        (plan.act_matmuls.empty() ? std::string()
                                                  : " (and " + std::to_string(plan.act_matmuls.size()) +
                                                        " activation x activation MatMul(s))") +
                        ", " +
                        std::to_string(plan.skipped.size()) + " left float");
    rep.notes.push_back("initializer bytes " + std::to_string(bytes_before) + " -> " + std::to_string(bytes_after) +
                        (bytes_after > 0 ? " (" + Fmt("%.2f", static_cast<double>(bytes_before) / static_cast<double>(bytes_after)) + "x smaller)" : std::string()));
    return rep;
  }

 private:
  Int8Config c_;
};

}  // namespace

StatusOr<std::unique_ptr<Pass>> MakeInt8Pass(PassOptions options) {
  if (quant::IsWeightOnlyMode(options)) return MakeWeightOnlyPass(std::move(options), 8);
  WH_ASSIGN_OR_RETURN(Int8Config c, quant::ParseInt8Config(options));
  return std::unique_ptr<Pass>(std::make_unique<Int8Pass>(std::move(c)));
}

const char* Int8PassHelp() {
  return "--int8 [OPTIONS]  INT8 quantization of Conv, Gemm and MatMul with a constant weight, as standard ONNX.\n"
         "  Options (comma-separated key=value):\n"
         "  mode=static|dynamic|weight-only   static (default): activation ranges measured on --calibration-data\n"
         "                 (required); dynamic: weights int8 ahead of time, activations quantized at run time\n"
         "                 (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul -> Add; MatMul/Gemm only);\n"
         "                 weight-only: MatMul/Gemm weights to int8 in blocks along their inputs, one float scale\n"
         "                 (and a uint8 zero point) per block, activations float, written as opset 21\n"
         "                 DequantizeLinear(block_size) -> MatMul, and Conv weights to int8 per output channel\n"
         "                 (DequantizeLinear axis 0 -> Conv); it takes --int4's options instead of the ones\n"
         "                 below: block=32 (16..256, a power of two), symmetric=0|1, method=rtn|gptq|awq\n"
         "                 (gptq and awq need --calibration-data; gptq also chooses the Conv codes, from each\n"
         "                 group's im2col statistics, depthwise included), clip=1|0 (awq), exclude=,\n"
         "                 layer=NAME:skip=1;\n"
         "  calibration=minmax|percentile:P|entropy|mse   static: how activation ranges are chosen (default\n"
         "                 mse): observed min/max; each side's P-th percentile (e.g. percentile:99.99);\n"
         "                 entropy = TensorRT's KL-divergence threshold; mse = the threshold minimizing the\n"
         "                 expected quantization error. The last three use 2048-bin histograms (a 2nd pass);\n"
         "  per-channel=1|0       weights symmetric int8 per output channel (default 1) or per tensor;\n"
         "  equalize=0|1          1: cross-layer equalization of Conv/Gemm/MatMul -> [Relu] -> Conv/Gemm/MatMul\n"
         "                        chains before quantizing (per-channel ranges made equal; same float function;\n"
         "                        helps depthwise convs and per-channel=0) (default 0)\n"
         "  attention=0|1         1: also quantize activation x activation MatMuls (attention's Q*K^T and\n"
         "                        softmax*V): QDQ on both inputs, per tensor, as ONNX Runtime's quantizer\n"
         "                        does (mode=static, format=qdq) (default 0)\n"
         "  bias-correction=0|1   1: shift each bias by the mean output error that rounding its weights causes,\n"
         "                        measured on --calibration-data (default 0)\n"
         "  reduce-range=1|0      1 (default): weights in [-63, 63] (7 bits), so u8 x s8 pair sums fit in int16\n"
         "                 and ONNX Runtime's int8 kernels on x86 CPUs without VNNI do not saturate\n"
         "                 (measured: 97.8% top-1 agreement with Whittle on the CNN at 0, 100% at 1);\n"
         "                 0: full [-127, 127], for runtimes without that limit (Whittle's own kernels are exact);\n"
         "  activations=u8|s8     u8 asymmetric with a zero point (default) or s8 symmetric;\n"
         "  format=qdq|qoperator  qdq (default): QuantizeLinear/DequantizeLinear around float ops;\n"
         "                 qoperator: QLinearConv, QLinearMatMul, and MatMulInteger+Add+Cast+Mul for Gemm\n"
         "                 with a bias (QLinearMatMul has none); MaxPool/Flatten/Reshape run on uint8;\n"
         "  op-types=Conv,MatMul,Gemm   op types to quantize (default all three);\n"
         "  exclude=NAME,...      layers (node names) left float;\n"
         "  layer=NAME:skip=1|per-channel=0|1   per-layer overrides.\n"
         "A Relu, or a Clip with constant bounds (ReLU6), right after a layer is kept before the output\n"
         "QuantizeLinear (static mode), which then covers the activation's range only;\n"
         "BatchNormalization after a Conv is folded into it first; the opset is raised to 13 when lower.\n"
         "Layers already quantized (weight from a DequantizeLinear) are left alone.";
}

}  // namespace whittle
