#include "runtime/rewrite/fuse_nbits.h"

#include <string>
#include <vector>

#include "kernels/common/int4.h"
#include "lib/ir/domain.h"
#include "runtime/rewrite/match.h"

namespace whittle {

StatusOr<NBitsTensors> BlockedToNBits(const Tensor& w, const Tensor& scale, const Tensor* zp, int64_t block) {
  if (!IsPacked4Bit(w.dtype()) || w.rank() != 2)
    return InvalidArgument("BlockedToNBits: the weight must be int4 or uint4 [K, N], got " +
                           std::string(DTypeName(w.dtype())) + " " + DimsToString(w.dims()));
  if (block < 16 || (block & (block - 1)) != 0)
    return InvalidArgument("BlockedToNBits: block_size " + std::to_string(block) + " is not a power of two >= 16");
  NBitsTensors t;
  NBitsAttrs& a = t.attrs;
  a.K = w.dim(0);
  a.N = w.dim(1);
  a.bits = 4;
  a.block = block;
  const int64_t nb = a.blocks();
  if (scale.dtype() != DType::kFloat32 || scale.dims() != Dims{nb, a.N})
    return InvalidArgument("BlockedToNBits: scale must be float32 [" + std::to_string(nb) + ", " +
                           std::to_string(a.N) + "], got " + DimsToString(scale.dims()));
  if (zp && (zp->dtype() != w.dtype() || zp->dims() != scale.dims()))
    return InvalidArgument("BlockedToNBits: the zero point must have the weight's type and the scale's shape");
  const bool sign = w.dtype() == DType::kInt4;
  const auto* pw = static_cast<const uint8_t*>(w.raw_data());
  auto code = [&](const uint8_t* p, int64_t i) { return sign ? int4::Int4At(p, i) + 8 : int4::UInt4At(p, i); };
  t.b = Tensor(DType::kUInt8, {a.N, nb, a.blob()});
  uint8_t* pb = t.b.data<uint8_t>();
  for (int64_t k = 0; k < a.K; ++k)
    for (int64_t n = 0; n < a.N; ++n) int4::Set4(pb + n * a.row_bytes(), k, code(pw, k * a.N + n));
  t.scales = Tensor(DType::kFloat32, {a.N, nb});
  const float* ps = scale.data<float>();
  float* ts = t.scales.data<float>();
  for (int64_t j = 0; j < nb; ++j)
    for (int64_t n = 0; n < a.N; ++n) ts[n * nb + j] = ps[j * a.N + n];
  // int4 without a zero point is MatMulNBits' default (8); uint4 without one is zero point 0.
  if (zp || !sign) {
    t.zero_points = Tensor(DType::kUInt8, {a.N, a.zp_row_bytes()});
    uint8_t* pz = t.zero_points.data<uint8_t>();
    const auto* src = zp ? static_cast<const uint8_t*>(zp->raw_data()) : nullptr;
    for (int64_t j = 0; j < nb; ++j)
      for (int64_t n = 0; n < a.N; ++n) int4::Set4(pz + n * a.zp_row_bytes(), j, src ? code(src, j * a.N + n) : 0);
  }
  return t;
}

namespace {

struct Match {
  int matmul = -1;
  int dq = -1;
};

// A DequantizeLinear that BlockedToNBits takes: constant int4|uint4 [K, N] weight, blocked along
// axis 0 by a power of two >= 16, constant scale (and zero point).
bool FusableDequantize(const Graph& g, const Node& dq) {
  if (!rewrite::IsOp(dq, "DequantizeLinear") || dq.outputs.size() != 1 || dq.outputs[0] < 0) return false;
  const Tensor* w = rewrite::ConstInput(g, dq, 0);
  const Tensor* s = rewrite::ConstInput(g, dq, 1);
  if (!w || !s || !IsPacked4Bit(w->dtype()) || w->rank() != 2) return false;
  if (rewrite::InputAt(dq, 2) >= 0 && !rewrite::ConstInput(g, dq, 2)) return false;
  const int64_t axis = dq.attrs.GetInt("axis", 1), block = dq.attrs.GetInt("block_size", 0);
  if (axis != 0 && axis != -2) return false;
  if (block < 16 || (block & (block - 1)) != 0) return false;
  const int64_t nb = (w->dim(0) + block - 1) / block;
  return s->dtype() == DType::kFloat32 && s->dims() == Dims{nb, w->dim(1)} && !g.IsGraphOutput(dq.outputs[0]);
}

}  // namespace

Status FuseNBits(Graph& g, int* count) {
  std::vector<Match> matches;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& mm = g.nodes()[i];
    if (!rewrite::IsOp(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1) continue;
    const Node* dq = rewrite::Producer(g, mm.inputs[1]);
    if (!dq || !FusableDequantize(g, *dq)) continue;
    matches.push_back({static_cast<int>(i), g.value(mm.inputs[1]).producer});
  }
  for (const Match& m : matches) {
    const Node dq = g.nodes()[static_cast<size_t>(m.dq)];
    const Tensor* zp = rewrite::ConstInput(g, dq, 2);
    WH_ASSIGN_OR_RETURN(NBitsTensors t, BlockedToNBits(*rewrite::ConstInput(g, dq, 0), *rewrite::ConstInput(g, dq, 1),
                                                       zp, dq.attrs.GetInt("block_size", 0)));
    const std::string base = g.value(dq.inputs[0]).name;
    std::vector<int> inputs{g.nodes()[static_cast<size_t>(m.matmul)].inputs[0],
                            g.AddInitializer(g.UniqueName(base + "_nbits_B"), std::move(t.b)),
                            g.AddInitializer(g.UniqueName(base + "_nbits_scales"), std::move(t.scales))};
    if (t.zero_points.defined())
      inputs.push_back(g.AddInitializer(g.UniqueName(base + "_nbits_zp"), std::move(t.zero_points)));
    Node& mm = g.nodes()[static_cast<size_t>(m.matmul)];
    mm.op_type = "MatMulNBits";
    mm.domain = kMicrosoftDomain;
    mm.inputs = std::move(inputs);
    mm.attrs = AttributeMap();
    mm.attrs.Set("K", Attribute::Int(t.attrs.K));
    mm.attrs.Set("N", Attribute::Int(t.attrs.N));
    mm.attrs.Set("bits", Attribute::Int(4));
    mm.attrs.Set("block_size", Attribute::Int(t.attrs.block));
  }
  if (!matches.empty() && g.OpsetFor(kMicrosoftDomain) == 0) g.opset_imports[kMicrosoftDomain] = 1;
  *count += static_cast<int>(matches.size());
  return Status::Ok();
}

}  // namespace whittle
