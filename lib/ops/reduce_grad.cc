// Gradient rules of the reductions (lib/ops/reduce.cc): ReduceSum and ReduceMean put dy back on
// the reduced axes and broadcast it, Softmax and LogSoftmax from their outputs.
#include <algorithm>
#include <optional>
#include <vector>

#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

// The reduced axes of a ReduceSum/ReduceMean (attribute, or input 1 where the opset has it),
// normalized and sorted; *noop when empty axes mean identity (noop_with_empty_axes).
StatusOr<std::vector<int64_t>> ReduceAxes(const Graph& g, const Node& n, size_t rank, bool* noop) {
  std::vector<int64_t> axes = n.attrs.GetInts("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    auto c = ConstInts(g, n, 1);
    if (!c) return Unimplemented(n.DebugName() + ": " + n.op_type + " gradient needs constant axes");
    axes = *c;
  }
  *noop = false;
  if (axes.empty()) {
    if (n.attrs.GetInt("noop_with_empty_axes", 0) != 0) {
      *noop = true;
      return axes;
    }
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  for (int64_t& a : axes) {
    a = NormAxis(a, rank);
    if (a < 0 || a >= static_cast<int64_t>(rank)) return InvalidArgument(n.DebugName() + ": axis out of range");
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

// dy put back on the reduced axes and broadcast over them (ReduceMean: divided by their size).
StatusOr<InputGrads> ReduceSumMeanGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const std::optional<SymShape> sx = ShapeOf(a.g, a.in(0));
  if (!sx) return Unimplemented(n.DebugName() + ": " + n.op_type + " gradient needs a known rank");
  bool noop = false;
  WH_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(a.g, n, sx->size(), &noop));
  if (noop) return InputGrads{{0, a.dy}};
  int t = n.attrs.GetInt("keepdims", 1) != 0 ? a.dy : e.Unsqueeze(a.dy, axes);
  t = e.Op("Expand", {t, e.Op("Shape", {a.in(0)})});
  if (n.op_type == "ReduceMean") {
    int64_t count = 1;
    for (int64_t ax : axes) {
      const Dim d = (*sx)[static_cast<size_t>(ax)];
      count = count < 0 || !d.known() ? -1 : count * d.value;
    }
    // 1 / count; from the sizes at run time where a reduced dim is symbolic.
    const int ratio = count > 0 ? e.Scalar(1.f / static_cast<float>(count))
                                : e.Op("Div", {e.CastFloat(e.Op("Size", {n.outputs[0]})),
                                               e.CastFloat(e.Op("Size", {a.in(0)}))});
    t = e.Op("Mul", {t, ratio});
  }
  return InputGrads{{0, t}};
}

// Softmax: dx = y * (dy - sum(dy * y)); LogSoftmax: dx = dy - exp(y) * sum(dy), sums over the
// softmax axes: the one axis since opset 13, every axis from `axis` on before (2-D flattening).
StatusOr<InputGrads> SoftmaxGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const int dy = a.dy;
  const std::optional<SymShape> sx = ShapeOf(a.g, a.in(0));
  if (!sx) return Unimplemented(n.DebugName() + ": " + n.op_type + " gradient needs a known rank");
  const bool flat = e.opset() < 13;
  const int64_t axis = NormAxis(n.attrs.GetInt("axis", flat ? 1 : -1), sx->size());
  if (axis < 0 || axis >= static_cast<int64_t>(sx->size())) return InvalidArgument(n.DebugName() + ": bad axis");
  std::vector<int64_t> axes{axis};
  for (int64_t i = axis + 1; flat && i < static_cast<int64_t>(sx->size()); ++i) axes.push_back(i);
  const int y = n.outputs[0];
  if (n.op_type == "Softmax")
    return InputGrads{{0, e.Op("Mul", {y, e.Op("Sub", {dy, e.ReduceSum(e.Op("Mul", {dy, y}), axes, true)})})}};
  return InputGrads{{0, e.Op("Sub", {dy, e.Op("Mul", {e.Op("Exp", {y}), e.ReduceSum(dy, axes, true)})})}};
}

}  // namespace

void RegisterReduceGrads(GradRegistry& r) {
  r.Register("", "ReduceSum", ReduceSumMeanGrad);
  r.Register("", "ReduceMean", ReduceSumMeanGrad);
  r.Register("", "Softmax", SoftmaxGrad);
  r.Register("", "LogSoftmax", SoftmaxGrad);
}

}  // namespace whittle
