#include "lib/ir/pads.h"

#include <string>

#include "lib/ir/tensor.h"

namespace whittle {

StatusOr<std::vector<int64_t>> PadsForAllAxes(const std::vector<int64_t>& pads, const std::vector<int64_t>& axes,
                                              int64_t rank) {
  if (pads.size() != 2 * axes.size())
    return InvalidArgument("pads " + DimsToString(pads) + " must have 2 entries per axis in axes " + DimsToString(axes));
  std::vector<int64_t> all(static_cast<size_t>(2 * rank), 0);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return InvalidArgument("axes value " + std::to_string(axes[i]) + " is out of range for rank " + std::to_string(rank));
    if (seen[static_cast<size_t>(a)]) return InvalidArgument("axis " + std::to_string(axes[i]) + " is repeated in axes");
    seen[static_cast<size_t>(a)] = true;
    all[static_cast<size_t>(a)] = pads[i];
    all[static_cast<size_t>(a + rank)] = pads[i + axes.size()];
  }
  return all;
}

namespace {

bool ConstInt64s(const Graph& g, const Node& n, size_t slot, std::vector<int64_t>* v) {
  const Tensor* t = g.ConstInput(n, slot, DType::kInt64);
  if (!t || t->rank() > 1) return false;
  v->assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  return true;
}

}  // namespace

bool ConstantPads(const Graph& g, const Node& n, std::vector<int64_t>* pads) {
  if (n.inputs.empty() || n.inputs[0] < 0) return false;
  if (g.OpsetFor(n.domain) < 11) {
    *pads = n.attrs.GetInts("pads", {});
    return !pads->empty() && pads->size() % 2 == 0;
  }
  std::vector<int64_t> given, axes;
  if (!ConstInt64s(g, n, 1, &given)) return false;
  const bool with_axes = n.inputs.size() > 3 && n.inputs[3] >= 0;
  if (!with_axes) {
    *pads = std::move(given);
    return !pads->empty() && pads->size() % 2 == 0;
  }
  const Value& x = g.value(n.inputs[0]);
  if (!ConstInt64s(g, n, 3, &axes) || !x.shape) return false;
  auto all = PadsForAllAxes(given, axes, static_cast<int64_t>(x.shape->size()));
  if (!all.ok()) return false;
  *pads = std::move(*all);
  return true;
}

}  // namespace whittle
