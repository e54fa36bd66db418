// Weight-sharing op (domain ai.whittle), written by compress-model --cluster:
//   Y = CodebookMatMul(A, codebook, indices[, bias])   bits (4|8), out_features N, in_features K
// A [..., K] float32; W [N, K] is codebook[index] per weight (lib/ir/codebook_format.h gives the
// packing); Y [..., N] = A W^T + bias. The packed length, codebook size and bias length are
// checked here whenever the inputs' shapes are known, and the indices themselves by the kernel
// at load.
#include <string>

#include "lib/ir/codebook_format.h"
#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

Status CheckCodebookAttrs(const Node& node, int) {
  const CodebookAttrs a = CodebookAttrsOf(node.attrs);
  const int64_t bits = a.bits, n = a.n, k = a.k;
  if (bits != 4 && bits != 8) return InvalidArgument(node.DebugName() + ": bits must be 4 or 8, got " + std::to_string(bits));
  return CheckLinearFeatures(node, n, k);
}

Status InferCodebookMatMul(InferContext& ctx) {
  const CodebookAttrs ca = CodebookAttrsOf(ctx.attrs());
  const int64_t bits = ca.bits, n = ca.n, k = ca.k;
  const char* names[] = {"A", "codebook", "indices", "bias"};
  const DType want[] = {DType::kFloat32, DType::kFloat32, DType::kUInt8, DType::kFloat32};
  for (int i = 0; i < 4; ++i) {
    const DType t = ctx.InputDType(i);
    if (t != DType::kUndefined && t != want[i])
      return ctx.Error(std::string(names[i]) + " is " + DTypeName(t) + ", expected " + DTypeName(want[i]));
  }
  auto known1 = [&](int i, int64_t* v) {
    const SymShape* s = ctx.InputShape(i);
    if (!s) return true;
    if (s->size() != 1) return false;
    *v = (*s)[0].known() ? (*s)[0].value : -1;
    return true;
  };
  int64_t c = -1, len = -1, nb = -1;
  if (!known1(1, &c) || (c >= 0 && (c < 1 || c > (int64_t{1} << bits))))
    return ctx.Error("the codebook must be [C] with 1 <= C <= " + std::to_string(int64_t{1} << bits));
  if (!known1(2, &len) || (len >= 0 && len != PackedIndexBytes(n * k, bits)))
    return ctx.Error("the packed indices must be uint8 [" + std::to_string(PackedIndexBytes(n * k, bits)) + "] for " +
                     std::to_string(n) + "x" + std::to_string(k) + " weights at " + std::to_string(bits) + " bits");
  if (ctx.HasInput(3) && (!known1(3, &nb) || (nb >= 0 && nb != n)))
    return ctx.Error("the bias must be [" + std::to_string(n) + "]");
  return InferLinearFeaturesOutput(ctx, n, k);
}

}  // namespace

void RegisterCodebookOps(OpRegistry& r) {
  OpDef d;
  d.domain = kWhittleDomain;
  d.op_type = "CodebookMatMul";
  d.min_inputs = 3;
  d.max_inputs = 4;
  d.attrs = {{"bits", AttrType::kInt, true}, {"out_features", AttrType::kInt, true}, {"in_features", AttrType::kInt, true}};
  d.check = CheckCodebookAttrs;
  d.infer = InferCodebookMatMul;
  r.Register(std::move(d));
}

}  // namespace whittle
