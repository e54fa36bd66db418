#include "runtime/rewrite/fuse_qdq.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ops/op_def.h"
#include "runtime/rewrite/match.h"

namespace whittle {
namespace {


using rewrite::ConstValue;
using rewrite::InputAt;
using rewrite::IsOp;
using rewrite::Producer;

bool Is8Bit(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

int64_t IntAt(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kInt8: return t.data<int8_t>()[i];
    case DType::kUInt8: return t.data<uint8_t>()[i];
    case DType::kInt32: return t.data<int32_t>()[i];
    default: WH_CHECK(false && "IntAt: unexpected dtype"); return 0;
  }
}

// Scalar (per-tensor) quantization parameters of a Q or DQ node, all constant.
struct ScalarQ {
  float scale = 0;
  int64_t zp = 0;
  DType dtype = DType::kUndefined;  // the quantized type
  int scale_id = -1, zp_id = -1;    // zp_id -1: absent (zero point 0)
};

// A QuantizeLinear/DequantizeLinear node's parameters when they are constant scalars.
// quantized_dtype is the integer side's type (DQ input, Q output).
std::optional<ScalarQ> ScalarParams(const Graph& g, const Node& n, DType quantized_dtype) {
  ScalarQ q;
  q.scale_id = InputAt(n, 1);
  q.zp_id = InputAt(n, 2);
  const Tensor* s = ConstValue(g, q.scale_id);
  if (!s || s->dtype() != DType::kFloat32 || s->numel() != 1) return std::nullopt;
  q.scale = s->data<float>()[0];
  if (!std::isfinite(q.scale) || !(q.scale > 0)) return std::nullopt;
  q.dtype = quantized_dtype;
  if (q.zp_id >= 0) {
    const Tensor* z = ConstValue(g, q.zp_id);
    if (!z || z->numel() != 1 || z->dtype() != quantized_dtype) return std::nullopt;
    q.zp = IntAt(*z, 0);
  }
  if (!Is8Bit(q.dtype)) return std::nullopt;
  return q;
}

// Activation side: value v is DequantizeLinear(x_q) with scalar constant parameters.
struct ActDq {
  int x_q = -1;
  ScalarQ p;
};
std::optional<ActDq> MatchActDq(const Graph& g, int v) {
  const Node* dq = Producer(g, v);
  if (!dq || !IsOp(*dq, "DequantizeLinear") || dq->outputs.empty() || dq->outputs[0] != v) return std::nullopt;
  const int x = InputAt(*dq, 0);
  if (x < 0) return std::nullopt;
  auto p = ScalarParams(g, *dq, g.value(x).dtype);
  if (!p) return std::nullopt;
  return ActDq{x, *p};
}

// Output side: value v feeds exactly one QuantizeLinear with scalar constant parameters.
struct OutQ {
  int node = -1;
  ScalarQ p;
};
std::optional<OutQ> MatchOutQ(const Graph& g, int v) {
  const int ci = rewrite::SoleConsumer(g, v);
  if (ci < 0) return std::nullopt;
  const Node& q = g.nodes()[static_cast<size_t>(ci)];
  if (!IsOp(q, "QuantizeLinear") || InputAt(q, 0) != v || q.outputs.empty() || q.outputs[0] < 0) return std::nullopt;
  const int zp = InputAt(q, 2);
  const DType dt = zp >= 0 ? g.value(zp).dtype : DType::kUInt8;
  auto p = ScalarParams(g, q, dt);
  if (!p) return std::nullopt;
  return OutQ{ci, *p};
}

// Weight side: v is DequantizeLinear(constant int8|uint8 w) per tensor, or per channel along
// want_axis of w.
struct WeightDq {
  Tensor w;  // a copy sharing the initializer's buffer: pointers into values() die on AddInitializer
  int w_id = -1;
  std::vector<float> scale;   // 1 (per tensor) or w.dim(want_axis) entries
  std::vector<int64_t> zp;    // same length as scale
  bool per_channel = false;
};
std::optional<WeightDq> MatchWeightDq(const Graph& g, int v, int want_axis, int want_rank_min, int want_rank_max) {
  const Node* dq = Producer(g, v);
  if (!dq || !IsOp(*dq, "DequantizeLinear")) return std::nullopt;
  WeightDq r;
  r.w_id = InputAt(*dq, 0);
  const Tensor* w = ConstValue(g, r.w_id);
  if (!w || !Is8Bit(w->dtype()) || w->rank() < want_rank_min || w->rank() > want_rank_max) return std::nullopt;
  r.w = *w;
  const Tensor* s = ConstValue(g, InputAt(*dq, 1));
  if (!s || s->dtype() != DType::kFloat32 || s->rank() > 1 || s->numel() < 1) return std::nullopt;
  const Tensor* z = nullptr;
  if (InputAt(*dq, 2) >= 0) {
    z = ConstValue(g, InputAt(*dq, 2));
    if (!z || z->dtype() != r.w.dtype() || z->numel() != s->numel()) return std::nullopt;
  }
  if (s->numel() > 1) {
    int64_t axis = g.OpsetFor("") >= 13 ? dq->attrs.GetInt("axis", 1) : 1;
    if (axis < 0) axis += r.w.rank();
    if (axis != want_axis || s->numel() != r.w.dim(want_axis)) return std::nullopt;
    r.per_channel = true;
  }
  for (int64_t i = 0; i < s->numel(); ++i) {
    const float sc = s->data<float>()[i];
    if (!std::isfinite(sc) || !(sc > 0)) return std::nullopt;
    r.scale.push_back(sc);
    r.zp.push_back(z ? IntAt(*z, i) : 0);
  }
  return r;
}

// The bias as int32 at scale x_scale * w_scale[c] (n channels), or nullopt when it cannot be
// represented (non-constant, wrong shape, out of int32 range). bias_id -1: no bias.
struct BiasQ {
  bool present = false;
  int reuse_id = -1;  // an int32 initializer usable as is
  Tensor values;      // otherwise the new int32 [n] bias
};
std::optional<BiasQ> MatchBias(const Graph& g, int bias_id, float x_scale, const WeightDq& w, int64_t n) {
  BiasQ r;
  if (bias_id < 0) return r;
  r.present = true;
  auto acc_scale = [&](int64_t c) { return x_scale * w.scale[w.scale.size() == 1 ? 0 : static_cast<size_t>(c)]; };
  std::vector<double> f(static_cast<size_t>(n));
  if (const Tensor* b = ConstValue(g, bias_id)) {
    if (b->dtype() != DType::kFloat32) return std::nullopt;
    const bool shape_ok = b->numel() == 1 || (b->numel() == n && (b->rank() == 1 || (b->rank() == 2 && b->dim(0) == 1)));
    if (!shape_ok) return std::nullopt;
    for (int64_t c = 0; c < n; ++c) f[static_cast<size_t>(c)] = b->data<float>()[b->numel() == 1 ? 0 : c];
  } else {
    const Node* dq = Producer(g, bias_id);
    if (!dq || !IsOp(*dq, "DequantizeLinear")) return std::nullopt;
    const Tensor* bq = ConstValue(g, InputAt(*dq, 0));
    const Tensor* s = ConstValue(g, InputAt(*dq, 1));
    const Tensor* z = InputAt(*dq, 2) >= 0 ? ConstValue(g, InputAt(*dq, 2)) : nullptr;
    if (!bq || bq->dtype() != DType::kInt32 || !s || s->dtype() != DType::kFloat32) return std::nullopt;
    if (InputAt(*dq, 2) >= 0 && (!z || z->dtype() != DType::kInt32 || z->numel() != s->numel())) return std::nullopt;
    const bool bshape = bq->numel() == n && (bq->rank() == 1 || (bq->rank() == 2 && bq->dim(0) == 1));
    if (!bshape || (s->numel() != 1 && s->numel() != n)) return std::nullopt;
    if (s->numel() != 1 && bq->rank() == 2) return std::nullopt;  // per-axis on a [1, n] bias: axis games
    bool direct = bq->rank() == 1;
    for (int64_t c = 0; c < n; ++c) {
      const int64_t k = s->numel() == 1 ? 0 : c;
      const float sc = s->data<float>()[k];
      const int64_t zp = z ? IntAt(*z, k) : 0;
      if (!std::isfinite(sc) || !(sc > 0)) return std::nullopt;
      const float want = acc_scale(c);
      direct = direct && zp == 0 && std::fabs(sc - want) <= 1e-6f * want;
      // What DequantizeLinear would produce, for requantizing at the accumulator's scale.
      f[static_cast<size_t>(c)] = static_cast<float>(bq->data<int32_t>()[c] - zp) * sc;
    }
    if (direct) {
      r.reuse_id = InputAt(*dq, 0);
      return r;
    }
  }
  r.values = Tensor(DType::kInt32, {n});
  int32_t* out = r.values.data<int32_t>();
  for (int64_t c = 0; c < n; ++c) {
    const double q = std::nearbyint(f[static_cast<size_t>(c)] / static_cast<double>(acc_scale(c)));
    if (!std::isfinite(q) || std::fabs(q) > static_cast<double>(std::numeric_limits<int32_t>::max())) return std::nullopt;
    out[c] = static_cast<int32_t>(q);
  }
  return r;
}

// One Conv/Gemm/MatMul that will become QConv/QGemm.
struct LinearMatch {
  int node = -1;
  bool conv = false;
  ActDq x;
  WeightDq w;
  bool transpose_w = false;  // Gemm transB=1: [N, K] -> [K, N]
  BiasQ bias;
  int bias_add = -1;  // a MatMul's Add of a constant per-channel bias: fused as the bias
  int act_node = -1;  // a Relu, or a constant-bounded Clip before a QuantizeLinear: fused
  rewrite::ClipRange clip;  // the Clip's bounds (act_node a Clip)
  std::optional<OutQ> out_q;
  int y = -1;  // the value the fused node produces
};

std::optional<LinearMatch> MatchLinear(const Graph& g, int ni) {
  const Node& n = g.nodes()[static_cast<size_t>(ni)];
  if (!n.domain.empty() || n.attrs.Has("_activation") || n.outputs.size() != 1 || n.outputs[0] < 0) return std::nullopt;
  LinearMatch m;
  m.node = ni;
  int64_t channels = 0;
  if (n.op_type == "Conv") {
    if (n.inputs.size() < 2) return std::nullopt;
    m.conv = true;
    auto w = MatchWeightDq(g, n.inputs[1], 0, 3, 5);
    if (!w) return std::nullopt;
    m.w = std::move(*w);
    channels = m.w.w.dim(0);
  } else if (n.op_type == "Gemm") {
    if (n.inputs.size() < 2) return std::nullopt;
    if (n.attrs.GetInt("transA", 0) != 0 || n.attrs.GetFloat("alpha", 1.f) != 1.f) return std::nullopt;
    if (InputAt(n, 2) >= 0 && n.attrs.GetFloat("beta", 1.f) != 1.f) return std::nullopt;
    m.transpose_w = n.attrs.GetInt("transB", 0) != 0;
    auto w = MatchWeightDq(g, n.inputs[1], m.transpose_w ? 0 : 1, 2, 2);
    if (!w) return std::nullopt;
    m.w = std::move(*w);
    channels = m.w.w.dim(m.transpose_w ? 0 : 1);
  } else if (n.op_type == "MatMul") {
    if (n.inputs.size() != 2) return std::nullopt;
    const Value& a = g.value(n.inputs[0]);
    if (!a.shape || a.shape->size() < 2) return std::nullopt;  // [..., M, K] only
    auto w = MatchWeightDq(g, n.inputs[1], 1, 2, 2);
    if (!w) return std::nullopt;
    m.w = std::move(*w);
    channels = m.w.w.dim(1);
  } else {
    return std::nullopt;
  }
  auto x = MatchActDq(g, n.inputs[0]);
  if (!x) return std::nullopt;
  m.x = *x;
  m.y = n.outputs[0];
  int bias_id = InputAt(n, 2);
  if (n.op_type == "MatMul") {
    // A MatMul's bias as exporters write a Linear on 3-D input: its sole reader Add(y, b) with a
    // constant float b of one value per output channel (either operand order).
    int b = -1;
    const int ai = rewrite::MatMulBiasAdd(g, m.y, channels, &b);
    if (ai >= 0) {
      bias_id = b;
      m.bias_add = ai;
      m.y = g.nodes()[static_cast<size_t>(ai)].outputs[0];
    }
  }
  auto bias = MatchBias(g, bias_id, m.x.p.scale, m.w, channels);
  if (!bias) return std::nullopt;
  m.bias = std::move(*bias);

  // A Relu after the layer is fused (max(y, 0) on a float output, the zero point as the lower
  // clamp on a quantized one). A Clip with constant bounds is fused only before a QuantizeLinear,
  // where it narrows the integer clamp (torchvision's ReLU6: Conv -> Clip(0, 6) -> Q).
  const int ci = rewrite::SoleConsumer(g, m.y);
  const Node* act = ci >= 0 ? &g.nodes()[static_cast<size_t>(ci)] : nullptr;
  if (act && act->outputs.size() == 1 && act->outputs[0] >= 0 && !act->inputs.empty() && act->inputs[0] == m.y) {
    if (IsOp(*act, "Relu")) {
      m.act_node = ci;
    } else if (IsOp(*act, "Clip") && MatchOutQ(g, act->outputs[0])) {
      if (auto r = rewrite::ConstClipRange(g, *act); r && r->min <= r->max) {
        m.act_node = ci;
        m.clip = *r;
      }
    }
    if (m.act_node >= 0) m.y = act->outputs[0];
  }
  m.out_q = MatchOutQ(g, m.y);
  if (m.out_q) m.y = g.nodes()[static_cast<size_t>(m.out_q->node)].outputs[0];
  return m;
}

// DequantizeLinear -> MaxPool|Flatten|Reshape|Transpose|Squeeze|Unsqueeze|Gather (the data) ->
// QuantizeLinear with equal parameters.
struct PassMatch {
  int node = -1, q_node = -1, x_q = -1;
};
std::optional<PassMatch> MatchPassthrough(const Graph& g, int ni) {
  const Node& n = g.nodes()[static_cast<size_t>(ni)];
  if (!(IsOp(n, "MaxPool") || IsOp(n, "Flatten") || IsOp(n, "Reshape") || IsOp(n, "Transpose") ||
        IsOp(n, "Squeeze") || IsOp(n, "Unsqueeze") || IsOp(n, "Gather")) ||
      n.inputs.empty())
    return std::nullopt;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] >= 0) return std::nullopt;  // MaxPool's Indices
  if (n.outputs.empty() || n.outputs[0] < 0) return std::nullopt;
  auto in = MatchActDq(g, n.inputs[0]);
  if (!in) return std::nullopt;
  auto out = MatchOutQ(g, n.outputs[0]);
  if (!out || out->p.scale != in->p.scale || out->p.zp != in->p.zp || out->p.dtype != in->p.dtype) return std::nullopt;
  return PassMatch{ni, out->node, in->x_q};
}

