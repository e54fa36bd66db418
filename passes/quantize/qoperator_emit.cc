#include "passes/quantize/qoperator_emit.h"

#include <algorithm>
#include <array>
#include <optional>

#include "runtime/rewrite/match.h"

namespace whittle::quant {
namespace {

constexpr int64_t kOnnxFloat = 1;  // TensorProto.FLOAT, for Cast's `to`


// Whether quantizing to y saturates exactly as the fused activation act clamps: Relu when y's
// zero point is the lowest level; Clip(lo, hi) when Q(lo) and Q(hi) are the extreme levels (a
// ReLU6 calibrated on its own output). Then the activation needs no node.
bool SaturationIsTheActivation(const Graph& g, const Node& act, const ActParams& y) {
  int32_t qmin, qmax;
  QRange(y.dtype, &qmin, &qmax);
  if (act.op_type == "Relu") return y.zero_point == qmin;
  const std::optional<rewrite::ClipRange> r = rewrite::ConstClipRange(g, act);
  return r && QuantizeValue(r->min, y) == qmin && QuantizeValue(r->max, y) == qmax;
}

// The int32 bias and its float per-channel scale, for a layer whose input has scale a_scale.
int BiasInit(Graph& g, const QuantLayer& l, float a_scale, const EmittedWeight& w, int64_t* bytes) {
  const Value& bv = g.value(l.bias);
  const std::string name = bv.name;
  Tensor bq = QuantizeBias(*bv.initializer, a_scale, w.scales);
  *bytes += static_cast<int64_t>(bq.nbytes());
  return NewInit(g, name + "_quantized", std::move(bq));
}

int ScaleVector(Graph& g, const std::string& name, const std::vector<float>& s, bool per_channel) {
  return NewInit(g, name, per_channel ? Tensor::FromVector<float>({static_cast<int64_t>(s.size())}, s)
                                      : Tensor::Scalar<float>(s[0]));
}

class QOperatorEmitter {
 public:
  QOperatorEmitter(Graph& g, const Int8Plan& plan, const ParamTable& params) : g_(g), plan_(plan), params_(params) {}

  Status Run(std::map<std::string, EmittedWeight>* weights) {
    WH_ASSIGN_OR_RETURN(std::vector<int> order, g_.TopologicalOrder());
    std::map<int, const QuantLayer*> layer_at;
    for (const QuantLayer& l : plan_.layers) layer_at[l.node] = &l;
    std::set<int> passthrough(plan_.passthrough.begin(), plan_.passthrough.end());
    for (const auto& [v, p] : plan_.existing) {
      (void)p;
      qv_[v] = g_.nodes()[static_cast<size_t>(g_.value(v).producer)].inputs[0];
    }
    for (int idx : order) {
      auto it = layer_at.find(idx);
      if (it != layer_at.end()) {
        (*weights)[it->second->name] = EmitLayer(*it->second);
      } else if (passthrough.count(idx)) {
        EmitPassthrough(idx);
      }
    }
    // Float readers of values now produced in quantized form get a DequantizeLinear.
    for (int v : produced_) {
      bool float_reader = g_.IsGraphOutput(v);
      for (int c : g_.Consumers(v)) float_reader |= !replaced_.count(c);
      if (!float_reader) continue;
      const ActParams& p = params_.at(v);
      const std::string name = g_.value(v).name;
      Emit(g_, "DequantizeLinear", name + "_DequantizeLinear", {qv_.at(v), ScaleInit(g_, name, p.scale), ZeroPointInit(g_, name, p)},
           {v});
    }
    g_.RemoveNodes(replaced_);
    return Status::Ok();
  }

 private:
  // The quantized form of float value v: the one an emitted node produced, or a new
  // QuantizeLinear at the start of a quantized region.
  int Quantized(int v) {
    auto it = qv_.find(v);
    if (it != qv_.end()) return it->second;
    const ActParams& p = params_.at(v);
    const std::string name = g_.value(v).name;
    const int q = NewValue(g_, name + "_quantized", p.dtype);
    Emit(g_, "QuantizeLinear", name + "_QuantizeLinear", {v, ScaleInit(g_, name, p.scale), ZeroPointInit(g_, name, p)}, {q});
    qv_[v] = q;
    return q;
  }

