#include "passes/prune/prune_apply.h"

#include <algorithm>
#include <cstring>

#include "passes/prune/attention_heads.h"

namespace whittle::prune {
namespace {

// Replaces node input `slot` (a constant) with t: in place when only this node slot reads the
// value, otherwise through a new initializer so other readers keep the original.
void ReplaceConst(Graph& g, int ni, int slot, Tensor t) {
  Node& n = g.nodes()[static_cast<size_t>(ni)];
  int id = n.inputs[static_cast<size_t>(slot)];
  // The original, mapped from external data, has been read for the last time: its pages go back,
  // so a pruned gigabyte model is held about once, not as input plus output.
  if (const Tensor* old = g.value(id).initializer ? &*g.value(id).initializer : nullptr; old && old->defined())
    old->buffer()->ReleaseResidentPages();
  bool exclusive = g.Consumers(id).size() == 1 && !g.IsGraphOutput(id) &&
                   std::count(n.inputs.begin(), n.inputs.end(), id) == 1;
  if (exclusive) {
    Value& v = g.value(id);
    v.dtype = t.dtype();
    v.shape = ToSymShape(t.dims());
    v.initializer = std::move(t);
    return;
  }
  int nid = g.AddInitializer(g.UniqueName(g.value(id).name + "_pruned"), std::move(t));
  g.nodes()[static_cast<size_t>(ni)].inputs[static_cast<size_t>(slot)] = nid;
}

std::vector<int64_t> Complement(const std::vector<int64_t>& kept, int64_t total) {
  std::vector<bool> k(static_cast<size_t>(total), false);
  for (int64_t i : kept) k[static_cast<size_t>(i)] = true;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < total; ++i)
    if (!k[static_cast<size_t>(i)]) out.push_back(i);
  return out;
}

// What one Gemm/MatMul/Conv (group 1) loses: input rows (as a consumer) and output units (as a
// producer of a pruned group).
struct NodePlan {
  bool rows = false, cols = false;
  std::vector<int64_t> kept_rows, kept_cols;
  int in_value = -1;
  int64_t in_positions = 0;
};

class Applier {
 public:
  Applier(Graph& g, const ChannelAnalysis& a, const PrunePlan& plan) : g_(g), a_(a), plan_(plan) {}

  StatusOr<std::vector<std::string>> Run() {
    std::map<int, NodePlan> plans;
    for (const Producer& p : a_.producers) {
      auto it = plan_.keep.find(a_.Root(p.group));
      if (it == plan_.keep.end()) continue;
      NodePlan& np = plans[p.node];
      np.cols = true;
      np.kept_cols = Kept(p.value);  // the output map's positions: units, or heads' column blocks
    }
    for (const Edit& e : a_.edits) {
      if (!Changed(e.value)) continue;
      switch (e.kind) {
        case EditKind::kConsumerRows: {
          NodePlan& np = plans[e.node];
          np.rows = true;
          np.kept_rows = Kept(e.value);
          np.in_value = e.value;
          np.in_positions = a_.maps[static_cast<size_t>(e.value)]->positions();
          break;
        }
        case EditKind::kBatchNorm:
        case EditKind::kInstanceNorm: {
          int nparams = e.kind == EditKind::kBatchNorm ? 4 : 2;
          for (int i = 1; i <= nparams; ++i) SliceInput(e.node, i, 0, Kept(e.value));
          break;
        }
        case EditKind::kDepthwise: {
          SliceInput(e.node, 1, 0, Kept(e.value));
          SliceInput(e.node, 2, 0, Kept(e.value));
          Node& n = g_.nodes()[static_cast<size_t>(e.node)];
          n.attrs.Set("group", Attribute::Int(static_cast<int64_t>(Kept(n.inputs[0]).size())));
          break;
        }
        case EditKind::kConstOperand:
          SliceInput(e.node, e.input, e.axis, Kept(e.value));
          break;
        case EditKind::kHeadReshape:
          RewriteHeadReshape(e);
          break;
        case EditKind::kChannelReshape: {
          Tensor shape = g_.ConstInput(g_.nodes()[static_cast<size_t>(e.node)], 1)->Clone();
          shape.data<int64_t>()[e.axis] = static_cast<int64_t>(Kept(e.value).size());
          ReplaceConst(g_, e.node, 1, std::move(shape));
          break;
        }
      }
    }
    // A KV cache's declared head dim (past_key_values.* inputs, present.* outputs).
    for (const HeadIoEdit& io : a_.head_io) {
      auto it = plan_.keep.find(a_.Root(io.group));
      Value& v = g_.value(io.value);
      if (it == plan_.keep.end() || !v.shape || io.axis < 0 || io.axis >= static_cast<int>(v.shape->size())) continue;
      const int64_t kept = std::count(it->second.begin(), it->second.end(), true);
      (*v.shape)[static_cast<size_t>(io.axis)] = Dim(kept * io.per_unit);
    }
    for (auto& [ni, np] : plans) {
      const std::string& op = g_.nodes()[static_cast<size_t>(ni)].op_type;
      if (op == "Gemm") ApplyGemm(ni, np);
      else if (op == "MatMul") ApplyMatMul(ni, np);
      else ApplyConv(ni, np);
    }
    return notes_;
  }

