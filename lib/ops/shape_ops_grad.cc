// Gradient rules of the shape ops (lib/ops/shape_ops.cc): the reshapes give dy back in the
// input's shape, Identity and Dropout (inference: the identity) pass it on.
#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

StatusOr<InputGrads> ReshapeGrad(const GradArgs& a) { return InputGrads{{0, a.e.ReshapeLike(a.dy, a.in(0))}}; }

StatusOr<InputGrads> IdentityGrad(const GradArgs& a) { return InputGrads{{0, a.dy}}; }

}  // namespace

void RegisterShapeOpsGrads(GradRegistry& r) {
  for (const char* op : {"Flatten", "Reshape", "Squeeze", "Unsqueeze"}) r.Register("", op, ReshapeGrad);
  r.Register("", "Identity", IdentityGrad);
  r.Register("", "Dropout", IdentityGrad);
}

}  // namespace whittle
