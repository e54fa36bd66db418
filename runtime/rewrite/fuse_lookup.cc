#include "runtime/rewrite/fuse_lookup.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/domain.h"
#include "runtime/node_runner.h"
#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

using rewrite::ConstValue;
using rewrite::IsOp;

// Element-wise float ops whose output has their non-scalar input's shape.
bool Tabulable(const Node& n) {
  static const std::set<std::string> kOps = {"Sigmoid", "Tanh", "Relu", "LeakyRelu", "Elu", "Selu", "Softplus",
                                             "Softsign", "HardSigmoid", "HardSwish", "Clip", "Exp", "Neg", "Abs",
                                             "Erf", "Mul", "Add", "Sub", "Div"};
  return n.domain.empty() && kOps.count(n.op_type) > 0 && n.outputs.size() == 1;
}

// Ops whose float form costs several vector instructions per element (an exp or a division):
// a table of floats, read one element at a time, still beats them; a chain of cheap ops does not.
bool Costly(const Node& n) {
  static const std::set<std::string> kOps = {"Sigmoid", "Tanh", "Elu", "Selu", "Softplus", "Softsign", "Exp", "Erf"};
  return kOps.count(n.op_type) > 0;
}

bool ScalarFloatConst(const Graph& g, int id) {
  const Tensor* t = ConstValue(g, id);
  return t && t->dtype() == DType::kFloat32 && t->numel() == 1;
}

// A scalar constant of either dtype (a quantization parameter).
bool ScalarConst(const Graph& g, int id) {
  const Tensor* t = ConstValue(g, id);
  return t && t->numel() == 1;
}

// A DequantizeLinear of an int8/uint8 tensor with scalar constant parameters.
bool ByteDequantize(const Graph& g, const Node& n) {
  if (!IsOp(n, "DequantizeLinear") || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  const DType t = g.value(n.inputs[0]).dtype;
  if (t != DType::kUInt8 && t != DType::kInt8) return false;
  if (!ScalarConst(g, n.inputs[1])) return false;
  return rewrite::InputAt(n, 2) < 0 || ScalarConst(g, n.inputs[2]);
}

bool SameParams(const Graph& g, const Node& a, const Node& b) {
  for (size_t k = 1; k < 3; ++k) {
    const Tensor* ta = ConstValue(g, rewrite::InputAt(a, k));
    const Tensor* tb = ConstValue(g, rewrite::InputAt(b, k));
    if (!ta != !tb) return false;
    if (ta && (ta->dtype() != tb->dtype() || std::memcmp(ta->raw_data(), tb->raw_data(), ta->nbytes()) != 0)) return false;
  }
  return true;
}

struct Region {
  int x = -1;                 // the byte tensor
  std::vector<int> sources;   // DequantizeLinear nodes of x (the same parameters)
  std::vector<int> nodes;     // the float ops, in topological order
  int out = -1;               // the value read outside (the float result)
  int quantize = -1;          // its sole QuantizeLinear reader, or -1
};

// The region grown from DequantizeLinear node d, or nullopt when it has no op or more than one
// value read outside it.
std::optional<Region> Grow(const Graph& g, int d, const std::vector<int>& order) {
  const Node& dq = g.nodes()[static_cast<size_t>(d)];
  Region r;
  r.x = dq.inputs[0];
  std::set<int> inside;  // values computed from x alone
  for (int i : order) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    if (n.inputs.empty() || n.inputs[0] != r.x || !ByteDequantize(g, n) || !SameParams(g, n, dq)) continue;
    r.sources.push_back(i);
    inside.insert(n.outputs[0]);
  }
  std::set<int> in_region;
  for (int i : order) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    if (!Tabulable(n)) continue;
    bool reads_region = false, ok = true;
    for (int v : n.inputs) {
      if (v < 0) continue;
      if (inside.count(v)) reads_region = true;
      else if (!ScalarFloatConst(g, v)) ok = false;
    }
    if (!ok || !reads_region) continue;
    r.nodes.push_back(i);
    in_region.insert(i);
    inside.insert(n.outputs[0]);
  }
  if (r.nodes.empty()) return std::nullopt;
  // The values the rest of the graph reads (the sources' outputs may stay: their nodes then too).
  std::set<int> exits;
  for (int i : r.nodes) {
    const int v = g.nodes()[static_cast<size_t>(i)].outputs[0];
    if (g.IsGraphOutput(v)) exits.insert(v);
    for (int c : g.Consumers(v))
      if (!in_region.count(c)) exits.insert(v);
  }
  if (exits.size() != 1) return std::nullopt;
  r.out = *exits.begin();
  const int q = g.IsGraphOutput(r.out) ? -1 : g.SoleConsumer(r.out);
  if (q >= 0) {
    const Node& qn = g.nodes()[static_cast<size_t>(q)];
    if (IsOp(qn, "QuantizeLinear") && qn.inputs.size() >= 2 && qn.inputs[0] == r.out && ScalarConst(g, qn.inputs[1]) &&
        (rewrite::InputAt(qn, 2) < 0 || ScalarConst(g, qn.inputs[2])))
      r.quantize = q;
  }
  return r;
}

