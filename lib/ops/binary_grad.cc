// Gradient rule of the binarized layers' training form (lib/ops/binary.cc): the training engine
// lifts a BinaryMatMul/BinaryConv to SignSte(latent) * alpha feeding a float MatMul/Conv
// (runtime/training/lift.cc), and SignSte's gradient is straight-through: sign's taken as 1.
#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

StatusOr<InputGrads> SignSteGrad(const GradArgs& a) { return InputGrads{{0, a.dy}}; }

}  // namespace

void RegisterBinaryGrads(GradRegistry& r) { r.Register(kWhittleDomain, "SignSte", SignSteGrad); }

}  // namespace whittle
