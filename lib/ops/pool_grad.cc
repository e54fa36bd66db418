// Gradient rules of the pools (lib/ops/pool.cc): MaxPool and AveragePool through their
// ai.whittle grad ops (lib/ops/grad.cc), GlobalAveragePool spread evenly over each plane.
#include <optional>

#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

StatusOr<InputGrads> MaxPoolGrad(const GradArgs& a) {
  const Node& n = a.n;
  if (n.outputs.size() > 1 && n.outputs[1] >= 0) return Unimplemented(n.DebugName() + ": MaxPool with Indices");
  return InputGrads{{0, a.e.Op("MaxPoolGrad", {a.in(0), a.dy}, n.attrs, kWhittleDomain)}};
}

StatusOr<InputGrads> AveragePoolGrad(const GradArgs& a) {
  return InputGrads{{0, a.e.Op("AveragePoolGrad", {a.in(0), a.dy}, a.n.attrs, kWhittleDomain)}};
}

StatusOr<InputGrads> GlobalAveragePoolGrad(const GradArgs& a) {  // dy spread evenly over each plane
  Emitter& e = a.e;
  const Node& n = a.n;
  const std::optional<SymShape> sx = ShapeOf(a.g, a.in(0));
  if (!sx || sx->size() < 3) return Unimplemented(n.DebugName() + ": GlobalAveragePool gradient needs a known rank");
  int64_t area = 1;
  for (size_t i = 2; i < sx->size(); ++i) {
    if (!(*sx)[i].known()) return Unimplemented(n.DebugName() + ": GlobalAveragePool gradient needs known spatial dims");
    area *= (*sx)[i].value;
  }
  return InputGrads{
      {0, e.Op("Expand", {e.Op("Mul", {a.dy, e.Scalar(1.f / static_cast<float>(area))}), e.Op("Shape", {a.in(0)})})}};
}

}  // namespace

void RegisterPoolGrads(GradRegistry& r) {
  r.Register("", "MaxPool", MaxPoolGrad);
  r.Register("", "AveragePool", AveragePoolGrad);
  r.Register("", "GlobalAveragePool", GlobalAveragePoolGrad);
}

}  // namespace whittle
