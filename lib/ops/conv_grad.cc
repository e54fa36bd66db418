// Gradient rule of Conv (lib/ops/conv.cc): the ai.whittle ConvGradInput and ConvGradWeight ops
// (lib/ops/grad.cc) with the kernel size made explicit, the bias's summed over batch and space.
#include <optional>
#include <vector>

#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

StatusOr<InputGrads> ConvGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const std::optional<SymShape> sw = ShapeOf(a.g, a.in(1));
  if (!sw) return Unimplemented(n.DebugName() + ": Conv gradient needs the weight's shape");
  AttributeMap attrs = n.attrs;
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < sw->size(); ++i) {
    if (!(*sw)[i].known()) return Unimplemented(n.DebugName() + ": Conv gradient needs a known kernel size");
    kernel.push_back((*sw)[i].value);
  }
  attrs.Set("kernel_shape", Attribute::Ints(kernel));
  InputGrads r;
  if (a.need(0)) r.push_back({0, e.Op("ConvGradInput", {a.dy, a.in(1), a.in(0)}, attrs, kWhittleDomain)});
  if (a.need(1)) r.push_back({1, e.Op("ConvGradWeight", {a.in(0), a.dy}, attrs, kWhittleDomain)});
  if (a.in(2) >= 0 && a.need(2)) {
    std::vector<int64_t> axes{0};
    for (size_t i = 2; i < sw->size(); ++i) axes.push_back(static_cast<int64_t>(i));
    r.push_back({2, e.ReduceSum(a.dy, axes, false)});
  }
  return r;
}

}  // namespace

void RegisterConvGrads(GradRegistry& r) { r.Register("", "Conv", ConvGrad); }

}  // namespace whittle
