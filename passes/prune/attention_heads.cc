#include "passes/prune/attention_heads.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "lib/ops/shape_helpers.h"

namespace whittle::prune {
namespace {

// Where a head tensor keeps its heads: axis `ha` (and the head_dim axis `da`, -1 once contracted).
struct Ann {
  int block = -1;
  int ha = -1;
  int da = -1;
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
    for (int out : g_.outputs())
      if (ann_[static_cast<size_t>(out)]) Fail(*ann_[static_cast<size_t>(out)], "a head tensor is a graph output");
    // Merge unioned blocks into their roots.
    std::map<int, HeadBlock> roots;
    for (size_t b = 0; b < blocks_.size(); ++b) {
      HeadBlock& r = roots[Root(static_cast<int>(b))];
      const HeadBlock& s = blocks_[b];
      if (r.heads == 0) r.heads = s.heads;
      if (r.heads != s.heads && r.why_not.empty()) r.why_not = "blocks with different head counts meet";
      for (int p : s.producers)
        if (std::find(r.producers.begin(), r.producers.end(), p) == r.producers.end()) r.producers.push_back(p);
      r.outer.insert(s.outer.begin(), s.outer.end());
      r.head_dim.insert(s.head_dim.begin(), s.head_dim.end());
      r.splits.insert(r.splits.end(), s.splits.begin(), s.splits.end());
      r.merges.insert(r.merges.end(), s.merges.begin(), s.merges.end());
      if (r.why_not.empty()) r.why_not = s.why_not;
    }
    std::vector<HeadBlock> out;
    for (auto& [root, b] : roots) {
      if (b.merges.empty() && b.why_not.empty()) b.why_not = "the heads are never merged back into one axis";
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
  // A one-element value read from a Shape: (that tensor's dim there, the axis), through
  // Unsqueeze/Squeeze/Cast and a Gather or a one-wide Slice; (-1, -1) otherwise.
  std::pair<int64_t, int64_t> ShapeEntryOf(int v) const {
    const std::pair<int64_t, int64_t> none{-1, -1};
    int64_t axis = -1;
    for (int hops = 0; hops < 6; ++hops) {
      const Value& val = g_.value(v);
      if (val.producer < 0) return none;
      const Node& p = g_.nodes()[static_cast<size_t>(val.producer)];
      if (!IsDefaultDomain(p) || p.inputs.empty() || p.inputs[0] < 0) return none;
      if (p.op_type == "Shape") {
        if (axis < 0 || p.attrs.Has("start") || p.attrs.Has("end")) return none;
        return {KnownDimValue(g_, p.inputs[0], static_cast<int>(axis)), axis};
      }
      if (p.op_type == "Gather" || p.op_type == "Slice") {
        if (axis >= 0) return none;
        auto idx = ConstInts(p, 1);
        if (!idx || idx->size() != 1 || (*idx)[0] < 0) return none;
        if (p.op_type == "Slice") {
          auto ends = ConstInts(p, 2);
          if (!ends || ends->size() != 1 || (*ends)[0] != (*idx)[0] + 1) return none;
          if (p.inputs.size() > 3) return none;  // axes or steps: keep to the plain form
        } else if (p.attrs.GetInt("axis", 0) != 0) {
          return none;
        }
        axis = (*idx)[0];
      } else if (p.op_type != "Unsqueeze" && p.op_type != "Squeeze" && p.op_type != "Cast") {
        return none;
      }
      v = p.inputs[0];
    }
    return none;
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
      Ann o{a.block, ro - (r - a.ha), -1};
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
      return fail("reshapes the heads other than merging [heads, head_dim]");
    }
    return fail("is an op the head analysis cannot follow (" + op + ")");
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
      for (int64_t x : axes)
        if (norm(x, r) == a.ha || norm(x, r) == a.da) return fail("slices the heads");
      return Set(n.outputs[0], a);
    }
    if (op == "Gather") {
      int64_t axis = norm(n.attrs.GetInt("axis", 0), r);
      if (axis == a.ha || axis == a.da) return fail("gathers along the heads");
      const int ri = Rank(n.inputs[1]);
      if (ri < 0) return fail("has indices of unknown rank");
      // Axis `axis` is replaced by the indices' axes.
      auto shift = [&](int x) { return x < 0 ? -1 : x < axis ? x : x - 1 + ri; };
      return Set(n.outputs[0], Ann{a.block, shift(a.ha), shift(a.da)});
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
      return Set(n.outputs[0], Ann{a.block, shift(a.ha), shift(a.da)});
    }
    // Unsqueeze: output axis list; the input's axes fill the positions not inserted, in order.
    std::set<int64_t> ins;
    for (int64_t x : axes) ins.insert(norm(x, ro));
    std::vector<int> old_to_new;
    for (int d = 0; d < ro; ++d)
      if (!ins.count(d)) old_to_new.push_back(d);
    if (static_cast<int>(old_to_new.size()) != r) return fail("has inconsistent axes");
    auto map = [&](int x) { return x < 0 ? -1 : old_to_new[static_cast<size_t>(x)]; };
    Set(n.outputs[0], Ann{a.block, map(a.ha), map(a.da)});
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
      Ann o{x.block, x.ha + lead, x.da < 0 ? -1 : x.da + lead};
      if (out && (out->ha != o.ha || out->da != o.da)) return fail("combines head tensors on different axes");
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

  const Graph& g_;
  std::vector<std::optional<Ann>> ann_;
  std::vector<HeadBlock> blocks_;
  std::vector<int> parent_;
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
