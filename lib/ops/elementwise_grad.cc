// Gradient rules of the element-wise ops (lib/ops/elementwise.cc): activations and unary math
// from the outputs or inputs they need, the broadcasting binary ops summed back to each input's
// shape (lib/ops/grad_rule.h's SumToShape).
#include <cstddef>
#include <string>

#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

// dx = dy where y > 0 (y: the Relu's output; the same set as x > 0).
StatusOr<InputGrads> ReluGrad(const GradArgs& a) {
  return InputGrads{{0, a.e.Op("ReluGrad", {a.n.outputs[0], a.dy}, {}, kWhittleDomain)}};
}

StatusOr<InputGrads> SigmoidGrad(const GradArgs& a) {  // dy * y * (1 - y)
  Emitter& e = a.e;
  const int y = a.n.outputs[0];
  return InputGrads{{0, e.Op("Mul", {a.dy, e.Op("Mul", {y, e.Op("Sub", {e.Scalar(1.f), y})})})}};
}

StatusOr<InputGrads> TanhGrad(const GradArgs& a) {  // dy * (1 - y^2)
  Emitter& e = a.e;
  const int y = a.n.outputs[0];
  return InputGrads{{0, e.Op("Mul", {a.dy, e.Op("Sub", {e.Scalar(1.f), e.Op("Mul", {y, y})})})}};
}

StatusOr<InputGrads> LeakyReluGrad(const GradArgs& a) {  // dy where x > 0, else alpha * dy
  Emitter& e = a.e;
  const float alpha = a.n.attrs.GetFloat("alpha", 0.01f);
  return InputGrads{
      {0, e.Op("Where", {e.Op("Greater", {a.in(0), e.Scalar(0.f)}), a.dy, e.Op("Mul", {a.dy, e.Scalar(alpha)})})}};
}

// x * relu6(x + 3) / 6: dy * (0 below -3, 1 above 3, (2x + 3) / 6 between).
StatusOr<InputGrads> HardSwishGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const int x = a.in(0);
  const int mid = e.Op("Div", {e.Op("Add", {e.Op("Mul", {x, e.Scalar(2.f)}), e.Scalar(3.f)}), e.Scalar(6.f)});
  const int slope = e.Op("Where", {e.Op("Less", {x, e.Scalar(-3.f)}), e.Scalar(0.f),
                                   e.Op("Where", {e.Op("Greater", {x, e.Scalar(3.f)}), e.Scalar(1.f), mid})});
  return InputGrads{{0, e.Op("Mul", {a.dy, slope})}};
}

// x * tanh(softplus(x)): dy * (t + x * sigmoid(x) * (1 - t^2)), t = tanh(softplus(x)).
StatusOr<InputGrads> MishGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const int x = a.in(0);
  const int t = e.Op("Tanh", {e.Op("Softplus", {x})});
  const int sech2 = e.Op("Sub", {e.Scalar(1.f), e.Op("Mul", {t, t})});
  const int slope = e.Op("Add", {t, e.Op("Mul", {e.Op("Mul", {x, e.Op("Sigmoid", {x})}), sech2})});
  return InputGrads{{0, e.Op("Mul", {a.dy, slope})}};
}

// dy where min < x < max (min/max: attributes before opset 11, inputs since).
StatusOr<InputGrads> ClipGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const int x = a.in(0);
  int inside = -1;
  auto bound = [&](size_t slot, const char* attr, bool lower) {
    int b = -1;
    if (a.in(slot) >= 0) b = a.in(slot);
    else if (a.n.attrs.Has(attr)) b = e.Scalar(a.n.attrs.GetFloat(attr, 0.f));
    if (b < 0) return;
    const int c = e.Op(lower ? "Greater" : "Less", {x, b});
    inside = inside < 0 ? c : e.Op("And", {inside, c});
  };
  bound(1, "min", true);
  bound(2, "max", false);
  return InputGrads{{0, inside < 0 ? a.dy : e.Op("Where", {inside, a.dy, e.Scalar(0.f)})}};
}

StatusOr<InputGrads> ErfGrad(const GradArgs& a) {  // dy * 2 / sqrt(pi) * exp(-x^2)
  Emitter& e = a.e;
  const int x = a.in(0);
  const int gauss = e.Op("Exp", {e.Op("Neg", {e.Op("Mul", {x, x})})});
  return InputGrads{{0, e.Op("Mul", {a.dy, e.Op("Mul", {e.Scalar(1.1283791670955126f), gauss})})}};
}

StatusOr<InputGrads> SqrtGrad(const GradArgs& a) {  // dy / (2 y)
  return InputGrads{{0, a.e.Op("Div", {a.e.Op("Mul", {a.dy, a.e.Scalar(0.5f)}), a.n.outputs[0]})}};
}

StatusOr<InputGrads> ExpGrad(const GradArgs& a) {  // dy * y
  return InputGrads{{0, a.e.Op("Mul", {a.dy, a.n.outputs[0]})}};
}