 private:
  bool Changed(int value) {
    const auto& m = a_.maps[static_cast<size_t>(value)];
    return m && static_cast<int64_t>(Kept(value).size()) < m->positions();
  }
  const std::vector<int64_t>& Kept(int value) {
    auto it = kept_.find(value);
    if (it == kept_.end())
      it = kept_.emplace(value, KeptPositions(a_, *a_.maps[static_cast<size_t>(value)], plan_.keep)).first;
    return it->second;
  }
  void SliceInput(int ni, int slot, int axis, const std::vector<int64_t>& keep) {
    const Tensor* t = g_.ConstInput(g_.nodes()[static_cast<size_t>(ni)], static_cast<size_t>(slot));
    if (!t) return;  // absent optional input (e.g. a Conv without bias)
    ReplaceConst(g_, ni, slot, SliceAxis(*t, axis, keep));
  }

  // A Reshape that splits a projection into [..., F, heads, head_dim] or merges [heads, head_dim]
  // back gets a constant shape for the kept heads; 0 copies the leading dims (batch, sequence),
  // whatever computed them before.
  void RewriteHeadReshape(const Edit& e) {
    Node& n = g_.nodes()[static_cast<size_t>(e.node)];
    const int64_t kept = static_cast<int64_t>(Kept(e.value).size());
    const Value& ov = g_.value(n.outputs[0]);
    const int ro = static_cast<int>(ov.shape ? ov.shape->size() : ov.observed->size());
    std::vector<int64_t> shape;
    if (n.inputs[0] == e.value) {  // split
      const Value& iv = g_.value(n.inputs[0]);
      const int ri = static_cast<int>(iv.shape ? iv.shape->size() : iv.observed->size());
      shape.assign(static_cast<size_t>(ri - 1), 0);
      int64_t per_head = 1;  // positions per head: F * head_dim
      for (int d = ri - 1; d < ro; ++d) {
        const int64_t v = KnownDimValue(g_, n.outputs[0], d);  // known: FindHeadBlocks checked
        shape.push_back(v);
        if (d != ro - 2) per_head *= v;
      }
      shape[static_cast<size_t>(ro - 2)] = kept / per_head;
    } else {  // merge
      shape.assign(static_cast<size_t>(ro - 1), 0);
      shape.push_back(kept);
    }
    Tensor t(DType::kInt64, {static_cast<int64_t>(shape.size())});
    std::copy(shape.begin(), shape.end(), t.data<int64_t>());
    const std::string base = n.name.empty() ? g_.value(n.outputs[0]).name : n.name;
    const int id = g_.AddInitializer(g_.UniqueName(base + "/pruned_heads_shape"), std::move(t));
    Node& m = g_.nodes()[static_cast<size_t>(e.node)];
    m.inputs[1] = id;
    if (m.attrs.Has("allowzero")) m.attrs.Set("allowzero", Attribute::Int(0));
  }

  // Mean of each removed input position, or empty when compensation is off for this consumer.
  std::vector<std::pair<int64_t, double>> RemovedMeans(const NodePlan& np, const Tensor& w) {
    std::vector<std::pair<int64_t, double>> out;
    if (!np.rows) return out;
    auto it = plan_.value_means.find(np.in_value);
    if (it == plan_.value_means.end()) return out;
    if (w.dtype() != DType::kFloat32) {
      notes_.push_back("bias compensation skipped for a consumer with " + std::string(DTypeName(w.dtype())) + " weights");
      return out;
    }
    for (int64_t r : Complement(np.kept_rows, np.in_positions))
      if (it->second[static_cast<size_t>(r)] != 0) out.emplace_back(r, it->second[static_cast<size_t>(r)]);
    return out;
  }

