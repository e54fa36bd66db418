#include "passes/linear_weight.h"

#include <cstring>

#include "passes/cost.h"

namespace whittle {

bool MatchBias(const Graph& g, int index, size_t slot, bool allow_row, WeightMatch* m, std::string* reason) {
  const Node& node = g.nodes()[static_cast<size_t>(index)];
  if (node.inputs.size() <= slot || node.inputs[slot] < 0) return true;
  const Tensor* c = g.ConstInput(node, slot, DType::kFloat32);
  if (!c || c->numel() != m->n || !(c->rank() == 1 || (allow_row && c->rank() == 2 && c->dim(0) == 1))) {
    *reason = allow_row ? "the bias is not a constant float32 [N] or [1, N]" : "the bias is not a constant float32 [N]";
    return false;
  }
  m->bias = node.inputs[slot];
  return true;
}

bool MatchGemmWeight(const Graph& g, int index, WeightMatch* m, std::string* reason) {
  const Node& node = g.nodes()[static_cast<size_t>(index)];
  if (!node.domain.empty() || (node.op_type != "Gemm" && node.op_type != "MatMul")) return false;
  const Tensor* b = node.inputs.size() > 1 ? g.ConstInput(node, 1, DType::kFloat32) : nullptr;
  if (!b || b->rank() != 2) {
    *reason = "the weight is not a constant float32 matrix";
    return false;
  }
  bool trans_b = false;
  if (node.op_type == "Gemm") {
    if (node.attrs.GetInt("transA", 0) != 0 || node.attrs.GetFloat("alpha", 1.f) != 1.f ||
        node.attrs.GetFloat("beta", 1.f) != 1.f) {
      *reason = "Gemm with transA, alpha or beta other than the defaults";
      return false;
    }
    trans_b = node.attrs.GetInt("transB", 0) != 0;
  }
  m->node = index;
  m->conv = false;
  m->n = trans_b ? b->dim(0) : b->dim(1);
  m->k = trans_b ? b->dim(1) : b->dim(0);
  if (node.op_type == "Gemm" && !MatchBias(g, index, 2, true, m, reason)) return false;
  m->w.resize(static_cast<size_t>(m->n * m->k));
  const float* src = b->data<float>();
  for (int64_t o = 0; o < m->n; ++o)
    for (int64_t i = 0; i < m->k; ++i)
      m->w[static_cast<size_t>(o * m->k + i)] = trans_b ? src[o * m->k + i] : src[i * m->n + o];
  // A weight mapped from external data is copied out now: its pages go back, so a pass over a
  // gigabyte model holds one layer's copy at a time, not the model twice.
  b->buffer()->ReleaseResidentPages();
  return true;
}

std::vector<WeightMatch> CollectWeightLayers(const Graph& g, const WeightMatcher& match, const LayerSelection& select,
                                             PassReport* rep,
                                             const std::function<std::string(const Node&)>& veto) {
  std::vector<WeightMatch> work;
  for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    WeightMatch m;
    std::string reason;
    if (!match(g, i, &m, &reason)) {
      if (!reason.empty()) rep->layers.push_back(SkippedLayer(g, n, reason));
      continue;
    }
    reason = select.LeftAloneReason(n.name);
    if (reason.empty() && veto) reason = veto(n);
    if (!reason.empty()) {
      rep->layers.push_back(SkippedLayer(g, n, reason));
      continue;
    }
    work.push_back(std::move(m));
  }
  return work;
}

StatusOr<LayerOverrides> ParseLayerOverrides(PassOptions& o, const std::string& key, int64_t def, int64_t lo,
                                             int64_t hi) {
  LayerOverrides r;
  for (auto& [name, lopts] : o.layers()) {
    if (lopts.Has(key)) {
      WH_ASSIGN_OR_RETURN(int64_t v, lopts.GetInt(key, def, lo, hi));
      r.value[name] = v;
    }
    WH_RETURN_IF_ERROR(lopts.Finish());
  }
  return r;
}

void SetParamsAfter(const Graph& g, const std::string& action, PassReport* rep) {
  for (LayerReport& lr : rep->layers)
    if (lr.action == action)
      for (const Node& n : g.nodes())
        if (n.name == lr.node) lr.params_after = NodeParams(g, n);
}

int WhittleBiasInput(Graph& g, const WeightMatch& m, const std::string& node_name) {
  const Tensor* c = g.value(m.bias).initializer ? &*g.value(m.bias).initializer : nullptr;
  if (!c || c->rank() != 2) return m.bias;
  Tensor flat(DType::kFloat32, {m.n});
  std::memcpy(flat.raw_data(), c->raw_data(), flat.nbytes());
  return g.AddInitializer(g.UniqueName(node_name + "/bias"), flat);
}

Status FinishWhittleRewrite(Graph& g, bool rewrote, const std::string& action, PassReport* rep) {
  if (rewrote && g.OpsetFor(kWhittleDomain) == 0) g.opset_imports[kWhittleDomain] = 1;
  g.Reindex();
  WH_RETURN_IF_ERROR(g.Compact());
  SetParamsAfter(g, action, rep);
  return Status::Ok();
}

}  // namespace whittle
