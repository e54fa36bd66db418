#include "runtime/training/lift.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "lib/ir/binary_format.h"
#include "lib/ir/domain.h"

namespace whittle::training {

int64_t ChannelOf(const Tensor& scale, const Dims& d, int64_t axis, int64_t i) {
  if (scale.numel() <= 1) return 0;
  int64_t inner = 1;
  for (size_t k = static_cast<size_t>(axis) + 1; k < d.size(); ++k) inner *= d[k];
  return (i / inner) % d[static_cast<size_t>(axis)];
}

// Float values of a quantized initializer, as DequantizeLinear computes them.
namespace {

Tensor Dequantize(const Tensor& q, const Tensor& scale, const Tensor& zp, int64_t axis) {
  Tensor out(DType::kFloat32, q.dims());
  for (int64_t i = 0; i < q.numel(); ++i) {
    const int64_t c = ChannelOf(scale, q.dims(), axis, i);
    double v = 0;
    switch (q.dtype()) {
      case DType::kUInt8: v = q.data<uint8_t>()[i]; break;
      case DType::kInt8: v = q.data<int8_t>()[i]; break;
      default: v = q.data<int32_t>()[i]; break;
    }
    out.data<float>()[i] = static_cast<float>(v - ZeroPointAt(zp, c)) * scale.data<float>()[scale.numel() <= 1 ? 0 : c];
  }
  return out;
}

// Replaces every DequantizeLinear of a constant integer initializer (a stored weight) by a fake
// quantization of a float latent initializer; returns the latent values' ids.
// Replaces each binarized layer with float activations by a standard MatMul/Conv of
// SignSte(latent) * alpha (see BinaryParam); returns the latent values' ids. Binary activations
// are refused: the sign of the input has no useful gradient here.

}  // namespace

StatusOr<std::set<int>> LiftBinaryWeights(Graph& g, std::vector<BinaryParam>* out) {
  std::set<int> latent;
  const size_t count = g.nodes().size();
  for (size_t ni = 0; ni < count; ++ni) {
    const Node d = g.nodes()[ni];
    if (d.domain != kWhittleDomain || (d.op_type != "BinaryMatMul" && d.op_type != "BinaryConv")) continue;
    if (d.attrs.GetString("activations", "float") != "float")
      return Unimplemented(d.DebugName() + ": fine-tuning a layer with binary activations is not supported "
                                           "(binarize with activations=float)");
    const bool conv = d.op_type == "BinaryConv";
    if (d.inputs.size() < 3) return InvalidArgument(d.DebugName() + ": missing inputs");
    const Tensor* bits = g.ConstInput(d, 1, DType::kUInt64);
    const Tensor* alpha = g.ConstInput(d, 2, DType::kFloat32);
    if (!bits || !alpha) return Unimplemented(d.DebugName() + ": fine-tuning needs constant bits and alpha");
    BinaryParam b;
    b.bits = g.value(d.inputs[1]).name;
    b.alpha_stored = g.value(d.inputs[2]).name;
    Dims wd;
    if (conv) {
      const auto ks = d.attrs.GetInts("kernel_shape");
      const int64_t m = d.attrs.GetInt("out_channels", 0), c = d.attrs.GetInt("in_channels", 0),
                    grp = d.attrs.GetInt("group", 1);
      if (ks.size() != 2 || grp < 1) return InvalidArgument(d.DebugName() + ": bad kernel_shape or group");
      b.n = m;
      b.k = c / grp * ks[0] * ks[1];
      wd = {m, c / grp, ks[0], ks[1]};
    } else {
      b.n = d.attrs.GetInt("out_features", 0);
      b.k = d.attrs.GetInt("in_features", 0);
      b.transposed = true;
      wd = {b.k, b.n};
    }
    const BinaryAttrs ba{b.n, b.k, false};
    WH_RETURN_IF_ERROR(CheckBinaryTensors(ba, *bits, *alpha, nullptr, false).WithContext(d.DebugName()));
    // The latent starts at sign * alpha: step 0 computes what the model computes.
    Tensor w(DType::kFloat32, wd);
    const int64_t words = BinaryWords(b.k);
    for (int64_t r = 0; r < b.n; ++r)
      for (int64_t i = 0; i < b.k; ++i) {
        const float v = (BinaryBit(bits->data<uint64_t>() + r * words, i) ? 1.f : -1.f) * alpha->data<float>()[r];
        w.data<float>()[b.transposed ? i * b.n + r : r * b.k + i] = v;
      }
    Tensor a4;
    if (conv) {
      a4 = Tensor(DType::kFloat32, {b.n, 1, 1, 1});
      std::copy(alpha->data<float>(), alpha->data<float>() + b.n, a4.data<float>());
    }
    const int lid = g.AddInitializer(g.UniqueName(b.bits + "_latent"), w);
    b.latent = g.value(lid).name;
    latent.insert(lid);
    const int aid = conv ? g.AddInitializer(g.UniqueName(b.alpha_stored + "_4d"), a4) : d.inputs[2];
    b.alpha = g.value(aid).name;
    auto add = [&](const std::string& op, std::vector<int> in, AttributeMap at = {}, const std::string& dom = "") {
      return g.AddOp(d.name + "/train_" + op, op, std::move(in), std::move(at), dom);
    };
    const int wb = add("Mul", {add("SignSte", {lid}, {}, kWhittleDomain), aid});
    Node& layer = g.nodes()[ni];
    const int bias = d.inputs.size() > 3 ? d.inputs[3] : -1;
    if (conv) {
      AttributeMap at;
      for (const char* k : {"kernel_shape", "strides", "pads", "dilations", "auto_pad", "group"})
        if (d.attrs.Has(k)) at.Set(k, *d.attrs.Find(k));
      layer.domain.clear();
      layer.op_type = "Conv";
      layer.attrs = at;
      layer.inputs = {d.inputs[0], wb};
      if (bias >= 0) layer.inputs.push_back(bias);
    } else if (bias >= 0) {
      // MatMul into a new value, then the bias Add writes the layer's output.
      const int mm = g.AddValue(g.UniqueName(d.name + "/train_MatMul_out"));
      Node& l2 = g.nodes()[ni];
      l2.domain.clear();
      l2.op_type = "MatMul";
      l2.attrs = AttributeMap();
      l2.inputs = {d.inputs[0], wb};
      const int out = l2.outputs[0];
      l2.outputs = {mm};
      g.value(mm).producer = static_cast<int>(ni);
      Node addn;
      addn.name = g.UniqueName(d.name + "/train_Add");
      addn.op_type = "Add";
      addn.inputs = {mm, bias};
      addn.outputs = {out};
      g.AddNode(std::move(addn));
    } else {
      layer.domain.clear();
      layer.op_type = "MatMul";
      layer.attrs = AttributeMap();
      layer.inputs = {d.inputs[0], wb};
    }
    out->push_back(std::move(b));
  }
  return latent;
}

// How many node inputs read value v.
int Readers(const Graph& g, int v) {
  int c = 0;
  for (const Node& n : g.nodes())
    for (int i : n.inputs) c += i == v;
  return c;
}

StatusOr<std::set<int>> LiftQuantizedWeights(Graph& g, std::vector<QuantizedParam>* out, bool refresh,
                                             std::vector<int>* live_inputs) {
  std::set<int> latent;
  const size_t count = g.nodes().size();
  // DequantizeLinear output value -> its weight's index in *out (for the biases beside them).
  std::map<int, size_t> weight_of_dq;
  for (size_t ni = 0; ni < count; ++ni) {
    const Node d = g.nodes()[ni];
    if (!(d.domain.empty() && d.op_type == "DequantizeLinear") || d.inputs.empty()) continue;
    const Value qv = g.value(d.inputs[0]);  // a copy: adding values below moves them
    if (!qv.initializer) continue;
    const DType dt = qv.initializer->dtype();
    if (dt != DType::kInt8 && dt != DType::kUInt8 && dt != DType::kInt32) continue;
    const Tensor* scale = g.ConstInput(d, 1, DType::kFloat32);
    if (!scale) return Unimplemented(d.DebugName() + ": a stored weight's scale must be a constant");
    const Tensor* zp = d.inputs.size() > 2 && d.inputs[2] >= 0 ? g.ConstInput(d, 2) : nullptr;
    if (d.inputs.size() > 2 && d.inputs[2] >= 0 && !zp) return Unimplemented(d.DebugName() + ": non-constant zero point");
    QuantizedParam q;
    q.stored = qv.name;
    q.dtype = dt;
    q.scale = *scale;
    if (zp) q.zero_point = *zp;
    const int64_t rank = qv.initializer->rank();
    q.axis = d.attrs.GetInt("axis", 1);
    if (q.axis < 0) q.axis += rank;
    if (scale->numel() > 1 && (q.axis < 0 || q.axis >= rank)) return InvalidArgument(d.DebugName() + ": bad axis");
    const Tensor w = Dequantize(*qv.initializer, q.scale, q.zero_point, q.axis);
    const int lid = g.AddInitializer(g.UniqueName(qv.name + "_latent"), w);
    q.latent = g.value(lid).name;
    latent.insert(lid);
    Node& dn = g.nodes()[ni];
    if (dt == DType::kInt32) {
      // A bias: trained in float, requantized at export.
      dn.op_type = "Identity";
      dn.inputs = {lid};
      dn.attrs = AttributeMap();
    } else {
      int scale_in = d.inputs[1];
      bool symmetric = true;
      // (scale and zp point into the value list, which the latent's initializer may have moved:
      // only the copies in q are read from here on.)
      for (int64_t c = 0; q.zero_point.defined() && c < q.zero_point.numel(); ++c)
        symmetric = symmetric && ZeroPointAt(q.zero_point, c) == 0;
      if (refresh && symmetric && Readers(g, d.inputs[1]) == 1) {
        q.stored_scale = g.value(d.inputs[1]).name;
        q.levels = Tensor(DType::kFloat32, q.scale.dims());
        float* lv = q.levels.data<float>();
        std::fill(lv, lv + q.levels.numel(), 0.f);
        for (int64_t i = 0; i < qv.initializer->numel(); ++i) {
          const int64_t c = q.scale.numel() <= 1 ? 0 : ChannelOf(q.scale, qv.initializer->dims(), q.axis, i);
          double v = dt == DType::kInt8 ? qv.initializer->data<int8_t>()[i] : qv.initializer->data<uint8_t>()[i];
          lv[c] = std::max(lv[c], static_cast<float>(std::fabs(v)));
        }
        scale_in = g.AddValue(g.UniqueName(q.latent + "_scale"), DType::kFloat32, ToSymShape(q.scale.dims()));
        q.live_scale = g.value(scale_in).name;
        live_inputs->push_back(scale_in);
        g.nodes()[ni].inputs[1] = scale_in;
      }
      weight_of_dq[d.outputs[0]] = out->size();
      Node qn;
      qn.name = g.UniqueName(d.name + "_fake_quant");
      qn.op_type = "QuantizeLinear";
      qn.inputs = {lid, scale_in};
      if (zp) qn.inputs.push_back(d.inputs[2]);
      qn.attrs = d.attrs;
      qn.outputs = {g.AddValue(g.UniqueName(qv.name + "_fake_quant"), dt, qv.shape)};
      g.nodes()[ni].inputs[0] = qn.outputs[0];
      g.AddNode(std::move(qn));
    }
    out->push_back(std::move(q));
  }
  // Biases: an int32 bias of a Conv/Gemm whose weight scale is live follows that scale.
  for (QuantizedParam& b : *out) {
    if (b.dtype != DType::kInt32 || !refresh) continue;
    // The bias's value (the Identity that reads its latent) and the weight beside it: Conv/Gemm
    // input 1 next to input 2, or a MatMul's input 1 when an Add adds the bias to its output.
    auto is_bias = [&](int v) {
      if (v < 0 || g.value(v).producer < 0) return false;
      const Node& bp = g.nodes()[static_cast<size_t>(g.value(v).producer)];
      return !bp.inputs.empty() && g.value(bp.inputs[0]).name == b.latent;
    };
    for (const Node& n : g.nodes()) {
      int weight = -1;
      if ((n.op_type == "Conv" || n.op_type == "Gemm") && n.inputs.size() > 2 && is_bias(n.inputs[2])) weight = n.inputs[1];
      if (n.op_type == "Add" && n.inputs.size() == 2)
        for (int s = 0; s < 2; ++s) {
          const int other = n.inputs[static_cast<size_t>(1 - s)];
          if (!is_bias(n.inputs[static_cast<size_t>(s)]) || other < 0 || g.value(other).producer < 0) continue;
          const Node& mm = g.nodes()[static_cast<size_t>(g.value(other).producer)];
          if (mm.op_type == "MatMul" && mm.inputs.size() == 2) weight = mm.inputs[1];
        }
      if (weight < 0) continue;
      auto w = weight_of_dq.find(weight);
      if (w == weight_of_dq.end() || (*out)[w->second].live_scale.empty()) break;
      b.bias_of = (*out)[w->second].latent;
      b.weight_scale0 = (*out)[w->second].scale;
      break;
    }
  }
  return latent;
}

Tensor LiveScale(const Tensor& w, const QuantizedParam& q) {
  Tensor s = q.scale.Clone();
  std::vector<float> m(static_cast<size_t>(s.numel()), 0.f);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = s.numel() <= 1 ? 0 : ChannelOf(q.scale, w.dims(), q.axis, i);
    m[static_cast<size_t>(c)] = std::max(m[static_cast<size_t>(c)], std::fabs(w.data<float>()[i]));
  }
  for (int64_t c = 0; c < s.numel(); ++c)
    if (m[static_cast<size_t>(c)] > 0 && q.levels.defined() && q.levels.data<float>()[c] > 0)
      s.data<float>()[c] = m[static_cast<size_t>(c)] / q.levels.data<float>()[c];
  return s;
}

Tensor QuantizeStored(const Tensor& w, const QuantizedParam& q) {
  Tensor out(q.dtype, w.dims());
  double lo = 0, hi = 0;
  RangeOf(q.dtype, &lo, &hi);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = ChannelOf(q.scale, w.dims(), q.axis, i);
    const float s = q.scale.data<float>()[q.scale.numel() <= 1 ? 0 : c];
    // As QuantizeLinear: x / scale in float, rounded half to even, plus the zero point, saturated.
    const double v = std::min(hi, std::max(lo, std::nearbyint(static_cast<double>(w.data<float>()[i] / s)) +
                                                   ZeroPointAt(q.zero_point, c)));
    if (q.dtype == DType::kUInt8) out.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    else if (q.dtype == DType::kInt8) out.data<int8_t>()[i] = static_cast<int8_t>(v);
    else out.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
  return out;
}

}  // namespace whittle::training
