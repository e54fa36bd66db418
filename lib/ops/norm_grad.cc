// Gradient rules of the normalizations (lib/ops/norm.cc): BatchNormalization with frozen running
// statistics or, for the nodes the training engine feeds the batch's (GradContext::bn_training),
// through the batch statistics; LayerNormalization with its statistics recomputed from x.
#include <optional>
#include <vector>

#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

// Inference form (running statistics frozen): y = (x - mean) * k + bias, k = scale / sqrt(var + eps).
StatusOr<InputGrads> BatchNormalizationGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const int dy = a.dy;
  if (n.attrs.GetInt("training_mode", 0) != 0 || n.outputs.size() > 1)
    return Unimplemented(n.DebugName() + ": BatchNormalization in training mode");
  const std::optional<SymShape> sx = ShapeOf(a.g, a.in(0));
  if (!sx || sx->size() < 2) return Unimplemented(n.DebugName() + ": BatchNormalization gradient needs a known rank");
  std::vector<int64_t> bshape{1, -1};  // [C] -> [1, C, 1, ...]
  for (size_t i = 2; i < sx->size(); ++i) bshape.push_back(1);
  auto per_channel = [&](int v) { return e.Op("Reshape", {v, e.Int64s(bshape)}); };
  const float eps = n.attrs.GetFloat("epsilon", 1e-5f);
  const int inv_std = e.Op("Reciprocal", {e.Op("Sqrt", {e.Op("Add", {a.in(4), e.Scalar(eps)})})});
  std::vector<int64_t> axes{0};
  for (size_t i = 2; i < sx->size(); ++i) axes.push_back(static_cast<int64_t>(i));
  const bool batch_stats = a.ctx.bn_training.count(n.name) != 0;
  int xhat = -1;
  if (a.need(1) || batch_stats)
    xhat = e.Op("Mul", {e.Op("Sub", {a.in(0), per_channel(a.in(3))}), per_channel(inv_std)});
  InputGrads r;
  if (a.need(0)) {
    // Training mode (mean and var are the batch's, functions of x):
    // dx = scale * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), means per channel.
    int g0 = dy;
    if (batch_stats)
      g0 = e.Op("Sub", {e.Op("Sub", {dy, e.ReduceMean(dy, axes, true)}),
                        e.Op("Mul", {xhat, e.ReduceMean(e.Op("Mul", {dy, xhat}), axes, true)})});
    r.push_back({0, e.Op("Mul", {g0, per_channel(e.Op("Mul", {a.in(1), inv_std}))})});
  }
  if (a.need(1)) r.push_back({1, e.ReduceSum(e.Op("Mul", {dy, xhat}), axes, false)});
  if (a.need(2)) r.push_back({2, e.ReduceSum(dy, axes, false)});
  return r;
}

// y = xhat * scale + B over the axes from `axis` on; xhat recomputed from x. With g = dy * scale:
// dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), dscale = sum(dy * xhat), dB = sum(dy).
StatusOr<InputGrads> LayerNormalizationGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const int dy = a.dy;
  const std::optional<SymShape> sx = ShapeOf(a.g, a.in(0));
  if (!sx) return Unimplemented(n.DebugName() + ": LayerNormalization gradient needs a known rank");
  const int64_t axis = NormAxis(n.attrs.GetInt("axis", -1), sx->size());
  if (axis < 0 || axis >= static_cast<int64_t>(sx->size())) return InvalidArgument(n.DebugName() + ": bad axis");
  std::vector<int64_t> axes;
  for (int64_t i = axis; i < static_cast<int64_t>(sx->size()); ++i) axes.push_back(i);
  const float eps = n.attrs.GetFloat("epsilon", 1e-5f);
  const int xc = e.Op("Sub", {a.in(0), e.ReduceMean(a.in(0), axes, true)});
  const int inv_std = e.Op("Reciprocal", {e.Op("Sqrt", {e.Op("Add", {e.ReduceMean(e.Op("Mul", {xc, xc}), axes, true),
                                                                   e.Scalar(eps)})})});
  const int xhat = e.Op("Mul", {xc, inv_std});
  InputGrads r;
  if (a.need(0)) {
    const int gs = e.Op("Mul", {dy, a.in(1)});
    const int t = e.Op("Sub", {e.Op("Sub", {gs, e.ReduceMean(gs, axes, true)}),
                               e.Op("Mul", {xhat, e.ReduceMean(e.Op("Mul", {gs, xhat}), axes, true)})});
    r.push_back({0, e.Op("Mul", {t, inv_std})});
  }
  if (a.need(1)) {
    WH_ASSIGN_OR_RETURN(int d, SumToShape(e, a.g, e.Op("Mul", {dy, xhat}), n.outputs[0], a.in(1)));
    r.push_back({1, d});
  }
  if (a.in(2) >= 0 && a.need(2)) {
    WH_ASSIGN_OR_RETURN(int d, SumToShape(e, a.g, dy, n.outputs[0], a.in(2)));
    r.push_back({2, d});
  }
  return r;
}

}  // namespace

void RegisterNormGrads(GradRegistry& r) {
  r.Register("", "BatchNormalization", BatchNormalizationGrad);
  r.Register("", "LayerNormalization", LayerNormalizationGrad);
}

}  // namespace whittle
