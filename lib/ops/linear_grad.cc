// Gradient rules of Gemm and MatMul (lib/ops/linear.cc): products with the other operand,
// transposed as the forward's attributes say; a batched MatMul's summed over the batch dims an
// operand was broadcast along.
#include <optional>

#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

// Y = alpha op(A) op(B) + beta C.
StatusOr<InputGrads> GemmGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const int dy = a.dy;
  const bool ta = n.attrs.GetInt("transA", 0) != 0, tb = n.attrs.GetInt("transB", 0) != 0;
  const float alpha = n.attrs.GetFloat("alpha", 1.f), beta = n.attrs.GetFloat("beta", 1.f);
  const int x = a.in(0), b = a.in(1);
  InputGrads r;
  if (a.need(0)) r.push_back({0, ta ? e.Gemm(b, dy, tb, true, alpha) : e.Gemm(dy, b, false, !tb, alpha)});
  if (a.need(1)) r.push_back({1, tb ? e.Gemm(dy, x, true, ta, alpha) : e.Gemm(x, dy, !ta, false, alpha)});
  if (a.in(2) >= 0 && a.need(2) && beta != 0.f) {
    WH_ASSIGN_OR_RETURN(int dc, SumToShape(e, a.g, dy, n.outputs[0], a.in(2)));
    r.push_back({2, e.Scale(dc, beta)});
  }
  return r;
}

StatusOr<InputGrads> MatMulGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const int dy = a.dy;
  const std::optional<SymShape> sa = ShapeOf(a.g, a.in(0));
  const std::optional<SymShape> sb = ShapeOf(a.g, a.in(1));
  const std::optional<SymShape> so = ShapeOf(a.g, n.outputs[0]);
  if (!sa || !sb || !so || sb->size() < 2 || sa->size() < 2)
    return Unimplemented(n.DebugName() + ": MatMul gradient needs A and B of known rank >= 2");
  InputGrads r;
  if (sb->size() == 2) {  // a 2-D weight: one Gemm over all rows of A
    if (a.need(0)) r.push_back({0, e.Op("MatMul", {dy, e.SwapLast2(a.in(1), 2)})});
    if (a.need(1)) {
      int a2 = a.in(0), dy2 = dy;
      if (sa->size() > 2) {
        const Dim k = (*sa)[sa->size() - 1], nn = (*sb)[1];
        if (!k.known() || !nn.known()) return Unimplemented(n.DebugName() + ": MatMul gradient needs known K and N");
        a2 = e.Op("Reshape", {a.in(0), e.Int64s({-1, k.value})});
        dy2 = e.Op("Reshape", {dy, e.Int64s({-1, nn.value})});
      }
      r.push_back({1, e.Gemm(a2, dy2, true, false)});
    }
    return r;
  }
  // Batched on both sides: dA = dY B^T, dB = A^T dY, each summed over the batch dims it was
  // broadcast along.
  auto batched = [&](const SymShape& target) {
    SymShape s(so->begin(), so->end() - 2);
    s.insert(s.end(), target.end() - 2, target.end());
    return s;
  };
  if (a.need(0)) {
    const SymShape from = batched(*sa);
    r.push_back({0, SumToShapeOf(e, e.Op("MatMul", {dy, e.SwapLast2(a.in(1), sb->size())}), &from, &*sa)});
  }
  if (a.need(1)) {
    const SymShape from = batched(*sb);
    r.push_back({1, SumToShapeOf(e, e.Op("MatMul", {e.SwapLast2(a.in(0), sa->size()), dy}), &from, &*sb)});
  }
  return r;
}

}  // namespace

void RegisterLinearGrads(GradRegistry& r) {
  r.Register("", "Gemm", GemmGrad);
  r.Register("", "MatMul", MatMulGrad);
}

}  // namespace whittle
