#include "passes/prune/attention_heads.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <set>
#include <utility>

#include "lib/ops/shape_helpers.h"

namespace whittle::prune {
namespace {

// Where a head tensor keeps its heads: axis `ha` (and the head_dim axis `da`, -1 once contracted).
// Axis ha holds rep entries per head of the block (rep > 1 after repeat_kv).
struct Ann {
  int block = -1;
  int ha = -1;
  int da = -1;
  int64_t rep = 1;
};

// What one entry of a small int64 shape vector is, traced through the ops exporters compute
// shapes with: a constant, or a dim read from a Shape (times a constant), possibly "or 1" (the
// Where(Equal(x, -1), 1, x) that torch writes for expand sizes).
struct Entry {
  enum Kind { kUnknown, kConst, kShapeRead } kind = kUnknown;
  int64_t c = 0;     // kConst: the value; kShapeRead: the factor
  int tensor = -1;   // kShapeRead: whose dim
  int64_t axis = -1;
  bool or_one = false;
};

bool IsDefaultDomain(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

const std::set<std::string>& HeadwiseUnaryOps() {
  static const std::set<std::string> ops = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Elu", "Gelu",
                                            "Erf", "Exp", "Identity", "Dropout", "Cast", "Neg", "Abs"};
  return ops;
}

class Finder {
 public:
  explicit Finder(const Graph& g) : g_(g), ann_(g.values().size()) {}

  std::vector<HeadBlock> Run() {
    auto order = g_.TopologicalOrder();
    if (!order.ok()) return {};
    for (int ni : *order) Visit(ni);
    // A head tensor may be a graph output only as the present half of a KV cache (the block also
    // reads a past input); its declared dims then follow the pruning like the past's.
    std::set<int> cached;
    for (const PendingIo& io : io_) cached.insert(Root(io.block));
    for (int out : g_.outputs()) {
      if (!ann_[static_cast<size_t>(out)]) continue;
      const Ann& a = *ann_[static_cast<size_t>(out)];
      if (!cached.count(Root(a.block))) Fail(a, "a head tensor is a graph output");
      else io_.push_back(PendingIo{out, a.ha, a.block, a.rep});
    }
    // Units of each root: the largest count that divides every member's heads (2 for 6 query
    // heads sharing 2 key/value heads; the head count itself in multi-head attention).
    std::map<int, int64_t> units;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      int64_t& u = units[Root(static_cast<int>(b))];
      u = std::gcd(u, blocks_[b].heads);
    }
    // Merge unioned blocks into their roots.
    std::map<int, HeadBlock> roots;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      const int root = Root(static_cast<int>(b));
      HeadBlock& r = roots[root];
      const HeadBlock& s = blocks_[b];
      r.heads = units[root];
      for (int p : s.producers)
        if (std::find(r.producers.begin(), r.producers.end(), p) == r.producers.end()) r.producers.push_back(p);
      r.outer.insert(s.outer.begin(), s.outer.end());
      for (const auto& [p, hd] : s.head_dim) {
        r.head_dim[p] = hd * (s.heads / r.heads);
        r.unit_heads[p] = s.heads / r.heads;
      }
      r.splits.insert(r.splits.end(), s.splits.begin(), s.splits.end());
      r.merges.insert(r.merges.end(), s.merges.begin(), s.merges.end());
      if (r.why_not.empty()) r.why_not = s.why_not;
    }
    for (const PendingIo& io : io_) {
      HeadBlock& r = roots[Root(io.block)];
      r.io.push_back(HeadIo{io.value, io.axis, blocks_[static_cast<size_t>(io.block)].heads * io.rep / r.heads});
    }
    std::vector<HeadBlock> out;
    for (auto& [root, b] : roots) {
      if (b.merges.empty() && b.why_not.empty()) b.why_not = "the heads are never merged back into one axis";
      if (b.heads < 2 && b.why_not.empty()) b.why_not = "its heads form one group (they share one key/value head)";
      out.push_back(std::move(b));
    }
    return out;
  }

