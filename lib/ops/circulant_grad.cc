// Gradient rule of the block-circulant layers (ai.whittle BlockCirculantMatMul,
// lib/ops/circulant.cc; W[pB+i, qB+j] = c_pq[(i-j) mod B]): the gradients run through FFTs as the
// forward does. W^T is block-circulant too — its block (q, p) is c_pq reversed, c'[d] = c[(-d)
// mod B] — so dA = BlockCirculantMatMul(dY, blocks transposed and reversed) with the features
// swapped; dblocks = BlockCirculantMatMulGradWeight (the batch's circular cross-correlations, in
// the frequency domain); dbias sums dY's rows.
#include <vector>

#include "lib/ir/circulant_format.h"
#include "lib/ops/grad_rule.h"

namespace whittle {
namespace {

StatusOr<InputGrads> BlockCirculantMatMulGrad(const GradArgs& a) {
  Emitter& e = a.e;
  const Node& n = a.n;
  const int dy = a.dy;
  InputGrads r;
  const CirculantAttrs ca = CirculantAttrsOf(n.attrs);
  WH_RETURN_IF_ERROR(CheckCirculantAttrs(ca).WithContext(n.DebugName()));
  if (a.need(0)) {
    AttributeMap perm;
    perm.Set("perm", Attribute::Ints({1, 0, 2}));
    std::vector<int64_t> rev(static_cast<size_t>(ca.block));
    for (int64_t d = 0; d < ca.block; ++d) rev[static_cast<size_t>(d)] = (ca.block - d) % ca.block;
    AttributeMap axis;
    axis.Set("axis", Attribute::Int(2));
    const int bt = e.Op("Gather", {e.Op("Transpose", {n.inputs[1]}, perm), e.Int64s(rev)}, axis);
    AttributeMap t;
    t.Set("block", Attribute::Int(ca.block));
    t.Set("out_features", Attribute::Int(ca.k));
    t.Set("in_features", Attribute::Int(ca.n));
    r.push_back({0, e.Op("BlockCirculantMatMul", {dy, bt}, t, kWhittleDomain)});
  }
  if (a.need(1)) r.push_back({1, e.Op("BlockCirculantMatMulGradWeight", {dy, n.inputs[0]}, n.attrs, kWhittleDomain)});
  if (n.inputs.size() > 2 && n.inputs[2] >= 0 && a.need(2))
    r.push_back({2, e.ReduceSum(e.Op("Reshape", {dy, e.Int64s({-1, ca.n})}), {0}, false)});
  return r;
}

}  // namespace

void RegisterCirculantGrads(GradRegistry& r) {
  r.Register(kWhittleDomain, "BlockCirculantMatMul", BlockCirculantMatMulGrad);
}

}  // namespace whittle
