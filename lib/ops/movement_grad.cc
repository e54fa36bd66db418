// Gradient rules of the data-movement ops (lib/ops/movement.cc): each moves dy back where the
// forward took its input from (Transpose inverted, Expand summed, Concat sliced, Split
// concatenated, Slice zero-padded, Gather scatter-added by the ai.whittle GatherGrad op).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

StatusOr<InputGrads> TransposeGrad(const GradArgs& a) {
  std::vector<int64_t> perm = a.n.attrs.GetInts("perm");
  if (perm.empty()) {
    const std::optional<SymShape> sx = ShapeOf(a.g, a.in(0));
    if (!sx) return Unimplemented(a.n.DebugName() + ": Transpose gradient needs a known rank");
    for (int64_t i = static_cast<int64_t>(sx->size()) - 1; i >= 0; --i) perm.push_back(i);
  }
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
  AttributeMap at;
  at.Set("perm", Attribute::Ints(inv));
  return InputGrads{{0, a.e.Op("Transpose", {a.dy}, at)}};
}

StatusOr<InputGrads> ExpandGrad(const GradArgs& a) {
  WH_ASSIGN_OR_RETURN(int d, SumToShape(a.e, a.g, a.dy, a.n.outputs[0], a.in(0)));
  return InputGrads{{0, d}};
}

StatusOr<InputGrads> ConcatGrad(const GradArgs& a) {  // each input's slice of dy
  const Node& n = a.n;
  const std::optional<SymShape> so = ShapeOf(a.g, n.outputs[0]);
  if (!so) return Unimplemented(n.DebugName() + ": Concat gradient needs a known rank");
  const int64_t axis = NormAxis(n.attrs.GetInt("axis", 0), so->size());
  int64_t off = 0;
  InputGrads r;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const std::optional<SymShape> si = ShapeOf(a.g, a.in(i));
    const bool known = si && si->size() == so->size() && (*si)[static_cast<size_t>(axis)].known();
    if (!known && a.need(i))
      return Unimplemented(n.DebugName() + ": Concat gradient needs the inputs' sizes along the axis");
    if (!known) {  // later inputs' offsets unknown: they cannot need a gradient either
      off = -1;
      continue;
    }
    const int64_t len = (*si)[static_cast<size_t>(axis)].value;
    if (a.need(i)) {
      if (off < 0) return Unimplemented(n.DebugName() + ": Concat gradient needs the inputs' sizes along the axis");
      r.push_back({i, a.e.Slice(a.dy, {off}, {off + len}, {axis})});
    }
    if (off >= 0) off += len;
  }
  return r;
}

// The output gradients concatenated back (zeros for outputs no gradient reaches).
StatusOr<InputGrads> SplitGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const std::optional<SymShape> sx = ShapeOf(a.g, n.inputs[0]);
  if (!sx) return Unimplemented(n.DebugName() + ": Split gradient needs a known rank");
  const int64_t axis = NormAxis(n.attrs.GetInt("axis", 0), sx->size());
  std::vector<int> parts;
  for (size_t k = 0; k < n.outputs.size(); ++k)
    parts.push_back(k < a.dys.size() && a.dys[k] >= 0 ? a.dys[k] : e.ZerosLike(n.outputs[k]));
  return InputGrads{{0, parts.size() == 1 ? parts[0] : e.Concat(parts, axis)}};
}

// The starts, ends, axes and steps of a Slice (attributes before opset 10, constant inputs since).
struct SliceParams {
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
};

StatusOr<SliceParams> SliceParamsOf(const GradArgs& a) {
  const Node& n = a.n;
  SliceParams p;
  if (a.e.opset() < 10) {
    p.starts = n.attrs.GetInts("starts");
    p.ends = n.attrs.GetInts("ends");
    if (n.attrs.Has("axes")) p.axes = n.attrs.GetInts("axes");
  } else {
    p.starts = ConstInts(a.g, n, 1);
    p.ends = ConstInts(a.g, n, 2);
    if (a.in(3) >= 0) p.axes = ConstInts(a.g, n, 3);
    if (a.in(4) >= 0) p.steps = ConstInts(a.g, n, 4);
    if (!p.starts || !p.ends || (a.in(3) >= 0 && !p.axes) || (a.in(4) >= 0 && !p.steps))
      return Unimplemented(n.DebugName() + ": Slice gradient needs constant starts, ends, axes and steps");
  }
  if (!p.axes) {
    p.axes.emplace();
    for (size_t i = 0; i < p.starts->size(); ++i) p.axes->push_back(static_cast<int64_t>(i));
  }
  if (p.starts->size() != p.ends->size() || p.axes->size() != p.starts->size() ||
      (p.steps && p.steps->size() != p.starts->size()))
    return InvalidArgument(n.DebugName() + ": starts, ends, axes and steps differ in length");
  return p;
}

StatusOr<InputGrads> SliceGrad(const GradArgs& a) {  // dy zero-padded back to x's shape
  const Node& n = a.n;
  const std::optional<SymShape> sx = ShapeOf(a.g, a.in(0));
  if (!sx) return Unimplemented(n.DebugName() + ": Slice gradient needs a known rank");
  const size_t rank = sx->size();
  WH_ASSIGN_OR_RETURN(SliceParams p, SliceParamsOf(a));
  std::vector<int64_t> pads(2 * rank, 0);
  for (size_t k = 0; k < p.axes->size(); ++k) {
    if (p.steps && (*p.steps)[k] != 1)
      return Unimplemented(n.DebugName() + ": Slice gradient with a step other than 1 (got " +
                           std::to_string((*p.steps)[k]) + ")");
    const int64_t ax = NormAxis((*p.axes)[k], rank);
    if (ax < 0 || ax >= static_cast<int64_t>(rank)) return InvalidArgument(n.DebugName() + ": axis out of range");
    const Dim d = (*sx)[static_cast<size_t>(ax)];
    if (!d.known()) return Unimplemented(n.DebugName() + ": Slice gradient needs known sizes on the sliced axes");
    auto clamp = [&](int64_t v) { return std::min(d.value, std::max<int64_t>(0, v < 0 ? v + d.value : v)); };
    const int64_t b = clamp((*p.starts)[k]), en = std::max(b, clamp((*p.ends)[k]));
    pads[static_cast<size_t>(ax)] = b;
    pads[rank + static_cast<size_t>(ax)] = d.value - en;
  }
  return InputGrads{{0, a.e.Pad(a.dy, pads)}};
}

StatusOr<InputGrads> GatherGrad(const GradArgs& a) {  // dy scatter-added at the indices (they get no gradient)
  InputGrads r;
  if (a.need(0)) r.push_back({0, a.e.Op("GatherGrad", {a.in(0), a.in(1), a.dy}, a.n.attrs, kWhittleDomain)});
  return r;
}

}  // namespace

void RegisterMovementGrads(GradRegistry& r) {
  r.Register("", "Transpose", TransposeGrad);
  r.Register("", "Expand", ExpandGrad);
  r.Register("", "Concat", ConcatGrad);
  r.Register("", "Split", SplitGrad, /*every_output=*/true);
  r.Register("", "Slice", SliceGrad);
  r.Register("", "Gather", GatherGrad);
}

}  // namespace whittle
