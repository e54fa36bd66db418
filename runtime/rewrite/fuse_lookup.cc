#include "runtime/rewrite/fuse_lookup.h"

#include <algorithm>
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

// Who reads each value (by value id) and each node's place in a topological order, made once.
struct GraphIndex {
  std::vector<std::vector<int>> readers;
  std::vector<int> position;
};

GraphIndex IndexGraph(const Graph& g, const std::vector<int>& order) {
  GraphIndex idx;
  idx.readers.resize(g.values().size());
  idx.position.resize(g.nodes().size());
  for (size_t k = 0; k < order.size(); ++k) {
    const int i = order[k];
    idx.position[static_cast<size_t>(i)] = static_cast<int>(k);
    for (int v : g.nodes()[static_cast<size_t>(i)].inputs)
      if (v >= 0) idx.readers[static_cast<size_t>(v)].push_back(i);  // a node reading v twice is listed twice
  }
  return idx;
}

// The region the DequantizeLinear nodes `sources` (of one tensor, the same parameters) start, or
// nullopt when it has no op or more than one value read outside it.
std::optional<Region> Grow(const Graph& g, const GraphIndex& idx, const std::vector<int>& sources) {
  Region r;
  r.x = g.nodes()[static_cast<size_t>(sources[0])].inputs[0];
  r.sources = sources;
  std::set<int> inside;  // values computed from x alone
  for (int s : sources) inside.insert(g.nodes()[static_cast<size_t>(s)].outputs[0]);
  // The element-wise ops reachable from the sources through such ops, in topological order; each
  // joins when all its other operands are scalar constants.
  std::set<int> seen;
  std::vector<int> candidates, frontier(inside.begin(), inside.end());
  while (!frontier.empty()) {
    const int v = frontier.back();
    frontier.pop_back();
    for (int c : idx.readers[static_cast<size_t>(v)]) {
      const Node& n = g.nodes()[static_cast<size_t>(c)];
      if (!Tabulable(n) || !seen.insert(c).second) continue;
      candidates.push_back(c);
      frontier.push_back(n.outputs[0]);
    }
  }
  std::sort(candidates.begin(), candidates.end(), [&](int a, int b) {
    return idx.position[static_cast<size_t>(a)] < idx.position[static_cast<size_t>(b)];
  });
  std::set<int> in_region;
  for (int i : candidates) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
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
    for (int c : idx.readers[static_cast<size_t>(v)])
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
  const GraphIndex idx = IndexGraph(g, order);
  // The DequantizeLinear nodes of each byte tensor, grouped by their parameters.
  std::vector<std::vector<int>> groups;
  for (int d : order) {
    const Node& dq = g.nodes()[static_cast<size_t>(d)];
    if (!ByteDequantize(g, dq)) continue;
    auto same = std::find_if(groups.begin(), groups.end(), [&](const std::vector<int>& grp) {
      const Node& first = g.nodes()[static_cast<size_t>(grp[0])];
      return first.inputs[0] == dq.inputs[0] && SameParams(g, first, dq);
    });
    if (same == groups.end()) groups.push_back({d});
    else same->push_back(d);
  }
  std::set<int> dead;
  std::vector<Node> fused;
  for (const std::vector<int>& sources : groups) {
    std::optional<Region> r = Grow(g, idx, sources);
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