  void ApplyGemm(int ni, const NodePlan& np) {
    const Node& n = g_.nodes()[static_cast<size_t>(ni)];
    Tensor b = *g_.ConstInput(n, 1);
    const bool trans_b = n.attrs.GetInt("transB", 0) != 0;
    const int k_axis = trans_b ? 1 : 0, n_axis = 1 - k_axis;
    const int64_t n_full = b.dim(n_axis);
    auto removed = RemovedMeans(np, b);
    if (!removed.empty()) {
      float alpha = n.attrs.GetFloat("alpha", 1.f), beta = n.attrs.GetFloat("beta", 1.f);
      std::vector<double> delta(static_cast<size_t>(n_full), 0.0);
      const float* w = b.data<float>();
      for (auto [k, mean] : removed)
        for (int64_t j = 0; j < n_full; ++j)
          delta[static_cast<size_t>(j)] += mean * (trans_b ? w[j * b.dim(1) + k] : w[k * b.dim(1) + j]);
      const Tensor* c = g_.ConstInput(n, 2);
      Tensor cf = BroadcastLast(beta != 0 ? c : nullptr, n_full);
      float scale = alpha / (beta != 0 ? beta : 1.f);
      AddAlongLast(cf, delta, scale);
      if (beta == 0) g_.nodes()[static_cast<size_t>(ni)].attrs.Set("beta", Attribute::Float(1.f));
      SetOrAddInput(ni, 2, std::move(cf), "_bias");
    }
    if (np.rows) b = SliceAxis(b, k_axis, np.kept_rows);
    if (np.cols) b = SliceAxis(b, n_axis, np.kept_cols);
    if (np.rows || np.cols) ReplaceConst(g_, ni, 1, b);
    const Tensor* c = g_.ConstInput(g_.nodes()[static_cast<size_t>(ni)], 2);
    if (np.cols && c && c->rank() >= 1 && c->dims().back() == n_full)
      ReplaceConst(g_, ni, 2, SliceAxis(*c, c->rank() - 1, np.kept_cols));
  }

  void ApplyMatMul(int ni, const NodePlan& np) {
    Tensor b = *g_.ConstInput(g_.nodes()[static_cast<size_t>(ni)], 1);
    const int64_t n_full = b.dim(1);
    auto removed = RemovedMeans(np, b);
    if (np.rows) b = SliceAxis(b, 0, np.kept_rows);
    if (np.cols) b = SliceAxis(b, 1, np.kept_cols);
    const Tensor original = *g_.ConstInput(g_.nodes()[static_cast<size_t>(ni)], 1);
    ReplaceConst(g_, ni, 1, b);
    if (removed.empty()) return;
    // MatMul has no bias: the removed rows' mean contribution goes into an Add right after it.
    std::vector<double> delta(static_cast<size_t>(n_full), 0.0);
    const float* w = original.data<float>();
    for (auto [k, mean] : removed)
      for (int64_t j = 0; j < n_full; ++j) delta[static_cast<size_t>(j)] += mean * w[k * n_full + j];
    Tensor add = BroadcastLast(nullptr, n_full);
    AddAlongLast(add, delta, 1.f);
    if (np.cols) add = SliceAxis(add, 0, np.kept_cols);
    Node& mm = g_.nodes()[static_cast<size_t>(ni)];
    const int out = mm.outputs[0];
    const std::string base = mm.name.empty() ? g_.value(out).name : mm.name;
    int mid = g_.AddValue(g_.UniqueName(base + "/prune_matmul_out"), g_.value(out).dtype);
    int cst = g_.AddInitializer(g_.UniqueName(base + "/prune_bias"), std::move(add));
    g_.nodes()[static_cast<size_t>(ni)].outputs[0] = mid;
    Node a;
    a.name = g_.UniqueName(base + "/prune_bias_add");
    a.op_type = "Add";
    a.inputs = {mid, cst};
    a.outputs = {out};
    g_.AddNode(std::move(a));
    g_.Reindex();
  }

