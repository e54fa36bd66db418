// Gradient rules of a fake quantization (lib/ops/quant.cc), the straight-through estimator:
// QuantizeLinear masks dy to the representable range, DequantizeLinear passes it on.
#include <algorithm>
#include <optional>

#include "lib/ir/quant_range.h"
#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

// The second half of a fake quantization: the straight-through gradient passes on to the
// QuantizeLinear before it, which masks it.
StatusOr<InputGrads> DequantizeLinearGrad(const GradArgs& a) { return InputGrads{{0, a.dy}}; }

// Straight-through estimator: dy where x lies inside the representable range
// [(qmin - zp) * s, (qmax - zp) * s], 0 where the quantization saturates.
StatusOr<InputGrads> QuantizeLinearGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Graph& g = a.g;
  const Node& n = a.n;
  const Tensor* scale = g.ConstInput(n, 1, DType::kFloat32);
  const Tensor* zp = a.in(2) >= 0 ? g.ConstInput(n, 2) : nullptr;
  const std::optional<SymShape> sx = ShapeOf(g, a.in(0));
  if (!scale && a.in(1) >= 0 && g.value(a.in(1)).producer < 0 && !g.value(a.in(1)).is_constant() &&
      (a.in(2) < 0 || zp)) {
    // A live (re-estimated) weight scale, fed as a graph input: it maps the largest |w| of
    // each channel to the stored weights' largest level, inside the range, so nothing
    // saturates and the straight-through gradient is dy itself.
    return InputGrads{{0, a.dy}};
  }
  if (!scale || (a.in(2) >= 0 && !zp) || !sx)
    return Unimplemented(n.DebugName() + ": fake-quantization gradient needs a constant scale and zero point");
  const DType qt = zp ? zp->dtype() : DType::kUInt8;
  double qmin = 0, qmax = 0;
  RangeOf(qt, &qmin, &qmax);
  const int64_t C = scale->numel();
  int64_t axis = n.attrs.GetInt("axis", 1);
  if (axis < 0) axis += static_cast<int64_t>(sx->size());
  Dims bd;
  if (C > 1) {
    bd.assign(sx->size(), 1);
    bd[static_cast<size_t>(axis)] = C;
  }
  Tensor lo(DType::kFloat32, bd), hi(DType::kFloat32, bd);
  for (int64_t c = 0; c < std::max<int64_t>(C, 1); ++c) {
    const double z = zp ? ZeroPointAt(*zp, c) : 0, sc = scale->data<float>()[c];
    lo.data<float>()[c] = static_cast<float>((qmin - z) * sc);
    hi.data<float>()[c] = static_cast<float>((qmax - z) * sc);
  }
  const int x = a.in(0);
  const int inside = e.Op("And", {e.Op("Not", {e.Op("Less", {x, e.Const(lo, "q_lo")})}),
                                  e.Op("Not", {e.Op("Greater", {x, e.Const(hi, "q_hi")})})});
  return InputGrads{{0, e.Op("Where", {inside, a.dy, e.Scalar(0.f)})}};
}

}  // namespace

void RegisterQuantGrads(GradRegistry& r) {
  r.Register("", "QuantizeLinear", QuantizeLinearGrad);
  r.Register("", "DequantizeLinear", DequantizeLinearGrad);
}

}  // namespace whittle
