// Gradient rule of weight sharing (ai.whittle CodebookMatMul, lib/ops/codebook.cc; Y = A W^T +
// bias, W[n, k] = codebook[index]): the codebook entries train, the assignment stays. With the
// indices unpacked once into an int32 [N, K] constant, W = Gather(codebook, indices), dA = dY W,
// dW = dY^T A (rows flattened), and each entry's gradient is the sum of dW over its weights
// (GatherGrad's scatter-add).
#include "lib/ir/codebook_format.h"
#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

StatusOr<InputGrads> CodebookMatMulGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const int dy = a.dy;
  InputGrads r;
  const CodebookAttrs at = CodebookAttrsOf(n.attrs);
  const int64_t bits = at.bits, N = at.n, K = at.k;
  const Tensor* packed = a.g.ConstInput(n, 2, DType::kUInt8);
  if (!packed || packed->numel() != PackedIndexBytes(N * K, bits))
    return Unimplemented(n.DebugName() + ": CodebookMatMul gradient needs constant packed indices");
  Tensor idx(DType::kInt32, {N, K});
  for (int64_t i = 0; i < N * K; ++i)
    idx.data<int32_t>()[i] = static_cast<int32_t>(CodebookIndexAt(packed->data<uint8_t>(), i, bits));
  const int iv = e.Const(idx, "codebook_indices");
  const int w = e.Op("Gather", {n.inputs[1], iv});  // [N, K]
  if (a.need(0)) r.push_back({0, e.Op("MatMul", {dy, w})});
  if (a.need(1)) {
    const int a2 = e.Op("Reshape", {n.inputs[0], e.Int64s({-1, K})});
    const int dy2 = e.Op("Reshape", {dy, e.Int64s({-1, N})});
    const int dw = e.Gemm(dy2, a2, true, false);
    r.push_back({1, e.Op("GatherGrad", {n.inputs[1], iv, dw}, {}, kWhittleDomain)});
  }
  if (n.inputs.size() > 3 && n.inputs[3] >= 0 && a.need(3))
    r.push_back({3, e.ReduceSum(e.Op("Reshape", {dy, e.Int64s({-1, N})}), {0}, false)});
  return r;
}

}  // namespace

void RegisterCodebookGrads(GradRegistry& r) { r.Register(kWhittleDomain, "CodebookMatMul", CodebookMatMulGrad); }

}  // namespace whittle
