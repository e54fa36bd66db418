#include "passes/quantize/emit_common.h"

namespace whittle::quant {

int NewValue(Graph& g, const std::string& name, DType dt) { return g.AddValue(g.UniqueName(name), dt); }

int NewInit(Graph& g, const std::string& name, Tensor t) { return g.AddInitializer(g.UniqueName(name), std::move(t)); }

int Emit(Graph& g, const std::string& op, const std::string& name, std::vector<int> inputs, std::vector<int> outputs,
         AttributeMap attrs) {
  Node n;
  n.op_type = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attrs = std::move(attrs);
  return g.AddNode(std::move(n));
}

int ScaleInit(Graph& g, const std::string& base, float scale) {
  return NewInit(g, base + "_scale", Tensor::Scalar<float>(scale));
}

int ZeroPointInit(Graph& g, const std::string& base, const ActParams& p) {
  if (p.dtype == DType::kInt8) return NewInit(g, base + "_zero_point", Tensor::Scalar<int8_t>(static_cast<int8_t>(p.zero_point)));
  return NewInit(g, base + "_zero_point", Tensor::Scalar<uint8_t>(static_cast<uint8_t>(p.zero_point)));
}

EmittedWeight EmitWeight(Graph& g, const QuantLayer& l, bool as_kn) {
  const Value& wv = g.value(l.weight);
  const std::string base = wv.name;
  const Tensor w = *wv.initializer;
  QuantizedWeight q = QuantizeWeightSymmetric(w, l.per_channel ? l.weight_axis : -1, l.weight_qmax);
  // A weight mapped from external data has been read: its pages go back, so a gigabyte model's
  // floats do not stay resident beside their int8 copies.
  w.buffer()->ReleaseResidentPages();
  EmittedWeight e;
  e.scales = q.scales;
  e.axis = q.axis;
  Tensor values = q.values;
  if (as_kn && l.trans_b) {
    values = Transpose2D(values);
    if (e.axis >= 0) e.axis = 1;
  }
  const int64_t n = static_cast<int64_t>(q.scales.size());
  Tensor scale = e.axis >= 0 ? Tensor::FromVector<float>({n}, q.scales) : Tensor::Scalar<float>(q.scales[0]);
  Tensor zp = e.axis >= 0 ? Tensor(DType::kInt8, {n}) : Tensor::Scalar<int8_t>(0);
  e.bytes = static_cast<int64_t>(values.nbytes() + scale.nbytes() + zp.nbytes());
  e.values = NewInit(g, base + "_quantized", std::move(values));
  e.scale = NewInit(g, base + "_scale", std::move(scale));
  e.zero_point = NewInit(g, base + "_zero_point", std::move(zp));
  return e;
}

}  // namespace whittle::quant