  EmittedWeight EmitLayer(const QuantLayer& l) {
    const Node node = g_.nodes()[static_cast<size_t>(l.node)];
    const ActParams& a = params_.at(l.input);
    const ActParams& y = params_.at(l.output);
    const int a_q = Quantized(l.input);
    const std::string an = g_.value(l.input).name, yn = g_.value(l.output).name;
    const int a_s = ScaleInit(g_, an, a.scale), a_zp = ZeroPointInit(g_, an, a);
    const int y_s = ScaleInit(g_, yn, y.scale), y_zp = ZeroPointInit(g_, yn, y);
    const bool float_act = l.act >= 0 && !SaturationIsTheActivation(g_, g_.nodes()[static_cast<size_t>(l.act)], y);
    const int out_q = NewValue(g_, yn + "_quantized", y.dtype);
    const int layer_q = float_act ? NewValue(g_, yn + "_preact_quantized", y.dtype) : out_q;
    const bool conv = l.op_type == "Conv";
    EmittedWeight w = EmitWeight(g_, l, /*as_kn=*/!conv);
    if (conv) {
      std::vector<int> in = {a_q, a_s, a_zp, w.values, w.scale, w.zero_point, y_s, y_zp};
      if (l.bias >= 0) in.push_back(BiasInit(g_, l, a.scale, w, &w.bytes));
      AttributeMap attrs = node.attrs;
      Emit(g_, "QLinearConv", node.name + "_quant", in, {layer_q}, attrs);
    } else if (l.bias < 0) {
      Emit(g_, "QLinearMatMul", node.name + "_quant", {a_q, a_s, a_zp, w.values, w.scale, w.zero_point, y_s, y_zp}, {layer_q});
    } else {
      // QLinearMatMul has no bias: accumulate in int32, add the int32 bias, rescale in float.
      const int acc = NewValue(g_, node.name + "_acc", DType::kInt32);
      const int biased = NewValue(g_, node.name + "_acc_bias", DType::kInt32);
      const int accf = NewValue(g_, node.name + "_acc_float", DType::kFloat32);
      const int yf = NewValue(g_, yn + "_float", DType::kFloat32);
      const int bias = BiasInit(g_, l, a.scale, w, &w.bytes);
      const int s = ScaleVector(g_, node.name + "_output_scale", BiasScales(a.scale, w.scales), w.axis >= 0);
      Emit(g_, "MatMulInteger", node.name + "_MatMulInteger", {a_q, w.values, a_zp, w.zero_point}, {acc});
      Emit(g_, "Add", node.name + "_bias_add", {acc, bias}, {biased});
      AttributeMap cast;
      cast.Set("to", Attribute::Int(kOnnxFloat));
      Emit(g_, "Cast", node.name + "_cast", {biased}, {accf}, cast);
      int pre_q = yf;
      Emit(g_, "Mul", node.name + "_rescale", {accf, s}, {yf});
      if (l.act >= 0) {
        pre_q = NewValue(g_, yn + "_act_float", DType::kFloat32);
        EmitActivation(l, yf, pre_q);
      }
      Emit(g_, "QuantizeLinear", yn + "_QuantizeLinear", {pre_q, y_s, y_zp}, {out_q});
    }
    if (float_act && (conv || l.bias < 0)) {
      // Where saturation does not do it (a zero point inside the range), the activation runs
      // on the dequantized values.
      const int f = NewValue(g_, yn + "_preact", DType::kFloat32);
      const int r = NewValue(g_, yn + "_act", DType::kFloat32);
      Emit(g_, "DequantizeLinear", yn + "_preact_DequantizeLinear", {layer_q, y_s, y_zp}, {f});
      EmitActivation(l, f, r);
      Emit(g_, "QuantizeLinear", yn + "_QuantizeLinear", {r, y_s, y_zp}, {out_q});
    }
    replaced_.insert(l.node);
    if (l.act >= 0) replaced_.insert(l.act);
    qv_[l.output] = out_q;
    produced_.push_back(l.output);
    return w;
  }

