#include "passes/quantize/qdq_emit.h"

namespace whittle::quant {
namespace {

// Q -> DQ on value v. A graph output keeps its name on the dequantized value (the producer
// writes a new "<name>_float"); otherwise the consumers are rewired to the new "<name>_dq".
void InsertQdq(Graph& g, int v, const ActParams& p) {
  const std::string name = g.value(v).name;
  const int scale = ScaleInit(g, name, p.scale);
  const int zp = ZeroPointInit(g, name, p);
  const int q = NewValue(g, name + "_quantized", p.dtype);
  const int producer = g.value(v).producer;
  if (g.IsGraphOutput(v) && producer >= 0) {
    const int pre = NewValue(g, name + "_float", DType::kFloat32);
    for (int& o : g.nodes()[static_cast<size_t>(producer)].outputs)
      if (o == v) o = pre;
    g.value(pre).producer = producer;
    Emit(g, "QuantizeLinear", name + "_QuantizeLinear", {pre, scale, zp}, {q});
    Emit(g, "DequantizeLinear", name + "_DequantizeLinear", {q, scale, zp}, {v});
    return;
  }
  const std::vector<int> consumers = g.Consumers(v);
  const int dq = NewValue(g, name + "_dq", DType::kFloat32);
  Emit(g, "QuantizeLinear", name + "_QuantizeLinear", {v, scale, zp}, {q});
  Emit(g, "DequantizeLinear", name + "_DequantizeLinear", {q, scale, zp}, {dq});
  for (int c : consumers)
    for (int& in : g.nodes()[static_cast<size_t>(c)].inputs)
      if (in == v) in = dq;
}

}  // namespace

Status EmitQdq(Graph& g, const Int8Plan& plan, const ParamTable& params, std::map<std::string, EmittedWeight>* weights) {
  for (const QuantLayer& l : plan.layers) {
    const float a_scale = params.at(l.input).scale;
    EmittedWeight w = EmitWeight(g, l, /*as_kn=*/false);
    const std::string wname = g.value(l.weight).name;
    AttributeMap wattrs;
    if (w.axis >= 0) wattrs.Set("axis", Attribute::Int(w.axis));
    const int wdq = NewValue(g, wname + "_dq", DType::kFloat32);
    Emit(g, "DequantizeLinear", wname + "_DequantizeLinear", {w.values, w.scale, w.zero_point}, {wdq}, wattrs);
    g.nodes()[static_cast<size_t>(l.node)].inputs[1] = wdq;
    if (l.bias >= 0) {
      const Value& bv = g.value(l.bias);
      const std::string bname = bv.name;
      Tensor bq = QuantizeBias(*bv.initializer, a_scale, w.scales);
      const std::vector<float> bs = BiasScales(a_scale, w.scales);
      const int64_t n = static_cast<int64_t>(bs.size());
      w.bytes += static_cast<int64_t>(bq.nbytes() + bs.size() * 8);
      const int bq_id = NewInit(g, bname + "_quantized", std::move(bq));
      const int bs_id = NewInit(g, bname + "_scale", w.axis >= 0 ? Tensor::FromVector<float>({n}, bs) : Tensor::Scalar<float>(bs[0]));
      const int bz_id = NewInit(g, bname + "_zero_point", w.axis >= 0 ? Tensor(DType::kInt32, {n}) : Tensor::Scalar<int32_t>(0));
      AttributeMap battrs;
      if (w.axis >= 0) battrs.Set("axis", Attribute::Int(0));
      const int bdq = NewValue(g, bname + "_dq", DType::kFloat32);
      Emit(g, "DequantizeLinear", bname + "_DequantizeLinear", {bq_id, bs_id, bz_id}, {bdq}, battrs);
      g.nodes()[static_cast<size_t>(l.node)].inputs[2] = bdq;
    }
    (*weights)[l.name] = w;
  }
  for (const auto& [v, p] : params.params)
    if (!plan.existing.count(v)) InsertQdq(g, v, p);
  g.Reindex();
  return Status::Ok();
}

}  // namespace whittle::quant
