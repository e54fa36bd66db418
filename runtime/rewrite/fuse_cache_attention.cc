#include "runtime/rewrite/fuse_cache_attention.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "lib/ir/domain.h"
#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

using rewrite::ConstInput;
using rewrite::InputAt;
using rewrite::IsOp;
using rewrite::Producer;
using rewrite::SoleConsumer;

// Dim i of value v where static inference knows it, else -1.
int64_t KnownDim(const Graph& g, int v, size_t rank, size_t i) {
  if (v < 0) return -1;
  const Value& val = g.value(v);
  if (!val.shape || val.shape->size() != rank || !(*val.shape)[i].known()) return -1;
  return (*val.shape)[i].value;
}

int Index(const Graph& g, const Node* n) { return n ? static_cast<int>(n - &g.nodes()[0]) : -1; }

// One of Attention's key/value operands traced back to the cache concatenation.
struct CacheOperand {
  int past = -1, fresh = -1, present = -1;  // Concat's inputs and output
  std::vector<int> nodes;                   // the Concat and the repeat chain, removed by the fusion
};

// Whether unsqueeze inserts exactly axis 2.
bool UnsqueezesAxis2(const Graph& g, const Node& u) {
  if (!IsOp(u, "Unsqueeze")) return false;
  std::vector<int64_t> axes;
  if (const Tensor* t = ConstInput(g, u, 1)) {
    if (t->dtype() != DType::kInt64) return false;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  } else if (InputAt(u, 1) < 0) {
    axes = u.attrs.GetInts("axes", {});
  }
  return axes.size() == 1 && (axes[0] == 2 || axes[0] == -3);
}

// operand (Attention input `slot` of node `att`) as Concat(past, fresh, axis 2), possibly through the
// grouped-query repeat of its kv_heads heads to q_heads; empty when it is anything else.
std::optional<CacheOperand> TraceCache(const Graph& g, int att, int operand, int64_t q_heads) {
  CacheOperand c;
  int v = operand;
  const Node* p = Producer(g, v);
  if (p && IsOp(*p, "Reshape") && SoleConsumer(g, v) == att) {
    const Node* e = Producer(g, p->inputs[0]);
    if (!e || !IsOp(*e, "Expand") || SoleConsumer(g, p->inputs[0]) != Index(g, p)) return std::nullopt;
    const Node* u = Producer(g, e->inputs[0]);
    if (!u || !UnsqueezesAxis2(g, *u) || SoleConsumer(g, e->inputs[0]) != Index(g, e)) return std::nullopt;
    const int present = u->inputs[0];
    const int64_t kv = KnownDim(g, present, 4, 1), d = KnownDim(g, present, 4, 3);
    // [B, kv, T, d] -> [B, kv, reps, T, d] -> [B, kv * reps, T, d] with kv * reps the query heads:
    // Hugging Face's repeat_kv. The Expand's and Reshape's dims come from computed shapes that
    // static inference may not know (the TorchScript export's Where, or a file whose value_info
    // says unknown); the dims it knows must agree. The rest is the MatMul's own constraint: the
    // query heads and head size it multiplies by are what the fused kernel takes.
    auto fits = [&](int val, size_t rank, size_t i, int64_t want) {
      if (val < 0) return false;
      const Value& x = g.value(val);
      if (x.shape && x.shape->size() != rank) return false;
      const int64_t got = KnownDim(g, val, rank, i);
      return got < 0 || got == want;
    };
    if (kv < 1 || d < 1 || q_heads % kv != 0 || !fits(e->outputs[0], 5, 1, kv) ||
        !fits(e->outputs[0], 5, 2, q_heads / kv) || !fits(e->outputs[0], 5, 4, d) || !fits(v, 4, 1, q_heads) ||
        !fits(v, 4, 3, d))
      return std::nullopt;
    c.nodes = {Index(g, p), Index(g, e), Index(g, u)};
    v = present;
    p = Producer(g, v);
  } else if (KnownDim(g, v, 4, 1) != q_heads) {
    return std::nullopt;
  }
  if (!p || !IsOp(*p, "Concat") || p->inputs.size() != 2 || p->outputs.size() != 1) return std::nullopt;
  const int64_t axis = p->attrs.GetInt("axis", 0);
  if (axis != 2 && axis != -2) return std::nullopt;
  const int past = p->inputs[0], fresh = p->inputs[1];
  if (past < 0 || fresh < 0 || std::find(g.inputs().begin(), g.inputs().end(), past) == g.inputs().end() ||
      g.value(past).is_constant() || KnownDim(g, fresh, 4, 1) != KnownDim(g, v, 4, 1) ||
      g.value(fresh).dtype != DType::kFloat32)
    return std::nullopt;
  // Nothing else may read the repeat chain; the cache itself may be read (it stays a value).
  c.past = past, c.fresh = fresh, c.present = v;
  c.nodes.push_back(Index(g, p));
  return c;
}