// The region's values on the 256 bytes of x's type, through the reference kernels: the table.
StatusOr<Tensor> Tabulate(const Graph& g, const Region& r) {
  const DType xt = g.value(r.x).dtype;
  Tensor bytes(xt, {256});
  for (int b = 0; b < 256; ++b) static_cast<uint8_t*>(bytes.raw_data())[b] = static_cast<uint8_t>(b);
  std::map<int, Tensor> values;
  auto run = [&](const Node& n, const std::map<int, Tensor>& known) -> StatusOr<std::vector<Tensor>> {
    std::vector<Tensor> in;
    for (int v : n.inputs) {
      if (v < 0) in.emplace_back();
      else if (auto it = known.find(v); it != known.end()) in.push_back(it->second);
      else in.push_back(*ConstValue(g, v));
    }
    return RunNode(n, static_cast<int>(g.OpsetFor(n.domain)), in, Backend::kReference, 1, true);
  };
  const Node& dq = g.nodes()[static_cast<size_t>(r.sources[0])];
  WH_ASSIGN_OR_RETURN(std::vector<Tensor> deq, run(dq, {{r.x, bytes}}));
  for (int s : r.sources) values[g.nodes()[static_cast<size_t>(s)].outputs[0]] = deq[0];
  for (int i : r.nodes) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> out, run(n, values));
    if (out.empty() || !out[0].defined() || out[0].numel() != 256)
      return Internal(n.DebugName() + " did not give one value per byte");
    values[n.outputs[0]] = out[0];
  }
  if (r.quantize < 0) return values.at(r.out);
  WH_ASSIGN_OR_RETURN(std::vector<Tensor> q, run(g.nodes()[static_cast<size_t>(r.quantize)], values));
  return q[0];
}

}  // namespace

Status FuseLookupTables(Graph& g, int* count) {
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::set<int> dead, used_x;
  std::vector<Node> fused;
  for (int d : order) {
    const Node& dq = g.nodes()[static_cast<size_t>(d)];
    if (!ByteDequantize(g, dq) || used_x.count(dq.inputs[0])) continue;
    std::optional<Region> r = Grow(g, d, order);
    if (!r) continue;
    // A byte table is one vector shuffle per 32 or 64 bytes; a float one is read element by
    // element, which pays only against costly ops.
    bool costly = false;
    for (int i : r->nodes) costly |= Costly(g.nodes()[static_cast<size_t>(i)]);
    if (r->quantize < 0 && !costly) continue;
    bool taken = false;
    for (int i : r->nodes) taken |= dead.count(i) > 0;
    if (taken || (r->quantize >= 0 && dead.count(r->quantize))) continue;
    auto table = Tabulate(g, *r);
    if (!table.ok()) continue;  // an op the reference kernels refuse on these values: leave it
    used_x.insert(r->x);
    const int out = r->quantize >= 0 ? g.nodes()[static_cast<size_t>(r->quantize)].outputs[0] : r->out;
    Node lookup;
    lookup.name = g.UniqueName(g.value(out).name + "/lookup");
    lookup.op_type = "Lookup";
    lookup.domain = kWhittleDomain;
    lookup.inputs = {r->x, g.AddInitializer(g.UniqueName(g.value(out).name + "_table"), std::move(*table))};
    lookup.outputs = {out};
    fused.push_back(std::move(lookup));
    dead.insert(r->nodes.begin(), r->nodes.end());
    if (r->quantize >= 0) dead.insert(r->quantize);
  }
  if (fused.empty()) return Status::Ok();
  g.RemoveNodes(dead);
  for (Node& n : fused) g.AddNode(std::move(n));
  if (g.OpsetFor(kWhittleDomain) == 0) g.opset_imports[kWhittleDomain] = 1;
  *count += static_cast<int>(fused.size());
  return Status::Ok();
}

}  // namespace whittle
