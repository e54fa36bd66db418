// OpDefs for Gemm (transA/transB, alpha, beta, optional C broadcast to [M, N]; the opset<7
// `broadcast` attribute is accepted and C is optional in every opset) and MatMul (numpy matmul:
// 1-D operands are promoted and the promoted dim removed, batch dims broadcast) and Einsum (opset
// 12; the equation is parsed and bound to shapes by lib/ir/einsum.h).
#include <string>

#include "lib/ir/einsum.h"
#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

Status CheckSameDType(const InferContext& ctx, int n) {
  const DType d0 = ctx.InputDType(0);
  for (int i = 1; i < n; ++i) {
    const DType di = ctx.InputDType(i);
    if (ctx.HasInput(i) && di != DType::kUndefined && d0 != DType::kUndefined && di != d0)
      return ctx.Error("input " + Str(i) + " is " + DTypeName(di) + " but input 0 is " + DTypeName(d0));
  }
  return Status::Ok();
}

Status InferGemm(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckSameDType(ctx, 3));
  const SymShape* a = ctx.InputShape(0);
  const SymShape* b = ctx.InputShape(1);
  if (a && a->size() != 2) return ctx.Error("A must be 2-D, got " + SymShapeToString(*a));
  if (b && b->size() != 2) return ctx.Error("B must be 2-D, got " + SymShapeToString(*b));
  const bool ta = ctx.attrs().GetInt("transA", 0) != 0, tb = ctx.attrs().GetInt("transB", 0) != 0;
  Dim m, n, ka, kb;
  if (a) {
    m = (*a)[ta ? 1 : 0];
    ka = (*a)[ta ? 0 : 1];
  }
  if (b) {
    kb = (*b)[tb ? 1 : 0];
    n = (*b)[tb ? 0 : 1];
  }
  if (ka.known() && kb.known() && ka.value != kb.value)
    return ctx.Error("inner dims differ: op(A) has K=" + Str(ka.value) + ", op(B) has K=" + Str(kb.value));
  if (ctx.HasInput(2)) {
    const SymShape* c = ctx.InputShape(2);
    if (c) {
      if (c->size() > 2) return ctx.Error("C must have rank <= 2, got " + SymShapeToString(*c));
      const Dim cm = c->size() == 2 ? (*c)[0] : Dim(1);
      const Dim cn = c->empty() ? Dim(1) : c->back();
      const bool bad_m = cm.known() && m.known() && cm.value != 1 && cm.value != m.value;
      const bool bad_n = cn.known() && n.known() && cn.value != 1 && cn.value != n.value;
      if (bad_m || bad_n) return ctx.Error("C " + SymShapeToString(*c) + " does not broadcast to [M, N]");
    }
  }
  ctx.SetOutput(0, ctx.InputDType(0), (a || b) ? std::optional<SymShape>(SymShape{m, n}) : std::nullopt);
  return Status::Ok();
}

Status InferMatMul(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckSameDType(ctx, 2));
  const SymShape* a = ctx.InputShape(0);
  const SymShape* b = ctx.InputShape(1);
  if (a && a->empty()) return ctx.Error("A must have rank >= 1 (MatMul does not take scalars)");
  if (b && b->empty()) return ctx.Error("B must have rank >= 1 (MatMul does not take scalars)");
  if (!a || !b) {
    ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
    return Status::Ok();
  }
  const bool a_vec = a->size() == 1, b_vec = b->size() == 1;
  const SymShape ad = a_vec ? SymShape{Dim(1), (*a)[0]} : *a;
  const SymShape bd = b_vec ? SymShape{(*b)[0], Dim(1)} : *b;
  const Dim ka = ad.back(), kb = bd[bd.size() - 2];
  if (ka.known() && kb.known() && ka.value != kb.value)
    return ctx.Error("inner dims differ: A " + SymShapeToString(*a) + " x B " + SymShapeToString(*b));
  auto batch = BroadcastShapes(SymShape(ad.begin(), ad.end() - 2), SymShape(bd.begin(), bd.end() - 2));
  if (!batch.ok()) return ctx.Error("batch dims: " + batch.status().message());
  SymShape out = *batch;
  if (!a_vec) out.push_back(ad[ad.size() - 2]);
  if (!b_vec) out.push_back(bd.back());
  ctx.SetOutput(0, ctx.InputDType(0), out);
  return Status::Ok();
}

Status CheckEinsum(const Node& node, int) {
  if (!node.attrs.Has("equation")) return InvalidArgument(node.DebugName() + ": the equation attribute is required");
  auto eq = EinsumEquation::Parse(node.attrs.GetString("equation", ""), static_cast<int>(node.inputs.size()));
  if (!eq.ok()) return InvalidArgument(node.DebugName() + ": " + eq.status().message());
  return Status::Ok();
}

Status InferEinsum(InferContext& ctx) {
  WH_RETURN_IF_ERROR(CheckSameDType(ctx, ctx.num_inputs()));
  auto eq = EinsumEquation::Parse(ctx.attrs().GetString("equation", ""), ctx.num_inputs());
  if (!eq.ok()) return ctx.Error(eq.status().message());
  std::vector<SymShape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const SymShape* s = ctx.InputShape(i);
    if (!s) {
      ctx.SetOutput(0, ctx.InputDType(0), std::nullopt);
      return Status::Ok();
    }
    shapes.push_back(*s);
  }
  auto dims = BindEinsumDims(*eq, shapes);
  if (!dims.ok()) return ctx.Error(dims.status().message());
  ctx.SetOutput(0, ctx.InputDType(0), dims->output);
  return Status::Ok();
}

}  // namespace

void RegisterLinearOps(OpRegistry& r) {
  OpDef gemm;
  gemm.op_type = "Gemm";
  gemm.min_inputs = 2;
  gemm.max_inputs = 3;
  gemm.attrs = {{"alpha", AttrType::kFloat}, {"beta", AttrType::kFloat}, {"transA", AttrType::kInt},
                {"transB", AttrType::kInt}, {"broadcast", AttrType::kInt}};
  gemm.infer = InferGemm;
  r.Register(std::move(gemm));

  OpDef matmul;
  matmul.op_type = "MatMul";
  matmul.min_inputs = 2;
  matmul.max_inputs = 2;
  matmul.infer = InferMatMul;
  r.Register(std::move(matmul));

  OpDef einsum;
  einsum.op_type = "Einsum";
  einsum.since_opset = 12;
  einsum.min_inputs = 1;
  einsum.max_inputs = 1 << 20;
  einsum.attrs = {{"equation", AttrType::kString, true}};
  einsum.check = CheckEinsum;
  einsum.infer = InferEinsum;
  r.Register(std::move(einsum));
}

}  // namespace whittle