StatusOr<InputGrads> LogGrad(const GradArgs& a) {  // dy / x
  return InputGrads{{0, a.e.Op("Div", {a.dy, a.in(0)})}};
}

StatusOr<InputGrads> NegGrad(const GradArgs& a) { return InputGrads{{0, a.e.Op("Neg", {a.dy})}}; }

StatusOr<InputGrads> ReciprocalGrad(const GradArgs& a) {  // -dy * y^2
  Emitter& e = a.e;
  const int y = a.n.outputs[0];
  return InputGrads{{0, e.Op("Neg", {e.Op("Mul", {a.dy, e.Op("Mul", {y, y})})})}};
}

// dx = dy * p * x^(p - 1); a trained exponent is refused.
StatusOr<InputGrads> PowGrad(const GradArgs& a) {
  Emitter& e = a.e;
  if (a.need(1))
    return Unimplemented(a.n.DebugName() + ": Pow gradient with respect to the exponent (only a fixed exponent "
                         "is supported)");
  int p = a.in(1);
  if (a.g.value(p).dtype != DType::kFloat32) p = e.CastFloat(p);
  const int t = e.Op("Mul", {a.dy, e.Op("Mul", {p, e.Op("Pow", {a.in(0), e.Op("Sub", {p, e.Scalar(1.f)})})})});
  WH_ASSIGN_OR_RETURN(int d, SumToShape(e, a.g, t, a.n.outputs[0], a.in(0)));
  return InputGrads{{0, d}};
}

StatusOr<InputGrads> WhereGrad(const GradArgs& a) {  // the condition picks which branch gets dy
  Emitter& e = a.e;
  InputGrads r;
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!a.need(i)) continue;
    const int zero = e.Scalar(0.f);
    const int t = i == 1 ? e.Op("Where", {a.in(0), a.dy, zero}) : e.Op("Where", {a.in(0), zero, a.dy});
    WH_ASSIGN_OR_RETURN(int d, SumToShape(e, a.g, t, a.n.outputs[0], a.in(i)));
    r.push_back({i, d});
  }
  return r;
}

StatusOr<InputGrads> CastGrad(const GradArgs& a) {  // float to float only: a Cast from integers never needs one
  const DType t = a.g.value(a.in(0)).dtype;
  if (t != DType::kFloat32) return Unimplemented(a.n.DebugName() + ": Cast gradient to a " + DTypeName(t) + " input");
  return InputGrads{{0, a.dy}};
}

StatusOr<InputGrads> AddSubGrad(const GradArgs& a) {
  InputGrads r;
  for (size_t i = 0; i < 2; ++i) {
    if (!a.need(i)) continue;
    WH_ASSIGN_OR_RETURN(int d, SumToShape(a.e, a.g, a.dy, a.n.outputs[0], a.in(i)));
    r.push_back({i, a.n.op_type == "Sub" && i == 1 ? a.e.Op("Neg", {d}) : d});
  }
  return r;
}

StatusOr<InputGrads> MulDivGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const std::string& op = a.n.op_type;
  const int x = a.in(0), b = a.in(1), y = a.n.outputs[0];
  InputGrads r;
  if (a.need(0)) {
    WH_ASSIGN_OR_RETURN(int d, SumToShape(e, a.g, e.Op(op, {a.dy, b}), y, x));
    r.push_back({0, d});
  }
  if (a.need(1)) {
    // Mul: dy * a; Div: -dy * a / b^2 = -dy * y / b.
    const int t = op == "Mul" ? e.Op("Mul", {a.dy, x}) : e.Op("Neg", {e.Op("Div", {e.Op("Mul", {a.dy, y}), b})});
    WH_ASSIGN_OR_RETURN(int d, SumToShape(e, a.g, t, y, b));
    r.push_back({1, d});
  }
  return r;
}

}  // namespace

void RegisterElementwiseGrads(GradRegistry& r) {
  r.Register("", "Relu", ReluGrad);
  r.Register("", "Sigmoid", SigmoidGrad);
  r.Register("", "Tanh", TanhGrad);
  r.Register("", "LeakyRelu", LeakyReluGrad);
  r.Register("", "HardSwish", HardSwishGrad);
  r.Register("", "Mish", MishGrad);
  r.Register("", "Clip", ClipGrad);
  r.Register("", "Erf", ErfGrad);
  r.Register("", "Sqrt", SqrtGrad);
  r.Register("", "Exp", ExpGrad);
  r.Register("", "Log", LogGrad);
  r.Register("", "Neg", NegGrad);
  r.Register("", "Reciprocal", ReciprocalGrad);
  r.Register("", "Pow", PowGrad);
  r.Register("", "Where", WhereGrad);
  r.Register("", "Cast", CastGrad);
  r.Register("", "Add", AddSubGrad);
  r.Register("", "Sub", AddSubGrad);
  r.Register("", "Mul", MulDivGrad);
  r.Register("", "Div", MulDivGrad);
}

}  // namespace whittle
