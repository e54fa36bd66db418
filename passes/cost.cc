#include "passes/cost.h"

#include <initializer_list>
#include <limits>
#include <set>

#include "lib/ir/circulant_format.h"
#include "lib/ir/domain.h"
#include "whittle/session.h"

namespace whittle {
namespace {

// Per-sample dims: the inferred shape when it is concrete but for a leading batch symbol (counted
// as 1); else the dims observed on one sample when there are; else the inferred shape with
// every unknown dim as 1 (an undercount).
// Inferred dims that are all known but for a leading named (batch) symbol.
bool ConcretePerSample(const Value& v) {
  if (!v.shape) return false;
  for (size_t i = 0; i < v.shape->size(); ++i)
    if (!(*v.shape)[i].known() && !(i == 0 && !(*v.shape)[i].param.empty())) return false;
  return true;
}

bool PerSampleDims(const Graph& g, int id, Dims* out) {
  if (id < 0) return false;
  const Value& v = g.value(id);
  if (v.initializer) {
    *out = v.initializer->dims();
    return true;
  }
  if (!ConcretePerSample(v) && v.observed) {
    *out = *v.observed;
    return true;
  }
  if (!v.shape) return false;
  out->clear();
  for (const Dim& d : *v.shape) out->push_back(d.known() ? d.value : 1);
  return true;
}

// Products saturate at INT64_MAX: the dims come from the model (a 2^62 dim overflowed here,
// fuzzing), and a cost figure that large only has to compare as huge.
int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}
int64_t SatMul(std::initializer_list<int64_t> f) {
  int64_t p = 1;
  for (int64_t v : f) p = SatMul(p, v);
  return p;
}

int64_t Prod(const Dims& d, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < d.size(); ++i) p = SatMul(p, d[i]);
  return p;
}

}  // namespace

// A weight-shared layer (ai.whittle CodebookMatMul) holds out_features x in_features weights,
// however few bits each index takes: its packed index bytes count as that many params.
int64_t CodebookExtraParams(const Graph& g, const Node& n) {
  if (n.domain != kWhittleDomain || n.op_type != "CodebookMatMul" || n.inputs.size() < 3 || n.inputs[2] < 0) return 0;
  const Value& idx = g.value(n.inputs[2]);
  if (!idx.initializer) return 0;
  return n.attrs.GetInt("out_features", 0) * n.attrs.GetInt("in_features", 0) - idx.initializer->numel();
}

namespace {

// A binarized layer (ai.whittle BinaryMatMul/BinaryConv) holds one weight per bit of its packed
// uint64 words (padding aside): they count as out x contracted-size params, not as words.
int64_t BinaryContracted(const Node& n) {
  if (n.op_type == "BinaryMatMul") return n.attrs.GetInt("in_features", 0);
  const auto ks = n.attrs.GetInts("kernel_shape");
  const int64_t g = n.attrs.GetInt("group", 1);
  return ks.size() == 2 && g > 0 ? n.attrs.GetInt("in_channels", 0) / g * ks[0] * ks[1] : 0;
}

int64_t BinaryExtraParams(const Graph& g, const Node& n) {
  if (n.domain != kWhittleDomain || (n.op_type != "BinaryMatMul" && n.op_type != "BinaryConv") || n.inputs.size() < 2 ||
      n.inputs[1] < 0)
    return 0;
  const Value& bits = g.value(n.inputs[1]);
  if (!bits.initializer) return 0;
  const int64_t out = n.attrs.GetInt(n.op_type == "BinaryConv" ? "out_channels" : "out_features", 0);
  return out * BinaryContracted(n) - bits.initializer->numel();
}

// A 4-bit (or 2..8-bit) com.microsoft MatMulNBits holds N x K weights in its packed uint8 B: they
// count as N x K params, as the same weights do in the int4 initializer of the QDQ form.
int64_t NBitsExtraParams(const Graph& g, const Node& n) {
  if (n.domain != kMicrosoftDomain || n.op_type != "MatMulNBits" || n.inputs.size() < 2 || n.inputs[1] < 0) return 0;
  const Value& b = g.value(n.inputs[1]);
  if (!b.initializer) return 0;
  return SatMul(n.attrs.GetInt("N", 0), n.attrs.GetInt("K", 0)) - b.initializer->numel();
}

}  // namespace

