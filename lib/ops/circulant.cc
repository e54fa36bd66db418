// Block-circulant layer (domain ai.whittle, CirCNN), written by compress-model --circulant:
//   Y = BlockCirculantMatMul(A, blocks[, bias])   block B, out_features N, in_features K
// A [..., K] float32; blocks float32 [P, Q, B] with P = ceil(N/B), Q = ceil(K/B), one vector per
// B x B circulant block of W [N, K] (the convention is in lib/ir/circulant_format.h:
// W[pB+i, qB+j] = blocks[p, q, (i-j) mod B]); bias float32 [N]; Y [..., N] = A W^T + bias.
// Shapes are checked here whenever they are known, and again by the kernel at load.
// Its gradient op, which fine-tuning emits (the input's gradient is BlockCirculantMatMul itself
// against the transposed blocks):
//   dblocks = BlockCirculantMatMulGradWeight(dY, A)   the same attributes; dY [..., N], A [..., K]
// dblocks [P, Q, B] = d/dblocks sum(BlockCirculantMatMul(A, blocks) * dY).
#include <string>

#include "lib/ir/circulant_format.h"
#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

Status CheckCirculantNode(const Node& node, int) {
  Status s = CheckCirculantAttrs(CirculantAttrsOf(node.attrs));
  if (!s.ok()) return InvalidArgument(node.DebugName() + ": " + s.message());
  return Status::Ok();
}

Status InferBlockCirculantMatMul(InferContext& ctx) {
  const CirculantAttrs a = CirculantAttrsOf(ctx.attrs());
  if (Status s = CheckCirculantAttrs(a); !s.ok()) return ctx.Error(s.message());
  const char* names[] = {"A", "blocks", "bias"};
  for (int i = 0; i < 3; ++i) {
    const DType t = ctx.InputDType(i);
    if (t != DType::kUndefined && t != DType::kFloat32)
      return ctx.Error(std::string(names[i]) + " is " + DTypeName(t) + ", expected float32");
  }
  const int64_t want[] = {a.p(), a.q(), a.block};
  if (const SymShape* s = ctx.InputShape(1)) {
    bool ok = s->size() == 3;
    for (size_t i = 0; ok && i < 3; ++i) ok = !(*s)[i].known() || (*s)[i].value == want[i];
    if (!ok)
      return ctx.Error("the block vectors must be [" + std::to_string(want[0]) + ", " + std::to_string(want[1]) + ", " +
                       std::to_string(want[2]) + "], got " + SymShapeToString(*s));
  }
  if (ctx.HasInput(2))
    if (const SymShape* s = ctx.InputShape(2))
      if (s->size() != 1 || ((*s)[0].known() && (*s)[0].value != a.n))
        return ctx.Error("the bias must be [" + std::to_string(a.n) + "], got " + SymShapeToString(*s));
  return InferLinearFeaturesOutput(ctx, a.n, a.k);
}

Status InferBlockCirculantMatMulGradWeight(InferContext& ctx) {
  const CirculantAttrs a = CirculantAttrsOf(ctx.attrs());
  if (Status s = CheckCirculantAttrs(a); !s.ok()) return ctx.Error(s.message());
  const char* names[] = {"dY", "A"};
  const int64_t last[] = {a.n, a.k};
  for (int i = 0; i < 2; ++i) {
    const DType t = ctx.InputDType(i);
    if (t != DType::kUndefined && t != DType::kFloat32)
      return ctx.Error(std::string(names[i]) + " is " + DTypeName(t) + ", expected float32");
    if (const SymShape* s = ctx.InputShape(i))
      if (s->empty() || (s->back().known() && s->back().value != last[i]))
        return ctx.Error(std::string(names[i]) + " " + SymShapeToString(*s) + " must end in " + std::to_string(last[i]));
  }
  ctx.SetOutput(0, DType::kFloat32, SymShape{Dim(a.p()), Dim(a.q()), Dim(a.block)});
  return Status::Ok();
}

}  // namespace

void RegisterCirculantOps(OpRegistry& r) {
  OpDef d;
  d.domain = kWhittleDomain;
  d.op_type = "BlockCirculantMatMul";
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = {{"block", AttrType::kInt, true}, {"out_features", AttrType::kInt, true}, {"in_features", AttrType::kInt, true}};
  d.check = CheckCirculantNode;
  d.infer = InferBlockCirculantMatMul;
  OpDef grad = d;
  r.Register(std::move(d));
  grad.op_type = "BlockCirculantMatMulGradWeight";
  grad.min_inputs = grad.max_inputs = 2;
  grad.infer = InferBlockCirculantMatMulGradWeight;
  r.Register(std::move(grad));
}

}  // namespace whittle