 private:
  int Rank(int id) const {
    const Value& v = g_.value(id);
    if (v.initializer) return v.initializer->rank();
    if (v.shape) return static_cast<int>(v.shape->size());
    return v.observed ? static_cast<int>(v.observed->size()) : -1;
  }
  // A dim as inferred, else as observed on one sample (see the header).
  Dim KnownDim(int id, int axis) const {
    const int64_t v = KnownDimValue(g_, id, axis);
    return v >= 0 ? Dim(v) : Dim();
  }
  // Whether a reshape keeps leading dim d of its input: the same dim (value or symbol) in and
  // out, or a target whose entry d copies it (0) or reads it from a Shape of a tensor whose dim d
  // is the input's.
  bool KeepsLeadingDim(const Node& n, int d) const {
    const int in = n.inputs[0];
    if (SameDim(DimOf(in, d), DimOf(n.outputs[0], d))) return true;
    if (n.inputs.size() < 2 || n.inputs[1] < 0) return false;
    const int64_t want = KnownDimValue(g_, in, d);
    if (want < 0) return false;
    if (auto c = ConstInts(n, 1))
      return static_cast<size_t>(d) < c->size() && (*c)[static_cast<size_t>(d)] == 0 && !n.attrs.GetInt("allowzero", 0);
    const Value& tv = g_.value(n.inputs[1]);
    if (tv.producer < 0) return false;
    const Node& cat = g_.nodes()[static_cast<size_t>(tv.producer)];
    if (cat.op_type != "Concat" || !IsDefaultDomain(cat)) return false;
    int64_t at = 0;  // first target entry of the current part
    for (int part : cat.inputs) {
      const int64_t len = part >= 0 && Rank(part) == 1 ? KnownDimValue(g_, part, 0) : -1;
      if (len < 0) return false;
      if (d < at + len) return len == 1 && ShapeEntryOf(part) == std::make_pair(want, static_cast<int64_t>(d));
      at += len;
    }
    return false;
  }
  // A one-element value read from a Shape: (that tensor's dim there, the axis); (-1, -1) otherwise.
  std::pair<int64_t, int64_t> ShapeEntryOf(int v) const {
    const Entry e = TraceEntry(v, 0);
    if (e.kind != Entry::kShapeRead || e.c != 1 || e.or_one) return {-1, -1};
    return {KnownDimValue(g_, e.tensor, static_cast<int>(e.axis)), e.axis};
  }
  Dim DimOf(int id, int axis) const {
    const Value& v = g_.value(id);
    if (v.initializer) return Dim(v.initializer->dim(axis));
    if (!v.shape || axis < 0 || axis >= static_cast<int>(v.shape->size())) return Dim();
    return (*v.shape)[static_cast<size_t>(axis)];
  }
  static bool SameDim(const Dim& a, const Dim& b) { return a == b && (a.known() || !a.param.empty()); }
  std::optional<std::vector<int64_t>> ConstInts(const Node& n, size_t slot) const {
    const Tensor* t = g_.ConstInput(n, slot);
    if (!t || (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)) return std::nullopt;
    return ToInt64Vector(*t);
  }
  int Root(int b) const {
    while (parent_[static_cast<size_t>(b)] != b) b = parent_[static_cast<size_t>(b)];
    return b;
  }
  void Union(int a, int b) {
    a = Root(a);
    b = Root(b);
    if (a != b) parent_[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
  void Fail(const Ann& a, const std::string& why) {
    std::string& w = blocks_[static_cast<size_t>(Root(a.block))].why_not;
    if (w.empty()) w = why;
  }
  void Set(int value, Ann a) {
    if (value >= 0) ann_[static_cast<size_t>(value)] = a;
  }
  // Entries along a head tensor's head axis.
  int64_t Entries(const Ann& a) const { return blocks_[static_cast<size_t>(a.block)].heads * a.rep; }
  // Two head tensors meet: their head axes must pair entry by entry.
  bool SameEntries(const Ann& a, const Ann& b) const { return Entries(a) == Entries(b); }
  // v holds the same entries as a at its head axis: annotated, in the same block union.
  bool IsHeadsOf(int v, int64_t axis, const Ann& a) {
    if (v < 0 || !ann_[static_cast<size_t>(v)]) return false;
    const Ann& t = *ann_[static_cast<size_t>(v)];
    return t.ha == axis && Root(t.block) == Root(a.block) && SameEntries(t, a);
  }

  // Entry e of the int64 vector (or scalar) v; see Entry.
  Entry TraceEntry(int v, int64_t e, int depth = 0) const {
    Entry none;
    if (v < 0 || depth > 16 || e < 0) return none;
    const Value& val = g_.value(v);
    if (val.initializer) {
      const Tensor& t = *val.initializer;
      if ((t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32) || t.rank() > 1) return none;
      const std::vector<int64_t> xs = ToInt64Vector(t);
      const size_t i = t.rank() == 0 ? 0 : static_cast<size_t>(e);
      if (i >= xs.size()) return none;
      Entry c;
      c.kind = Entry::kConst;
      c.c = xs[i];
      return c;
    }
    if (val.producer < 0) return none;
    const Node& p = g_.nodes()[static_cast<size_t>(val.producer)];
    if (!IsDefaultDomain(p) || p.inputs.empty()) return none;
    const std::string& op = p.op_type;
    // Scalars and one-element vectors broadcast: their entry is 0.
    auto at = [&](int in) { return Rank(in) == 0 || KnownDimValue(g_, in, 0) == 1 ? 0 : e; };
    if (op == "Shape") {
      Entry s;
      s.kind = Entry::kShapeRead;
      s.c = 1;
      s.tensor = p.inputs[0];
      int64_t start = p.attrs.GetInt("start", 0);
      const int r = Rank(p.inputs[0]);
      if (start < 0) start += r;
      s.axis = start + e;
      return r >= 0 && s.axis < r ? s : none;
    }
    if (op == "Concat") {
      int64_t off = 0;
      for (int part : p.inputs) {
        const int64_t len = part < 0 ? -1 : Rank(part) == 0 ? 1 : KnownDimValue(g_, part, 0);
        if (len < 0) return none;
        if (e < off + len) return TraceEntry(part, e - off, depth + 1);
        off += len;
      }
      return none;
    }
    if (op == "Unsqueeze" || op == "Squeeze" || op == "Cast" || op == "Identity" || op == "Reshape")
      return Rank(p.inputs[0]) <= 1 ? TraceEntry(p.inputs[0], at(p.inputs[0]), depth + 1) : none;
    if (op == "Slice") {  // the plain form: constant starts/ends, no axes or steps
      auto starts = ConstInts(p, 1), ends = ConstInts(p, 2);
      if (p.inputs.size() > 3 || !starts || !ends || starts->size() != 1 || ends->size() != 1 || (*starts)[0] < 0 ||
          (*ends)[0] <= (*starts)[0] + e)
        return none;
      return TraceEntry(p.inputs[0], (*starts)[0] + e, depth + 1);
    }
    if (op == "Gather") {
      if (p.attrs.GetInt("axis", 0) != 0 || p.inputs.size() < 2) return none;
      auto idx = ConstInts(p, 1);
      if (!idx || idx->empty()) return none;
      int64_t i = (*idx)[Rank(p.inputs[1]) == 0 ? 0 : static_cast<size_t>(std::min<int64_t>(e, static_cast<int64_t>(idx->size()) - 1))];
      if (Rank(p.inputs[1]) == 1 && e >= static_cast<int64_t>(idx->size())) return none;
      if (i < 0) {
        const int64_t len = KnownDimValue(g_, p.inputs[0], 0);
        if (len < 0) return none;
        i += len;
      }
      return TraceEntry(p.inputs[0], i, depth + 1);
    }
    if (op == "Mul" && p.inputs.size() == 2) {
      Entry a = TraceEntry(p.inputs[0], at(p.inputs[0]), depth + 1);
      Entry b = TraceEntry(p.inputs[1], at(p.inputs[1]), depth + 1);
      if (a.kind == Entry::kConst) std::swap(a, b);
      if (b.kind != Entry::kConst || a.kind == Entry::kUnknown || a.or_one) return none;
      a.c *= b.c;
      return a;
    }
    if (op == "Where" && p.inputs.size() == 3) {
      Entry a = TraceEntry(p.inputs[1], at(p.inputs[1]), depth + 1);
      Entry b = TraceEntry(p.inputs[2], at(p.inputs[2]), depth + 1);
      if (a.kind == Entry::kConst && a.c == 1) std::swap(a, b);
      if (b.kind != Entry::kConst || b.c != 1 || a.kind == Entry::kUnknown) return none;
      a.or_one = true;
      return a;
    }
    if (op == "ConstantOfShape") {
      const Attribute* va = p.attrs.Find("value");
      if (!va || va->type != AttrType::kTensor || va->t.numel() != 1) return none;
      if (va->t.dtype() != DType::kInt64 && va->t.dtype() != DType::kInt32) return none;
      Entry c;
      c.kind = Entry::kConst;
      c.c = ToInt64Vector(va->t)[0];
      return c;
    }
    return none;
  }

  // The past input behind a cache Concat's operand: a graph input, through Identity or a Concat of
  // one input (torch writes one per first-layer cache). -1 when it is anything else.
  int PastInput(int v) const {
    for (int hops = 0; hops < 4 && v >= 0; ++hops) {
      const Value& val = g_.value(v);
      if (val.producer < 0) {
        const auto& ins = g_.inputs();
        return !val.initializer && std::find(ins.begin(), ins.end(), v) != ins.end() ? v : -1;
      }
      const Node& p = g_.nodes()[static_cast<size_t>(val.producer)];
      if (!IsDefaultDomain(p) || p.inputs.size() != 1 || (p.op_type != "Identity" && p.op_type != "Concat")) return -1;
      v = p.inputs[0];
    }
    return -1;
  }
  // Whether every reader of a past input (and of the Identity/Concat copies on its way) other
  // than `concat` is a Shape: the dims it reads then follow the pruned cache.
  bool OnlyShapesRead(int v, int concat) const {
    for (int c : g_.Consumers(v)) {
      if (c == concat) continue;
      const Node& n = g_.nodes()[static_cast<size_t>(c)];
      if (!IsDefaultDomain(n)) return false;
      if (n.op_type == "Shape") continue;
      if ((n.op_type == "Identity" || n.op_type == "Concat") && n.inputs.size() == 1 && !n.outputs.empty() &&
          !g_.IsGraphOutput(n.outputs[0]) && OnlyShapesRead(n.outputs[0], concat))
        continue;
      return false;
    }
    return true;
  }

  // The projection behind a value: Gemm/MatMul with a constant weight, optionally + a constant.
  int Projection(int value) const {
    int p = g_.value(value).producer;
    if (p < 0) return -1;
    const Node* n = &g_.nodes()[static_cast<size_t>(p)];
    if (IsDefaultDomain(*n) && n->op_type == "Add" && n->inputs.size() == 2) {
      int other = g_.value(n->inputs[0]).initializer ? n->inputs[1] : g_.value(n->inputs[1]).initializer ? n->inputs[0] : -1;
      if (other < 0 || g_.SoleConsumer(other) != p) return -1;
      p = g_.value(other).producer;
      if (p < 0) return -1;
      n = &g_.nodes()[static_cast<size_t>(p)];
    }
    if (!IsDefaultDomain(*n) || (n->op_type != "MatMul" && n->op_type != "Gemm")) return -1;
    if (n->inputs.size() < 2 || !g_.ConstInput(*n, 1)) return -1;
    return p;
  }

  // A Reshape that splits a projection's last axis into [..., F..., heads, head_dim].
  bool TrySplit(int ni, const Node& n) {
    if (n.op_type != "Reshape" || n.inputs.size() < 2 || n.outputs.empty()) return false;
    const int in = n.inputs[0], out = n.outputs[0];
    const int ri = Rank(in), ro = Rank(out);
    if (ri < 1 || ro < ri + 1) return false;
    for (int d = 0; d < ri - 1; ++d)
      if (!KeepsLeadingDim(n, d)) return false;
    const Dim last = KnownDim(in, ri - 1);
    if (!last.known()) return false;
    int64_t prod = 1;
    for (int d = ri - 1; d < ro; ++d) {
      Dim x = KnownDim(out, d);
      if (!x.known() || x.value < 1) return false;
      prod *= x.value;
    }
    const int64_t heads = KnownDim(out, ro - 2).value, head_dim = KnownDim(out, ro - 1).value;
    if (prod != last.value || heads < 2) return false;
    const int proj = Projection(in);
    if (proj < 0) return false;
    HeadBlock b;
    b.heads = heads;
    b.producers.push_back(proj);
    b.outer[proj] = last.value / (heads * head_dim);
    b.head_dim[proj] = head_dim;
    b.splits.push_back(ni);
    blocks_.push_back(std::move(b));
    parent_.push_back(static_cast<int>(parent_.size()));
    Set(out, Ann{static_cast<int>(blocks_.size()) - 1, ro - 2, ro - 1});
    return true;
  }

  // A Reshape that merges the trailing [heads, head_dim] axes into one, keeping the others.
  bool TryMerge(int ni, const Node& n, const Ann& a) {
    const int in = n.inputs[0], out = n.outputs[0];
    const int ri = Rank(in), ro = Rank(out);
    if (ri < 2 || ro != ri - 1 || a.ha != ri - 2 || a.da != ri - 1) return false;
    for (int d = 0; d < ri - 2; ++d)
      if (!KeepsLeadingDim(n, d)) return false;
    const Dim h = KnownDim(in, ri - 2), hd = KnownDim(in, ri - 1), m = KnownDim(out, ro - 1);
    if (!h.known() || !hd.known() || !m.known() || m.value != h.value * hd.value) return false;
    blocks_[static_cast<size_t>(Root(a.block))].merges.push_back(ni);
    return true;
  }

  void Visit(int ni) {
    const Node& n = g_.nodes()[static_cast<size_t>(ni)];
    std::vector<int> slots;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.inputs[i] >= 0 && ann_[static_cast<size_t>(n.inputs[i])]) slots.push_back(static_cast<int>(i));
    if (slots.empty()) {
      if (IsDefaultDomain(n)) TrySplit(ni, n);
      return;
    }
    const Ann a = *ann_[static_cast<size_t>(n.inputs[static_cast<size_t>(slots[0])])];
    for (int s : slots) Union(a.block, ann_[static_cast<size_t>(n.inputs[static_cast<size_t>(s)])]->block);
    const std::string& op = n.op_type;
    const std::string who = n.DebugName();
    auto fail = [&](const std::string& why) { Fail(a, who + " " + why); };
    if (!IsDefaultDomain(n)) return fail("is an op the pass cannot follow");
    if (n.outputs.empty() || n.outputs[0] < 0) return fail("has no output");
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (op != "Split" && n.outputs[i] >= 0 && (!g_.Consumers(n.outputs[i]).empty() || g_.IsGraphOutput(n.outputs[i])))
        return fail("has a second output that is used");
    const int in = n.inputs[static_cast<size_t>(slots[0])];
    const int r = Rank(in), ro = Rank(n.outputs[0]);
    if (r < 0 || ro < 0) return fail("has an unknown rank");
    const bool data_only = slots.size() == 1 && slots[0] == 0;

    if (HeadwiseUnaryOps().count(op)) {
      if (!data_only) return fail("reads the heads as a parameter");
      return Set(n.outputs[0], a);
    }
    if (op == "Transpose") {
      std::vector<int64_t> perm = n.attrs.GetInts("perm");
      if (perm.empty())
        for (int d = r - 1; d >= 0; --d) perm.push_back(d);
      Ann o = a;
      for (size_t i = 0; i < perm.size(); ++i) {
        if (perm[i] == a.ha) o.ha = static_cast<int>(i);
        if (perm[i] == a.da) o.da = static_cast<int>(i);
      }
      return Set(n.outputs[0], o);
    }
    if (op == "Split" || op == "Squeeze" || op == "Unsqueeze" || op == "Gather" || op == "Slice") {
      if (!data_only) return fail("reads the heads as indices");
      return VisitAxisOp(n, a, r, ro, fail);
    }
    if (op == "Softmax" || op == "LogSoftmax") {
      int64_t axis = n.attrs.GetInt("axis", g_.OpsetFor("") >= 13 ? -1 : 1);
      if (axis < 0) axis += r;
      const bool mixes = g_.OpsetFor("") >= 13 ? axis == a.ha : axis <= a.ha;
      if (mixes) return fail("normalizes across heads");
      return Set(n.outputs[0], a);
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return VisitBroadcast(n, slots, ro, fail);
    if (op == "MatMul") {
      if (slots.size() != 2) return fail("multiplies one head tensor by a tensor without heads");
      const Ann b = *ann_[static_cast<size_t>(n.inputs[1])];
      const int rb = Rank(n.inputs[1]);
      if (rb < 3 || r < 3 || a.ha >= r - 2 || b.ha >= rb - 2 || r - a.ha != rb - b.ha)
        return fail("does not keep the heads on a batch axis");
      if (!SameEntries(a, b)) return fail("multiplies head tensors of different head counts");
      Ann o{a.block, ro - (r - a.ha), -1, a.rep};
      const bool a_rows = a.da == r - 2, a_contract = a.da == r - 1;
      const bool b_cols = b.da == rb - 1, b_contract = b.da == rb - 2;
      if (a_rows && !b_cols) o.da = ro - 2;
      else if (b_cols && !a_rows) o.da = ro - 1;
      else if (a_rows && b_cols) return fail("keeps two head_dim axes");
      if ((a.da >= 0 && !a_rows && !a_contract) || (b.da >= 0 && !b_cols && !b_contract))
        return fail("reads head_dim on a batch axis");
      return Set(n.outputs[0], o);
    }
    if (op == "Reshape") {
      if (!data_only) return fail("reads the heads as a shape");
      if (TryMerge(ni, n, a)) return;
      if (TryRepeat(n, a)) return;
      return fail("reshapes the heads other than merging [heads, head_dim] or repeating key/value heads");
    }
    // The dims a Shape reads are computed from the pruned tensor at run time.
    if (op == "Shape") return;
    if (op == "Concat") return VisitConcat(n, slots, a, r, fail);
    if (op == "Expand") {
      if (!data_only) return fail("reads the heads as a shape");
      const int oha = a.ha + (ro - r), oda = a.da < 0 ? -1 : a.da + (ro - r);
      if (KnownDimValue(g_, n.outputs[0], oha) != KnownDimValue(g_, in, a.ha) ||
          (a.da >= 0 && KnownDimValue(g_, n.outputs[0], oda) != KnownDimValue(g_, in, a.da)))
        return fail("expands the heads (" + std::to_string(KnownDimValue(g_, in, a.ha)) + " to " +
                    std::to_string(KnownDimValue(g_, n.outputs[0], oha)) + ")");
      const Entry e = TraceEntry(n.inputs[1], oha);
      const bool keeps = (e.kind == Entry::kConst && e.c == 1) ||
                         (e.kind == Entry::kShapeRead && e.c == 1 && IsHeadsOf(e.tensor, e.axis, a));
      if (!keeps) return fail("has a head count in its shape that is not read from the heads");
      return Set(n.outputs[0], Ann{a.block, oha, oda, a.rep});
    }
    return fail("is an op the head analysis cannot follow (" + op + ")");
  }

  // Concat along an axis other than the heads: of head tensors (rotate_half joins two halves of
  // head_dim), or of a KV cache's past input and the new keys/values.
  template <class FailFn>
  void VisitConcat(const Node& n, const std::vector<int>& slots, const Ann& a, int r, const FailFn& fail) {
    int64_t axis = n.attrs.GetInt("axis", 0);
    if (axis < 0) axis += r;
    if (axis == a.ha) return fail("concatenates along the heads");
    for (int s : slots) {
      const Ann& b = *ann_[static_cast<size_t>(n.inputs[static_cast<size_t>(s)])];
      if (b.ha != a.ha || b.da != a.da || !SameEntries(a, b)) return fail("concatenates different head layouts");
    }
    std::vector<PendingIo> past;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int id = n.inputs[i];
      if (id < 0 || ann_[static_cast<size_t>(id)]) continue;
      const int in = PastInput(id);
      if (in < 0 || Rank(in) != r || KnownDimValue(g_, in, a.ha) != Entries(a))
        return fail("concatenates the heads with '" + g_.value(id).name + "', which is not a cache input with them");
      if (!OnlyShapesRead(in, g_.value(n.outputs[0]).producer))
        return fail("reads the cache input '" + g_.value(in).name + "' other than by its shape");
      past.push_back(PendingIo{in, a.ha, a.block, a.rep});
    }
    io_.insert(io_.end(), past.begin(), past.end());
    Set(n.outputs[0], a);
  }

  // repeat_kv's Reshape [..., kv_heads, rep, seq, head_dim] -> [..., kv_heads * rep, seq, head_dim]:
  // the head axis and the one after it merge; its shape entry is the heads' Shape read times rep.
  bool TryRepeat(const Node& n, const Ann& a) {
    const int in = n.inputs[0], out = n.outputs[0];
    const int ri = Rank(in), ro = Rank(out);
    if (ro != ri - 1 || a.ha + 1 >= ri || a.da == a.ha + 1) return false;
    const int64_t k = KnownDimValue(g_, in, a.ha + 1);
    if (k < 1 || KnownDimValue(g_, out, a.ha) != Entries(a) * k) return false;
    for (int d = 0; d < ro; ++d) {
      if (d == a.ha) continue;
      const int64_t x = KnownDimValue(g_, out, d), y = KnownDimValue(g_, in, d < a.ha ? d : d + 1);
      if (x < 0 || x != y) return false;
    }
    const Entry e = TraceEntry(n.inputs[1], a.ha);
    if (e.kind != Entry::kShapeRead || e.or_one || e.c != k || !IsHeadsOf(e.tensor, e.axis, a)) return false;
    Set(out, Ann{a.block, a.ha, a.da < 0 ? -1 : a.da > a.ha ? a.da - 1 : a.da, a.rep * k});
    return true;
  }

  template <class FailFn>
  void VisitAxisOp(const Node& n, const Ann& a, int r, int ro, const FailFn& fail) {
    const std::string& op = n.op_type;
    auto norm = [](int64_t ax, int rank) { return ax < 0 ? ax + rank : ax; };
    if (op == "Split") {
      int64_t axis = norm(n.attrs.GetInt("axis", 0), r);
      if (axis == a.ha || axis == a.da) return fail("splits the heads");
      for (int o : n.outputs) Set(o, a);
      return;
    }
    if (op == "Slice") {
      // Axes from the attribute (opset < 10) or the constant fourth input; absent: 0..len(starts)-1.
      std::vector<int64_t> axes = n.attrs.GetInts("axes");
      if (n.inputs.size() > 3 && n.inputs[3] >= 0) {
        auto c = ConstInts(n, 3);
        if (!c) return fail("slices axes that are not constant");
        axes = *c;
      } else if (axes.empty()) {
        std::vector<int64_t> starts = n.attrs.GetInts("starts");
        if (n.inputs.size() > 1) {
          const int rs = Rank(n.inputs[1]);
          const Dim len = rs == 1 ? DimOf(n.inputs[1], 0) : Dim();
          if (!len.known()) return fail("slices an unknown number of axes");
          starts.assign(static_cast<size_t>(len.value), 0);
        }
        for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
      }
      // Slicing head_dim keeps each head's data in its head (rotary embeddings' rotate_half).
      for (int64_t x : axes)
        if (norm(x, r) == a.ha) return fail("slices the heads");
      return Set(n.outputs[0], a);
    }
    if (op == "Gather") {
      int64_t axis = norm(n.attrs.GetInt("axis", 0), r);
      if (axis == a.ha || axis == a.da) return fail("gathers along the heads");
      const int ri = Rank(n.inputs[1]);
      if (ri < 0) return fail("has indices of unknown rank");
      // Axis `axis` is replaced by the indices' axes.
      auto shift = [&](int x) { return x < 0 ? -1 : x < axis ? x : x - 1 + ri; };
      return Set(n.outputs[0], Ann{a.block, shift(a.ha), shift(a.da), a.rep});
    }
    // Squeeze / Unsqueeze: axes from the attribute (opset < 13) or the constant second input.
    std::vector<int64_t> axes = n.attrs.GetInts("axes");
    if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
      auto c = ConstInts(n, 1);
      if (!c) return fail("has axes that are not constant");
      axes = *c;
    }
    if (op == "Squeeze") {
      if (axes.empty()) {
        for (int d = 0; d < r; ++d) {
          Dim x = DimOf(n.inputs[0], d);
          if (!x.known()) return fail("squeezes dims that are not static");
          if (x.value == 1) axes.push_back(d);
        }
      }
      std::set<int64_t> sq;
      for (int64_t x : axes) sq.insert(norm(x, r));
      if (sq.count(a.ha) || sq.count(a.da)) return fail("squeezes the heads");
      auto shift = [&](int x) {
        if (x < 0) return -1;
        int s = 0;
        for (int64_t q : sq) s += q < x;
        return x - s;
      };
      return Set(n.outputs[0], Ann{a.block, shift(a.ha), shift(a.da), a.rep});
    }
    // Unsqueeze: output axis list; the input's axes fill the positions not inserted, in order.
    std::set<int64_t> ins;
    for (int64_t x : axes) ins.insert(norm(x, ro));
    std::vector<int> old_to_new;
    for (int d = 0; d < ro; ++d)
      if (!ins.count(d)) old_to_new.push_back(d);
    if (static_cast<int>(old_to_new.size()) != r) return fail("has inconsistent axes");
    auto map = [&](int x) { return x < 0 ? -1 : old_to_new[static_cast<size_t>(x)]; };
    Set(n.outputs[0], Ann{a.block, map(a.ha), map(a.da), a.rep});
  }