int64_t NodeMacs(const Graph& g, const Node& n) {
  if (n.domain == kWhittleDomain && (n.op_type == "BinaryMatMul" || n.op_type == "BinaryConv")) {
    Dims out;
    if (n.outputs.empty() || !PerSampleDims(g, n.outputs[0], &out)) return 0;
    return Prod(out, n.op_type == "BinaryConv" ? 1 : 0, out.size()) * BinaryContracted(n);
  }
  if (n.domain == kWhittleDomain && n.op_type == "CodebookMatMul") {
    Dims out;
    if (n.outputs.empty() || !PerSampleDims(g, n.outputs[0], &out)) return 0;
    return SatMul(Prod(out, 0, out.size()), n.attrs.GetInt("in_features", 0));
  }
  if (n.domain == kWhittleDomain && n.op_type == "BlockCirculantMatMul") {  // the FFT form (circulant.h)
    Dims out;
    const CirculantAttrs a = CirculantAttrsOf(n.attrs);
    if (n.outputs.empty() || !PerSampleDims(g, n.outputs[0], &out) || !CheckCirculantAttrs(a).ok()) return 0;
    return SatMul(Prod(out, 0, out.size()) / a.n, CirculantMacsPerRow(a));
  }
  if (!n.domain.empty() && n.domain != "ai.onnx") return 0;
  const std::string& op = n.op_type;
  Dims out, w, a;
  if (op == "Conv" || op == "ConvInteger" || op == "QLinearConv") {
    int wi = op == "QLinearConv" ? 3 : 1;
    if (n.inputs.size() <= static_cast<size_t>(wi) || n.outputs.empty()) return 0;
    if (!PerSampleDims(g, n.outputs[0], &out) || !PerSampleDims(g, n.inputs[static_cast<size_t>(wi)], &w)) return 0;
    if (out.size() < 2 || w.size() < 2) return 0;
    // Each output element needs Cin/group * prod(kernel) MACs; w is [Cout, Cin/group, k...]. The
    // channel count is the weight's: dims observed before a pass pruned channels are stale.
    return SatMul({w[0], Prod(out, 2, out.size()), Prod(w, 1, w.size())});
  }
  if (op == "Gemm") {
    if (n.inputs.size() < 2 || !PerSampleDims(g, n.inputs[1], &w) || w.size() != 2) return 0;
    if (!PerSampleDims(g, n.outputs[0], &out) || out.size() != 2) return 0;
    // Per sample: K * N, both read from B (whichever side transB makes K).
    return SatMul(w[0], w[1]);
  }
  if (op == "MatMul" || op == "MatMulInteger" || op == "QLinearMatMul") {
    int ai = 0, bi = op == "QLinearMatMul" ? 3 : 1;
    if (n.inputs.size() <= static_cast<size_t>(bi)) return 0;
    if (!PerSampleDims(g, n.inputs[static_cast<size_t>(ai)], &a) || !PerSampleDims(g, n.inputs[static_cast<size_t>(bi)], &w)) return 0;
    if (!PerSampleDims(g, n.outputs[0], &out) || out.empty() || a.empty()) return 0;
    // A constant 2-D weight: rows of A times K * N from the weight (observed dims of A and the
    // output are stale once a pass changed K or N). Otherwise output elements times A's K.
    if (g.value(n.inputs[static_cast<size_t>(bi)]).initializer && w.size() == 2)
      return SatMul({Prod(a, 0, a.size() - 1), w[0], w[1]});
    return SatMul(Prod(out, 0, out.size()), a.back());
  }
  return 0;
}