// A float32 scalar constant.
bool ScalarConst(const Graph& g, int v, float* c) {
  const Tensor* t = rewrite::ConstValue(g, v);
  if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1) return false;
  *c = t->data<float>()[0];
  return true;
}

// The node of value v's producer when `reader` is its sole reader.
const Node* SoleProducer(const Graph& g, int v, int reader) {
  return v >= 0 && SoleConsumer(g, v) == reader ? Producer(g, v) : nullptr;
}

// The TorchScript export's attention around Softmax node sm (opset < 23):
//   y = MatMul(Softmax(Add(Mul(MatMul(q, Transpose(k, [0, 1, 3, 2])), scale), mask)), v)
// with k and v cache operands (TraceCache; Mul by a scalar or Div, and the mask Add, optional),
// as one ai.whittle GroupedAttention(q, new_k, new_v, mask, past_k, past_v) -> (y, present_k,
// present_v) appended to *fused; the nodes it replaces into *dead. False where it is not that.
bool MatchMatMulAttention(const Graph& g, int sm_i, const std::set<int>& dead, std::vector<Node>* fused,
                          std::set<int>* new_dead) {
  const Node& sm = g.nodes()[static_cast<size_t>(sm_i)];
  if (!IsOp(sm, "Softmax") || sm.inputs.size() != 1 || sm.outputs.size() != 1) return false;
  const int64_t axis = sm.attrs.GetInt("axis", g.OpsetFor("") >= 13 ? -1 : 1);
  if (axis != -1 && axis != 3) return false;
  std::vector<int> nodes{sm_i};
  int scores = sm.inputs[0], mask = -1, reader = sm_i;
  const Node* p = SoleProducer(g, scores, reader);
  if (p && IsOp(*p, "Add") && p->inputs.size() == 2) {
    for (int k = 0; k < 2; ++k) {
      const Node* s = SoleProducer(g, p->inputs[static_cast<size_t>(k)], Index(g, p));
      if (s && (IsOp(*s, "Mul") || IsOp(*s, "Div") || IsOp(*s, "MatMul"))) {
        mask = p->inputs[static_cast<size_t>(1 - k)];
        scores = p->inputs[static_cast<size_t>(k)];
        break;
      }
    }
    if (mask < 0 || g.value(mask).dtype != DType::kFloat32) return false;
    reader = Index(g, p);
    nodes.push_back(reader);
    p = SoleProducer(g, scores, reader);
  }
  float scale = 1.f;
  if (p && (IsOp(*p, "Mul") || IsOp(*p, "Div")) && p->inputs.size() == 2) {
    float c = 0.f;
    int other = -1;
    if (ScalarConst(g, p->inputs[1], &c)) other = p->inputs[0];
    else if (IsOp(*p, "Mul") && ScalarConst(g, p->inputs[0], &c)) other = p->inputs[1];
    if (other < 0 || !(c > 0.f)) return false;
    scale = IsOp(*p, "Mul") ? c : 1.f / c;
    reader = Index(g, p);
    nodes.push_back(reader);
    scores = other;
    p = SoleProducer(g, scores, reader);
  }
  if (!p || !IsOp(*p, "MatMul") || p->inputs.size() != 2) return false;
  const int qk_i = Index(g, p);
  nodes.push_back(qk_i);
  const int q = p->inputs[0];
  const Node* kt = SoleProducer(g, p->inputs[1], qk_i);
  if (!kt || !IsOp(*kt, "Transpose") || kt->attrs.GetInts("perm", {}) != std::vector<int64_t>{0, 1, 3, 2}) return false;
  nodes.push_back(Index(g, kt));
  const int pv_i = SoleConsumer(g, sm.outputs[0]);
  if (pv_i < 0) return false;
  const Node& pv = g.nodes()[static_cast<size_t>(pv_i)];
  if (!IsOp(pv, "MatMul") || pv.inputs.size() != 2 || pv.inputs[0] != sm.outputs[0] || pv.outputs.size() != 1 ||
      pv.outputs[0] < 0)
    return false;
  nodes.push_back(pv_i);
  const int64_t q_heads = KnownDim(g, q, 4, 1);
  if (q_heads < 1 || g.value(q).dtype != DType::kFloat32) return false;
  auto k = TraceCache(g, Index(g, kt), kt->inputs[0], q_heads);
  auto v = k ? TraceCache(g, pv_i, pv.inputs[1], q_heads) : std::nullopt;
  if (!k || !v || k->past == v->past || k->present == v->present) return false;
  nodes.insert(nodes.end(), k->nodes.begin(), k->nodes.end());
  nodes.insert(nodes.end(), v->nodes.begin(), v->nodes.end());
  for (int n : nodes)
    if (dead.count(n) || new_dead->count(n)) return false;
  Node att;
  att.name = sm.name + "_grouped_attention";
  att.op_type = "GroupedAttention";
  att.domain = kWhittleDomain;
  att.inputs = {q, k->fresh, v->fresh, mask, k->past, v->past};
  att.outputs = {pv.outputs[0], k->present, v->present};
  att.attrs.Set("scale", Attribute::Float(scale));
  att.attrs.Set("_broadcast_mask", Attribute::Int(1));
  fused->push_back(std::move(att));
  new_dead->insert(nodes.begin(), nodes.end());
  return true;
}

}  // namespace