// A constant scalar or [n] tensor of type dt with the given values, added as an initializer.
int AddIntParam(Graph& g, const std::string& name, DType dt, const std::vector<int64_t>& v) {
  Tensor t(dt, v.size() == 1 ? Dims{} : Dims{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::kInt8) t.data<int8_t>()[i] = static_cast<int8_t>(v[i]);
    else t.data<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
  }
  return g.AddInitializer(g.UniqueName(name), std::move(t));
}

int AddScale(Graph& g, const std::string& name, const std::vector<float>& v) {
  Tensor t(DType::kFloat32, v.size() == 1 ? Dims{} : Dims{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return g.AddInitializer(g.UniqueName(name), std::move(t));
}

// The zero point input of a per-tensor parameter set: the existing one, or a new zero.
int ZeroPointId(Graph& g, const ScalarQ& p, const std::string& name) {
  return p.zp_id >= 0 ? p.zp_id : AddIntParam(g, name, p.dtype, {0});
}

void ApplyLinear(Graph& g, const LinearMatch& m, std::set<int>* dead) {
  const std::string base = g.nodes()[static_cast<size_t>(m.node)].name.empty()
                               ? std::string("qdq")
                               : g.nodes()[static_cast<size_t>(m.node)].name;
  std::vector<int> in(9, -1);
  in[0] = m.x.x_q;
  in[1] = m.x.p.scale_id;
  in[2] = ZeroPointId(g, m.x.p, base + "_x_zero_point");
  if (m.transpose_w) {
    const Tensor& w = m.w.w;  // [N, K] -> [K, N]
    const int64_t nn = w.dim(0), k = w.dim(1);
    Tensor t(w.dtype(), {k, nn});
    const uint8_t* src = static_cast<const uint8_t*>(w.raw_data());
    uint8_t* dst = static_cast<uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < nn; ++i)
      for (int64_t j = 0; j < k; ++j) dst[j * nn + i] = src[i * k + j];
    in[3] = g.AddInitializer(g.UniqueName(g.value(m.w.w_id).name + "_kn"), std::move(t));
  } else {
    in[3] = m.w.w_id;
  }
  const DType wdt = m.w.w.dtype();
  in[4] = AddScale(g, base + "_w_scale", m.w.scale);
  in[5] = AddIntParam(g, base + "_w_zero_point", wdt, m.w.zp);
  if (m.out_q) {
    in[6] = m.out_q->p.scale_id;
    in[7] = ZeroPointId(g, m.out_q->p, base + "_y_zero_point");
  }
  if (m.bias.present) {
    in[8] = m.bias.reuse_id >= 0 ? m.bias.reuse_id : g.AddInitializer(g.UniqueName(base + "_bias_int32"), m.bias.values);
  }
  while (!in.empty() && in.back() < 0) in.pop_back();

  Node& node = g.nodes()[static_cast<size_t>(m.node)];
  AttributeMap attrs;
  if (m.conv) {
    for (const char* a : {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"})
      if (const Attribute* v = node.attrs.Find(a)) attrs.Set(a, *v);
  }
  if (m.act_node >= 0) {
    const std::string& op = g.nodes()[static_cast<size_t>(m.act_node)].op_type;
    attrs.Set("_activation", Attribute::String(op));
    if (op == "Clip") rewrite::SetClipBounds(attrs, m.clip);
  }
  node.op_type = m.conv ? "QConv" : "QGemm";
  node.domain = kWhittleDomain;
  node.inputs = std::move(in);
  node.outputs = {m.y};
  node.attrs = std::move(attrs);
  if (m.bias_add >= 0) dead->insert(m.bias_add);
  if (m.act_node >= 0) dead->insert(m.act_node);
  if (m.out_q) dead->insert(m.out_q->node);
}

bool Available(const char* op) {
  RegisterAllOps();
  RegisterAllKernels();
  return OpRegistry::Global().Find(kWhittleDomain, op) != nullptr &&
         KernelRegistry::Global().Find(kWhittleDomain, op) != nullptr;
}

}  // namespace

Status FuseQdq(Graph& g, QdqFusionCounts* counts) {
  // Phase 1: shape/selection ops between a Q/DQ pair run on the int8 data.
  {
    std::vector<PassMatch> matches;
    for (size_t i = 0; i < g.nodes().size(); ++i)
      if (auto m = MatchPassthrough(g, static_cast<int>(i))) matches.push_back(*m);
    std::set<int> dead;
    for (const PassMatch& m : matches) {
      Node& n = g.nodes()[static_cast<size_t>(m.node)];
      n.inputs[0] = m.x_q;
      n.outputs[0] = g.nodes()[static_cast<size_t>(m.q_node)].outputs[0];
      dead.insert(m.q_node);
    }
    g.RemoveNodes(dead);
    counts->passthrough += static_cast<int>(matches.size());
  }
  // Phase 2: the linear ops (only those this build has an OpDef and a kernel for).
  std::vector<LinearMatch> matches;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (auto m = MatchLinear(g, static_cast<int>(i)); m && Available(m->conv ? "QConv" : "QGemm"))
      matches.push_back(std::move(*m));
  if (matches.empty()) return Status::Ok();
  std::set<int> dead;
  for (const LinearMatch& m : matches) ApplyLinear(g, m, &dead);
  g.RemoveNodes(dead);
  if (g.OpsetFor(kWhittleDomain) == 0) g.opset_imports[kWhittleDomain] = 1;
  counts->fused += static_cast<int>(matches.size());
  return Status::Ok();
}

}  // namespace whittle