  template <class FailFn>
  void VisitBroadcast(const Node& n, const std::vector<int>& slots, int ro, const FailFn& fail) {
    std::optional<Ann> out;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int id = n.inputs[i];
      if (id < 0) continue;
      const int r = Rank(id);
      if (r < 0) return fail("has an operand of unknown rank");
      if (std::find(slots.begin(), slots.end(), static_cast<int>(i)) == slots.end()) continue;
      const int lead = ro - r;
      const Ann& x = *ann_[static_cast<size_t>(id)];
      Ann o{x.block, x.ha + lead, x.da < 0 ? -1 : x.da + lead, x.rep};
      if (out && (out->ha != o.ha || out->da != o.da)) return fail("combines head tensors on different axes");
      if (out && !SameEntries(*out, o)) return fail("combines head tensors of different head counts");
      out = o;
    }
    // Operands without heads must broadcast over the head axis.
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const int id = n.inputs[i];
      if (id < 0 || std::find(slots.begin(), slots.end(), static_cast<int>(i)) != slots.end()) continue;
      const int axis = out->ha - (ro - Rank(id));
      if (axis < 0) continue;
      Dim x = KnownDim(id, axis);  // a computed mask: [batch, 1, seq, seq] as observed
      if (!(x.known() && x.value == 1))
        return fail("combines the heads with '" + g_.value(id).name + "', which does not broadcast over them");
    }
    Set(n.outputs[0], *out);
  }

  struct PendingIo {
    int value = -1;
    int axis = -1;
    int block = -1;
    int64_t rep = 1;
  };

  const Graph& g_;
  std::vector<std::optional<Ann>> ann_;
  std::vector<HeadBlock> blocks_;
  std::vector<int> parent_;
  std::vector<PendingIo> io_;
};

}  // namespace

std::vector<HeadBlock> FindHeadBlocks(const Graph& g) { return Finder(g).Run(); }

int64_t KnownDimValue(const Graph& g, int id, int axis) {
  const Value& v = g.value(id);
  if (v.initializer) return axis >= 0 && axis < v.initializer->rank() ? v.initializer->dim(axis) : -1;
  if (v.shape && axis >= 0 && axis < static_cast<int>(v.shape->size()) && (*v.shape)[static_cast<size_t>(axis)].known())
    return (*v.shape)[static_cast<size_t>(axis)].value;
  if (v.observed && axis >= 0 && axis < static_cast<int>(v.observed->size())) return (*v.observed)[static_cast<size_t>(axis)];
  return -1;
}

}  // namespace whittle::prune