Status FuseCacheAttention(Graph& g, int* count) {
  if (g.OpsetFor("") < 23) {
    std::set<int> dead;
    std::vector<Node> fused;
    for (size_t i = 0; i < g.nodes().size(); ++i) MatchMatMulAttention(g, static_cast<int>(i), {}, &fused, &dead);
    if (fused.empty()) return Status::Ok();
    g.RemoveNodes(dead);
    if (g.OpsetFor(kWhittleDomain) == 0) g.opset_imports[kWhittleDomain] = 1;
    for (Node& n : fused) g.AddNode(std::move(n));
    *count += static_cast<int>(fused.size());
    return Status::Ok();
  }
  std::set<int> dead;
  struct Edit {
    int node;
    CacheOperand k, v;
  };
  std::vector<Edit> edits;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& a = g.nodes()[i];
    if (!IsOp(a, "Attention") || a.inputs.size() < 3 || a.inputs.size() > 4) continue;
    if (a.attrs.GetInt("is_causal", 0) != 0) continue;
    bool extra_out = false;
    for (size_t o = 1; o < a.outputs.size(); ++o) extra_out |= a.outputs[o] >= 0;
    if (extra_out || a.outputs.empty() || a.outputs[0] < 0 || a.inputs[1] < 0 || a.inputs[2] < 0) continue;
    const int64_t q_heads = KnownDim(g, a.inputs[0], 4, 1);
    if (q_heads < 1 || g.value(a.inputs[0]).dtype != DType::kFloat32) continue;
    auto k = TraceCache(g, static_cast<int>(i), a.inputs[1], q_heads);
    auto v = k ? TraceCache(g, static_cast<int>(i), a.inputs[2], q_heads) : std::nullopt;
    if (!k || !v || k->past == v->past || k->present == v->present) continue;
    bool taken = false;
    for (int n : k->nodes) taken |= dead.count(n) > 0;
    for (int n : v->nodes) taken |= dead.count(n) > 0;
    if (taken) continue;
    dead.insert(k->nodes.begin(), k->nodes.end());
    dead.insert(v->nodes.begin(), v->nodes.end());
    edits.push_back({static_cast<int>(i), *k, *v});
  }
  for (const Edit& e : edits) {
    Node& a = g.nodes()[static_cast<size_t>(e.node)];
    const int mask = InputAt(a, 3);
    a.inputs = {a.inputs[0], e.k.fresh, e.v.fresh, mask, e.k.past, e.v.past};
    a.outputs = {a.outputs[0], e.k.present, e.v.present};
  }
  g.RemoveNodes(dead);  // reindexes: each cache's producer is its Attention now
  *count += static_cast<int>(edits.size());
  return Status::Ok();
}

}  // namespace whittle