  // A copy of the layer's fused activation (Relu, or Clip with its bound inputs) from x to y.
  void EmitActivation(const QuantLayer& l, int x, int y) {
    const Node a = g_.nodes()[static_cast<size_t>(l.act)];
    std::vector<int> in = a.inputs;
    in[0] = x;
    Emit(g_, a.op_type, a.name + "_float", in, {y}, a.attrs);
  }

  void EmitPassthrough(int idx) {
    Node n = g_.nodes()[static_cast<size_t>(idx)];
    const int out = n.outputs[0];
    const int q = NewValue(g_, g_.value(out).name + "_quantized", params_.at(out).dtype);
    n.inputs[0] = Quantized(n.inputs[0]);
    n.outputs = {q};
    n.name += "_quant";
    g_.AddNode(std::move(n));
    replaced_.insert(idx);
    qv_[out] = q;
    produced_.push_back(out);
  }

  Graph& g_;
  const Int8Plan& plan_;
  const ParamTable& params_;
  std::map<int, int> qv_;     // float value -> its quantized value
  std::vector<int> produced_; // float values whose producer was replaced by a quantized one
  std::set<int> replaced_;
};

}  // namespace

Status EmitQOperator(Graph& g, const Int8Plan& plan, const ParamTable& params,
                     std::map<std::string, EmittedWeight>* weights) {
  QOperatorEmitter e(g, plan, params);
  return e.Run(weights);
}

Status EmitDynamic(Graph& g, const Int8Plan& plan, std::map<std::string, EmittedWeight>* weights) {
  std::map<int, std::array<int, 3>> dql;  // float input -> (uint8, scale, zero point)
  std::set<int> replaced;
  for (const QuantLayer& l : plan.layers) {
    const Node node = g.nodes()[static_cast<size_t>(l.node)];
    auto it = dql.find(l.input);
    if (it == dql.end()) {
      const std::string an = g.value(l.input).name;
      std::array<int, 3> v = {NewValue(g, an + "_quantized", DType::kUInt8), NewValue(g, an + "_scale", DType::kFloat32),
                              NewValue(g, an + "_zero_point", DType::kUInt8)};
      Emit(g, "DynamicQuantizeLinear", an + "_DynamicQuantizeLinear", {l.input}, {v[0], v[1], v[2]});
      it = dql.emplace(l.input, v).first;
    }
    const auto [a_q, a_s, a_zp] = it->second;
    EmittedWeight w = EmitWeight(g, l, /*as_kn=*/true);
    const std::string nn = node.name;
    const int acc = NewValue(g, nn + "_acc", DType::kInt32);
    const int accf = NewValue(g, nn + "_acc_float", DType::kFloat32);
    const int s = NewValue(g, nn + "_output_scale", DType::kFloat32);
    const int out = node.outputs[0];
    const int y = l.bias >= 0 ? NewValue(g, nn + "_no_bias", DType::kFloat32) : out;
    Emit(g, "MatMulInteger", nn + "_MatMulInteger", {a_q, w.values, a_zp, w.zero_point}, {acc});
    AttributeMap cast;
    cast.Set("to", Attribute::Int(kOnnxFloat));
    Emit(g, "Cast", nn + "_cast", {acc}, {accf}, cast);
    Emit(g, "Mul", nn + "_scale_product", {a_s, w.scale}, {s});
    Emit(g, "Mul", nn + "_rescale", {accf, s}, {y});
    if (l.bias >= 0) {
      w.bytes += static_cast<int64_t>(g.value(l.bias).initializer->nbytes());
      Emit(g, "Add", nn + "_bias_add", {y, l.bias}, {out});
    }
    replaced.insert(l.node);
    (*weights)[l.name] = w;
  }
  g.RemoveNodes(replaced);
  return Status::Ok();
}

}  // namespace whittle::quant