  void ApplyConv(int ni, const NodePlan& np) {
    Tensor w = *g_.ConstInput(g_.nodes()[static_cast<size_t>(ni)], 1);
    const int64_t o_full = w.dim(0), i_full = w.dim(1);
    const int64_t spatial = w.numel() / (o_full * i_full);
    auto removed = RemovedMeans(np, w);
    if (!removed.empty()) {
      std::vector<double> delta(static_cast<size_t>(o_full), 0.0);
      const float* p = w.data<float>();
      for (auto [c, mean] : removed)
        for (int64_t o = 0; o < o_full; ++o) {
          double s = 0;
          for (int64_t k = 0; k < spatial; ++k) s += p[(o * i_full + c) * spatial + k];
          delta[static_cast<size_t>(o)] += mean * s;
        }
      Tensor bias = BroadcastLast(g_.ConstInput(g_.nodes()[static_cast<size_t>(ni)], 2), o_full);
      AddAlongLast(bias, delta, 1.f);
      SetOrAddInput(ni, 2, std::move(bias), "_bias");
    }
    if (np.rows) w = SliceAxis(w, 1, np.kept_rows);
    if (np.cols) w = SliceAxis(w, 0, np.kept_cols);
    if (np.rows || np.cols) ReplaceConst(g_, ni, 1, w);
    if (np.cols) SliceInput(ni, 2, 0, np.kept_cols);
  }

  // A float32 copy of c broadcast so its last axis has n entries (c == nullptr: zeros [n]).
  static Tensor BroadcastLast(const Tensor* c, int64_t n) {
    if (!c) return Tensor(DType::kFloat32, {n});
    Dims dims = c->dims();
    if (dims.empty()) dims.push_back(n);
    if (dims.back() == n) return c->Clone();
    Tensor out(DType::kFloat32, [&] { Dims d = dims; d.back() = n; return d; }());
    const int64_t rows = out.numel() / n;
    const float* src = c->data<float>();
    float* dst = out.data<float>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) dst[r * n + j] = src[c->rank() == 0 ? 0 : r];
    return out;
  }
  static void AddAlongLast(Tensor& t, const std::vector<double>& delta, float scale) {
    const int64_t n = static_cast<int64_t>(delta.size());
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] += static_cast<float>(scale * delta[static_cast<size_t>(i % n)]);
  }
  void SetOrAddInput(int ni, int slot, Tensor t, const std::string& suffix) {
    Node& n = g_.nodes()[static_cast<size_t>(ni)];
    if (static_cast<int>(n.inputs.size()) > slot && n.inputs[static_cast<size_t>(slot)] >= 0)
      return ReplaceConst(g_, ni, slot, std::move(t));
    const std::string base = n.name.empty() ? g_.value(n.outputs[0]).name : n.name;
    int id = g_.AddInitializer(g_.UniqueName(base + suffix), std::move(t));
    Node& m = g_.nodes()[static_cast<size_t>(ni)];
    m.inputs.resize(std::max<size_t>(m.inputs.size(), static_cast<size_t>(slot) + 1), -1);
    m.inputs[static_cast<size_t>(slot)] = id;
  }

  Graph& g_;
  const ChannelAnalysis& a_;
  const PrunePlan& plan_;
  std::map<int, std::vector<int64_t>> kept_;
  std::vector<std::string> notes_;
};

}  // namespace

Tensor SliceAxis(const Tensor& t, int axis, const std::vector<int64_t>& keep) {
  Dims dims = t.dims();
  const size_t esize = DTypeSize(t.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= dims[static_cast<size_t>(d)];
  for (int d = axis + 1; d < t.rank(); ++d) inner *= dims[static_cast<size_t>(d)];
  const int64_t full = dims[static_cast<size_t>(axis)];
  dims[static_cast<size_t>(axis)] = static_cast<int64_t>(keep.size());
  Tensor out(t.dtype(), dims);
  const char* src = static_cast<const char*>(t.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const size_t chunk = static_cast<size_t>(inner) * esize;
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < keep.size(); ++k) {
      WH_CHECK(keep[k] >= 0 && keep[k] < full);
      std::memcpy(dst + (static_cast<size_t>(o) * keep.size() + k) * chunk,
                  src + static_cast<size_t>(o * full + keep[k]) * chunk, chunk);
    }
  return out;
}

StatusOr<std::vector<std::string>> ApplyPrune(Graph& g, const ChannelAnalysis& a, const PrunePlan& plan) {
  return Applier(g, a, plan).Run();
}

}  // namespace whittle::prune
