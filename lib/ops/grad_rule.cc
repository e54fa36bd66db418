#include "lib/ops/grad_rule.h"

#include <string>

namespace whittle {

GradRegistry& GradRegistry::Global() {
  static GradRegistry r;
  return r;
}

void GradRegistry::Register(const std::string& domain, const std::string& op_type, GradRule rule, bool every_output) {
  WH_CHECK(rules_.count({domain, op_type}) == 0);
  rules_[{domain, op_type}] = Entry{rule, every_output};
}

const GradRegistry::Entry* GradRegistry::Find(const std::string& domain, const std::string& op_type) const {
  auto it = rules_.find({domain == "ai.onnx" ? "" : domain, op_type});
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<std::string> GradRegistry::OpTypes(const std::string& domain) const {
  std::vector<std::string> r;
  for (const auto& [key, entry] : rules_)
    if (key.first == domain) r.push_back(key.second);
  return r;
}

StatusOr<InputGrads> GradOf(Emitter& e, const Graph& g, const Node& n, const std::vector<int>& dys, const Need& need,
                            const GradContext& ctx) {
  RegisterAllGrads();
  const bool onnx = n.domain.empty() || n.domain == "ai.onnx";
  const GradRegistry::Entry* rule = GradRegistry::Global().Find(n.domain, n.op_type);
  auto apply = [&](int dy) { return rule->rule(GradArgs{e, g, n, dys, dy, need, ctx}); };
  if (!onnx) {
    if (!rule || dys.size() != 1 || dys[0] < 0)
      return Unimplemented(n.DebugName() + ": no gradient rule for domain '" + n.domain + "'");
    return apply(dys[0]);
  }
  if (rule && rule->every_output) return apply(dys.empty() ? -1 : dys[0]);
  for (size_t k = 1; k < dys.size(); ++k)
    if (dys[k] >= 0)
      return Unimplemented(n.DebugName() + ": no gradient through output " + std::to_string(k) + " of " + n.op_type);
  const int dy = dys.empty() ? -1 : dys[0];
  if (dy < 0) return InputGrads{};
  if (!rule) {
    std::string list;
    for (const std::string& op : GradRegistry::Global().OpTypes("")) list += (list.empty() ? "" : ", ") + op;
    return Unimplemented(n.DebugName() + ": no gradient rule for " + n.op_type + " (supported: " + list + ")");
  }
  return apply(dy);
}

int SumToShapeOf(Emitter& e, int dy, const SymShape* so, const SymShape* st) {
  if (*so == *st) return dy;
  const size_t lead = so->size() - st->size();
  std::vector<int64_t> keep;
  for (size_t i = 0; i < st->size(); ++i) {
    const Dim& dt = (*st)[i];
    const Dim& d = (*so)[i + lead];
    if (dt.known() && dt.value == 1 && !(d.known() && d.value == 1)) keep.push_back(static_cast<int64_t>(i + lead));
  }
  int r = dy;
  if (!keep.empty()) r = e.ReduceSum(r, keep, true);
  if (lead > 0) {
    std::vector<int64_t> axes;
    for (size_t i = 0; i < lead; ++i) axes.push_back(static_cast<int64_t>(i));
    r = e.ReduceSum(r, axes, false);
  }
  return r;
}

StatusOr<int> SumToShape(Emitter& e, const Graph& g, int dy, int out, int target) {
  const std::optional<SymShape> so = ShapeOf(g, out);
  const std::optional<SymShape> st = ShapeOf(g, target);
  if (!so || !st || so->size() < st->size()) return InvalidArgument("gradient of a broadcast needs known ranks");
  return SumToShapeOf(e, dy, &*so, &*st);
}

std::optional<std::vector<int64_t>> ConstInts(const Graph& g, const Node& n, size_t slot) {
  if (slot >= n.inputs.size() || n.inputs[slot] < 0) return std::nullopt;
  const Tensor* t = g.ConstInput(n, slot);
  if (!t || (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t->numel(); ++i)
    v.push_back(t->dtype() == DType::kInt64 ? t->data<int64_t>()[i] : t->data<int32_t>()[i]);
  return v;
}

}  // namespace whittle
