// Binarized layers (domain ai.whittle), written by compress-model --binarize (the bit layout and
// arithmetic are in lib/ir/binary_format.h):
//   Y = BinaryMatMul(A, bits, alpha[, bias])   in_features K, out_features N, activations
//       A [..., K] float32, bits uint64 [N, ceil(K/64)], alpha/bias float32 [N]; Y [..., N]
//   Y = BinaryConv(X, bits, alpha[, bias])     in_channels C, out_channels M, kernel_shape (2-D),
//       strides, pads, dilations, auto_pad, group, activations; X [N, C, H, W] float32,
//       bits uint64 [M, ceil(C/group*kh*kw/64)], alpha/bias [M]; Y [N, M, OH, OW] as Conv's
// activations is "float" (weights binary) or "binary" (XNOR-Net: inputs binary too, scaled by
// their mean |x|). Input shapes are checked here whenever they are known; the padding bits of the
// constant weights are checked by the kernels at load.
#include <string>

#include "lib/ir/binary_format.h"
#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"
#include "lib/ops/window.h"

namespace whittle {
namespace {

Status CheckActivations(const Node& node) {
  auto act = ParseBinaryActivations(node.attrs.GetString("activations", "float"));
  if (!act.ok()) return InvalidArgument(node.DebugName() + ": " + act.status().message());
  return Status::Ok();
}

Status CheckBinaryMatMul(const Node& node, int) {
  WH_RETURN_IF_ERROR(CheckActivations(node));
  const int64_t n = node.attrs.GetInt("out_features", 0), k = node.attrs.GetInt("in_features", 0);
  return CheckLinearFeatures(node, n, k);
}

Status CheckBinaryConv(const Node& node, int) {
  WH_RETURN_IF_ERROR(CheckActivations(node));
  WH_RETURN_IF_ERROR(CheckWindowAttributes(node));
  const int64_t c = node.attrs.GetInt("in_channels", 0), m = node.attrs.GetInt("out_channels", 0),
                g = node.attrs.GetInt("group", 1);
  if (node.attrs.GetInts("kernel_shape").size() != 2)
    return InvalidArgument(node.DebugName() + ": kernel_shape must have 2 values (BinaryConv is 2-D)");
  if (c < 1 || m < 1 || g < 1 || c % g != 0 || m % g != 0)
    return InvalidArgument(node.DebugName() + ": group " + std::to_string(g) + " must divide in_channels " +
                           std::to_string(c) + " and out_channels " + std::to_string(m) + " (all >= 1)");
  return Status::Ok();
}

// bits [n, words], alpha [n], bias [n] against what shapes are known.
Status InferParams(InferContext& ctx, int64_t n, int64_t k) {
  const char* names[] = {"A", "bits", "alpha", "bias"};
  const DType want[] = {DType::kFloat32, DType::kUInt64, DType::kFloat32, DType::kFloat32};
  for (int i = 0; i < 4; ++i) {
    const DType t = ctx.InputDType(i);
    if (t != DType::kUndefined && t != want[i])
      return ctx.Error(std::string(names[i]) + " is " + DTypeName(t) + ", expected " + DTypeName(want[i]));
  }
  const int64_t words = BinaryWords(k);
  if (const SymShape* s = ctx.InputShape(1)) {
    if (s->size() != 2 || ((*s)[0].known() && (*s)[0].value != n) || ((*s)[1].known() && (*s)[1].value != words))
      return ctx.Error("the packed weight bits must be uint64 [" + std::to_string(n) + ", " + std::to_string(words) +
                       "] (" + std::to_string(k) + " inputs, 64 per word), got " + SymShapeToString(*s));
  }
  for (int i = 2; i < 4; ++i)
    if (const SymShape* s = ctx.InputShape(i)) {
      if (s->size() != 1 || ((*s)[0].known() && (*s)[0].value != n))
        return ctx.Error(std::string(names[i]) + " must be [" + std::to_string(n) + "], got " + SymShapeToString(*s));
    }
  return Status::Ok();
}

Status InferBinaryMatMul(InferContext& ctx) {
  const int64_t n = ctx.attrs().GetInt("out_features", 0), k = ctx.attrs().GetInt("in_features", 0);
  WH_RETURN_IF_ERROR(InferParams(ctx, n, k));
  return InferLinearFeaturesOutput(ctx, n, k);
}

Status InferBinaryConv(InferContext& ctx) {
  const int64_t c = ctx.attrs().GetInt("in_channels", 0), m = ctx.attrs().GetInt("out_channels", 0),
                g = ctx.attrs().GetInt("group", 1);
  const auto ks = ctx.attrs().GetInts("kernel_shape");
  WH_RETURN_IF_ERROR(InferParams(ctx, m, c / g * ks[0] * ks[1]));
  const SymShape* x = ctx.InputShape(0);
  if (!x) {
    ctx.SetOutput(0, DType::kFloat32, std::nullopt);
    return Status::Ok();
  }
  if (x->size() != 4 || ((*x)[1].known() && (*x)[1].value != c))
    return ctx.Error("X " + SymShapeToString(*x) + " must be [N, " + std::to_string(c) + ", H, W]");
  SymShape spatial;
  WH_RETURN_IF_ERROR(InferWindowOutput(ctx, SymShape(x->begin() + 2, x->end()), ks, &spatial));
  SymShape y{(*x)[0], Dim(m)};
  y.insert(y.end(), spatial.begin(), spatial.end());
  ctx.SetOutput(0, DType::kFloat32, y);
  return Status::Ok();
}

}  // namespace

void RegisterBinaryOps(OpRegistry& r) {
  OpDef d;
  d.domain = kWhittleDomain;
  d.op_type = "BinaryMatMul";
  d.min_inputs = 3;
  d.max_inputs = 4;
  d.attrs = {{"out_features", AttrType::kInt, true},
             {"in_features", AttrType::kInt, true},
             {"activations", AttrType::kString, false}};
  d.check = CheckBinaryMatMul;
  d.infer = InferBinaryMatMul;
  r.Register(d);

  OpDef c = d;
  c.op_type = "BinaryConv";
  c.attrs = {{"in_channels", AttrType::kInt, true}, {"out_channels", AttrType::kInt, true},
             {"kernel_shape", AttrType::kInts, true}, {"strides", AttrType::kInts, false},
             {"pads", AttrType::kInts, false},        {"dilations", AttrType::kInts, false},
             {"auto_pad", AttrType::kString, false},  {"group", AttrType::kInt, false},
             {"activations", AttrType::kString, false}};
  c.check = CheckBinaryConv;
  c.infer = InferBinaryConv;
  r.Register(std::move(c));

  // Y = SignSte(X): +1 where X >= 0, -1 elsewhere (float32). Training graphs use it for a binary
  // layer's latent weights; its gradient rule is the straight-through estimator (dX = dY).
  OpDef st;
  st.domain = kWhittleDomain;
  st.op_type = "SignSte";
  st.infer = [](InferContext& ctx) {
    const DType t = ctx.InputDType(0);
    if (t != DType::kUndefined && t != DType::kFloat32) return ctx.Error(std::string("X is ") + DTypeName(t) + ", expected float32");
    const SymShape* x = ctx.InputShape(0);
    ctx.SetOutput(0, DType::kFloat32, x ? std::optional<SymShape>(*x) : std::nullopt);
    return Status::Ok();
  };
  r.Register(std::move(st));
}

}  // namespace whittle