int64_t NodeParams(const Graph& g, const Node& n) {
  int64_t p = 0;
  std::set<int> seen;
  for (int id : n.inputs) {
    if (id < 0 || !seen.insert(id).second) continue;
    const Value& v = g.value(id);
    if (v.initializer && v.initializer->dtype() != DType::kInt64) p += v.initializer->numel();
  }
  p += CodebookExtraParams(g, n) + BinaryExtraParams(g, n) + NBitsExtraParams(g, n);
  return p;
}

Status ObserveShapes(Graph& g, const std::map<std::string, Tensor>& feeds) {
  std::vector<int> ids;
  bool needed = false;  // inference left some computed value's dims unknown
  for (size_t id = 0; id < g.values().size(); ++id) {
    const Value& v = g.value(static_cast<int>(id));
    if (v.initializer || v.producer < 0) continue;
    needed |= !ConcretePerSample(v);
    ids.push_back(static_cast<int>(id));
  }
  if (!needed) return Status::Ok();
  Graph probe = g;
  probe.outputs() = ids;
  SessionOptions so;
  so.optimize = false;      // keep every value the graph names
  so.pack_weights = false;  // one run: no packed copy of weights the graph already holds
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(std::move(probe), so));
  WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session->Run(feeds));
  for (size_t k = 0; k < ids.size() && k < outs.size(); ++k) g.value(ids[k]).observed = outs[k].dims();
  // Unpacked, the run read mapped weights in place: their pages go back.
  for (const Value& v : g.values())
    if (v.initializer && v.initializer->defined() && v.initializer->buffer()->mapped())
      v.initializer->buffer()->ReleaseResidentPages();
  return Status::Ok();
}

namespace {

// g and its subgraphs: a weight that several graphs share (a constant an If branch or a Loop body
// reads from an enclosing graph) counts once; a Loop or Scan body's MACs count one iteration, an
// If's those of its larger branch.
void AddCost(const Graph& g, std::set<std::pair<const void*, int64_t>>* seen, GraphCost* c) {
  for (const Value& v : g.values()) {
    if (!v.initializer) continue;
    const Tensor& t = *v.initializer;
    if (t.defined() && !seen->insert({t.buffer().get(), static_cast<int64_t>(t.nbytes())}).second &&
        t.nbytes() > 0)
      continue;
    c->param_bytes += static_cast<int64_t>(t.nbytes());
    if (t.dtype() != DType::kInt64) c->params += t.numel();
  }
  for (const Node& n : g.nodes()) {
    int64_t macs = NodeMacs(g, n), sub_macs = 0;
    for (const auto& [attr, sub] : n.attrs.Subgraphs()) {
      GraphCost sc;
      AddCost(*sub, seen, &sc);
      c->params += sc.params;
      c->param_bytes += sc.param_bytes;
      sub_macs = std::max(sub_macs, sc.macs);
    }
    if (__builtin_add_overflow(macs, sub_macs, &macs)) macs = std::numeric_limits<int64_t>::max();
    if (__builtin_add_overflow(c->macs, macs, &c->macs)) c->macs = std::numeric_limits<int64_t>::max();
    c->params += CodebookExtraParams(g, n) + BinaryExtraParams(g, n) + NBitsExtraParams(g, n);
  }
}

}  // namespace

GraphCost ComputeCost(const Graph& g) {
  GraphCost c;
  std::set<std::pair<const void*, int64_t>> seen;
  AddCost(g, &seen, &c);
  return c;
}

LayerReport SkippedLayer(const Graph& g, const Node& n, const std::string& reason) {
  LayerReport r;
  r.node = n.name;
  r.op_type = n.op_type;
  r.action = "skipped";
  r.reason = reason;
  r.params_before = r.params_after = NodeParams(g, n);
  r.macs_before = r.macs_after = NodeMacs(g, n);
  return r;
}

}  // namespace whittle
