#include "runtime/training/grad_rules.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "lib/ir/circulant_format.h"
#include "lib/ir/codebook_format.h"
#include "lib/ops/op_def.h"
#include "runtime/training/lift.h"

namespace whittle::training {
namespace {

// dy (shape out) summed down to the shape of target under numpy broadcasting: leading extra dims
// are summed away, dims where target has 1 and out does not are summed with keepdims.
int SumToShapeOf(Emitter& e, int dy, const SymShape* so, const SymShape* st) {
  if (*so == *st) return dy;
  const size_t lead = so->size() - st->size();
  std::vector<int64_t> keep;
  for (size_t i = 0; i < st->size(); ++i) {
    const Dim& dt = (*st)[i];
    const Dim& d = (*so)[i + lead];
    if (dt.known() && dt.value == 1 && !(d.known() && d.value == 1)) keep.push_back(static_cast<int64_t>(i + lead));
  }
  int r = dy;
  if (!keep.empty()) r = e.ReduceSum(r, keep, true);
  if (lead > 0) {
    std::vector<int64_t> axes;
    for (size_t i = 0; i < lead; ++i) axes.push_back(static_cast<int64_t>(i));
    r = e.ReduceSum(r, axes, false);
  }
  return r;
}

StatusOr<int> SumToShape(Emitter& e, const Graph& g, int dy, int out, int target) {
  const std::optional<SymShape> so = ShapeOf(g, out);
  const std::optional<SymShape> st = ShapeOf(g, target);
  if (!so || !st || so->size() < st->size()) return InvalidArgument("gradient of a broadcast needs known ranks");
  return SumToShapeOf(e, dy, &*so, &*st);
}

int64_t NormAxis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

// A constant int64 input as values (nullopt when absent or not a constant).
std::optional<std::vector<int64_t>> ConstInts(const Graph& g, const Node& n, size_t slot) {
  if (slot >= n.inputs.size() || n.inputs[slot] < 0) return std::nullopt;
  const Tensor* t = g.ConstInput(n, slot);
  if (!t || (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)) return std::nullopt;
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t->numel(); ++i)
    v.push_back(t->dtype() == DType::kInt64 ? t->data<int64_t>()[i] : t->data<int32_t>()[i]);
  return v;
}



// The reduced axes of a ReduceSum/ReduceMean (attribute, or input 1 where the opset has it),
// normalized and sorted; *noop when empty axes mean identity (noop_with_empty_axes).
StatusOr<std::vector<int64_t>> ReduceAxes(const Graph& g, const Node& n, size_t rank, bool* noop) {
  std::vector<int64_t> axes = n.attrs.GetInts("axes");
  if (n.inputs.size() > 1 && n.inputs[1] >= 0) {
    auto c = ConstInts(g, n, 1);
    if (!c) return Unimplemented(n.DebugName() + ": " + n.op_type + " gradient needs constant axes");
    axes = *c;
  }
  *noop = false;
  if (axes.empty()) {
    if (n.attrs.GetInt("noop_with_empty_axes", 0) != 0) {
      *noop = true;
      return axes;
    }
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int64_t>(i));
  }
  for (int64_t& a : axes) {
    a = NormAxis(a, rank);
    if (a < 0 || a >= static_cast<int64_t>(rank)) return InvalidArgument(n.DebugName() + ": axis out of range");
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

// Split: the output gradients concatenated back (zeros for outputs no gradient reaches).
StatusOr<InputGrads> SplitGrad(Emitter& e, const Graph& g, const Node& n, const std::vector<int>& dys) {
  const std::optional<SymShape> sx = ShapeOf(g, n.inputs[0]);
  if (!sx) return Unimplemented(n.DebugName() + ": Split gradient needs a known rank");
  const int64_t axis = NormAxis(n.attrs.GetInt("axis", 0), sx->size());
  std::vector<int> parts;
  for (size_t k = 0; k < n.outputs.size(); ++k)
    parts.push_back(k < dys.size() && dys[k] >= 0 ? dys[k] : e.ZerosLike(n.outputs[k]));
  return InputGrads{{0, parts.size() == 1 ? parts[0] : e.Concat(parts, axis)}};
}

// The gradient rules. dys: the gradient of each output (-1: none reaches it); need(slot): whether
// that input needs a gradient.
// Weight sharing (ai.whittle CodebookMatMul, Y = A W^T + bias, W[n, k] = codebook[index]): the
// codebook entries train, the assignment stays. With the indices unpacked once into an int32
// [N, K] constant, W = Gather(codebook, indices), dA = dY W, dW = dY^T A (rows flattened), and
// each entry's gradient is the sum of dW over its weights (GatherGrad's scatter-add).
StatusOr<InputGrads> CodebookMatMulGrad(Emitter& e, const Graph& g, const Node& n, int dy, const Need& need) {
  InputGrads r;
  const CodebookAttrs a = CodebookAttrsOf(n.attrs);
  const int64_t bits = a.bits, N = a.n, K = a.k;
  const Tensor* packed = g.ConstInput(n, 2, DType::kUInt8);
  if (!packed || packed->numel() != PackedIndexBytes(N * K, bits))
    return Unimplemented(n.DebugName() + ": CodebookMatMul gradient needs constant packed indices");
  Tensor idx(DType::kInt32, {N, K});
  for (int64_t i = 0; i < N * K; ++i)
    idx.data<int32_t>()[i] = static_cast<int32_t>(CodebookIndexAt(packed->data<uint8_t>(), i, bits));
  const int iv = e.Const(idx, "codebook_indices");
  const int w = e.Op("Gather", {n.inputs[1], iv});  // [N, K]
  if (need(0)) r.push_back({0, e.Op("MatMul", {dy, w})});
  if (need(1)) {
    const int a2 = e.Op("Reshape", {n.inputs[0], e.Int64s({-1, K})});
    const int dy2 = e.Op("Reshape", {dy, e.Int64s({-1, N})});
    const int dw = e.Gemm(dy2, a2, true, false);
    r.push_back({1, e.Op("GatherGrad", {n.inputs[1], iv, dw}, {}, kWhittleDomain)});
  }
  if (n.inputs.size() > 3 && n.inputs[3] >= 0 && need(3))
    r.push_back({3, e.ReduceSum(e.Op("Reshape", {dy, e.Int64s({-1, N})}), {0}, false)});
  return r;
}

// Block-circulant layers (ai.whittle BlockCirculantMatMul, W[pB+i, qB+j] = c_pq[(i-j) mod B]):
// the gradients run through FFTs as the forward does. W^T is block-circulant too — its block
// (q, p) is c_pq reversed, c'[d] = c[(-d) mod B] — so dA = BlockCirculantMatMul(dY, blocks
// transposed and reversed) with the features swapped; dblocks = BlockCirculantMatMulGradWeight
// (the batch's circular cross-correlations, in the frequency domain); dbias sums dY's rows.
StatusOr<InputGrads> CirculantGrad(Emitter& e, const Node& n, int dy, const Need& need) {
  InputGrads r;
  const CirculantAttrs a = CirculantAttrsOf(n.attrs);
  WH_RETURN_IF_ERROR(CheckCirculantAttrs(a).WithContext(n.DebugName()));
  if (need(0)) {
    AttributeMap perm;
    perm.Set("perm", Attribute::Ints({1, 0, 2}));
    std::vector<int64_t> rev(static_cast<size_t>(a.block));
    for (int64_t d = 0; d < a.block; ++d) rev[static_cast<size_t>(d)] = (a.block - d) % a.block;
    AttributeMap axis;
    axis.Set("axis", Attribute::Int(2));
    const int bt = e.Op("Gather", {e.Op("Transpose", {n.inputs[1]}, perm), e.Int64s(rev)}, axis);
    AttributeMap t;
    t.Set("block", Attribute::Int(a.block));
    t.Set("out_features", Attribute::Int(a.k));
    t.Set("in_features", Attribute::Int(a.n));
    r.push_back({0, e.Op("BlockCirculantMatMul", {dy, bt}, t, kWhittleDomain)});
  }
  if (need(1)) r.push_back({1, e.Op("BlockCirculantMatMulGradWeight", {dy, n.inputs[0]}, n.attrs, kWhittleDomain)});
  if (n.inputs.size() > 2 && n.inputs[2] >= 0 && need(2))
    r.push_back({2, e.ReduceSum(e.Op("Reshape", {dy, e.Int64s({-1, a.n})}), {0}, false)});
  return r;
}

}  // namespace

StatusOr<InputGrads> GradOf(Emitter& e, const Graph& g, const Node& n, const std::vector<int>& dys, const Need& need,
                            const RuleContext& ctx) {
  InputGrads r;
  const std::string& op = n.op_type;
  auto in = [&](size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; };
  if (n.domain == kWhittleDomain && op == "CodebookMatMul" && dys.size() == 1 && dys[0] >= 0)
    return CodebookMatMulGrad(e, g, n, dys[0], need);
  if (n.domain == kWhittleDomain && op == "BlockCirculantMatMul" && dys.size() == 1 && dys[0] >= 0)
    return CirculantGrad(e, n, dys[0], need);
  if (n.domain == kWhittleDomain && op == "SignSte" && dys.size() == 1 && dys[0] >= 0) {
    r.push_back({0, dys[0]});  // straight-through: sign's gradient taken as 1
    return r;
  }
  if (!n.domain.empty() && n.domain != "ai.onnx")
    return Unimplemented(n.DebugName() + ": no gradient rule for domain '" + n.domain + "'");
  if (op == "Split") return SplitGrad(e, g, n, dys);
  for (size_t k = 1; k < dys.size(); ++k)
    if (dys[k] >= 0)
      return Unimplemented(n.DebugName() + ": no gradient through output " + std::to_string(k) + " of " + op);
  const int dy = dys.empty() ? -1 : dys[0];
  if (dy < 0) return r;
  if (op == "Gemm") {
    const bool ta = n.attrs.GetInt("transA", 0) != 0, tb = n.attrs.GetInt("transB", 0) != 0;
    const float alpha = n.attrs.GetFloat("alpha", 1.f), beta = n.attrs.GetFloat("beta", 1.f);
    const int a = in(0), b = in(1);
    // Y = alpha op(A) op(B) + beta C.
    if (need(0)) r.push_back({0, ta ? e.Gemm(b, dy, tb, true, alpha) : e.Gemm(dy, b, false, !tb, alpha)});
    if (need(1)) r.push_back({1, tb ? e.Gemm(dy, a, true, ta, alpha) : e.Gemm(a, dy, !ta, false, alpha)});
    if (in(2) >= 0 && need(2) && beta != 0.f) {
      WH_ASSIGN_OR_RETURN(int dc, SumToShape(e, g, dy, n.outputs[0], in(2)));
      r.push_back({2, e.Scale(dc, beta)});
    }
    return r;
  }
  if (op == "MatMul") {
    const std::optional<SymShape> sa = ShapeOf(g, in(0));
    const std::optional<SymShape> sb = ShapeOf(g, in(1));
    const std::optional<SymShape> so = ShapeOf(g, n.outputs[0]);
    if (!sa || !sb || !so || sb->size() < 2 || sa->size() < 2)
      return Unimplemented(n.DebugName() + ": MatMul gradient needs A and B of known rank >= 2");
    if (sb->size() == 2) {  // a 2-D weight: one Gemm over all rows of A
      if (need(0)) r.push_back({0, e.Op("MatMul", {dy, e.SwapLast2(in(1), 2)})});
      if (need(1)) {
        int a2 = in(0), dy2 = dy;
        if (sa->size() > 2) {
          const Dim k = (*sa)[sa->size() - 1], nn = (*sb)[1];
          if (!k.known() || !nn.known()) return Unimplemented(n.DebugName() + ": MatMul gradient needs known K and N");
          a2 = e.Op("Reshape", {in(0), e.Int64s({-1, k.value})});
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
    if (need(0)) {
      const SymShape from = batched(*sa);
      r.push_back({0, SumToShapeOf(e, e.Op("MatMul", {dy, e.SwapLast2(in(1), sb->size())}), &from, &*sa)});
    }
    if (need(1)) {
      const SymShape from = batched(*sb);
      r.push_back({1, SumToShapeOf(e, e.Op("MatMul", {e.SwapLast2(in(0), sa->size()), dy}), &from, &*sb)});
    }
    return r;
  }
  if (op == "Conv") {
    const std::optional<SymShape> sw = ShapeOf(g, in(1));
    if (!sw) return Unimplemented(n.DebugName() + ": Conv gradient needs the weight's shape");
    AttributeMap attrs = n.attrs;
    std::vector<int64_t> kernel;
    for (size_t i = 2; i < sw->size(); ++i) {
      if (!(*sw)[i].known()) return Unimplemented(n.DebugName() + ": Conv gradient needs a known kernel size");
      kernel.push_back((*sw)[i].value);
    }
    attrs.Set("kernel_shape", Attribute::Ints(kernel));
    if (need(0)) r.push_back({0, e.Op("ConvGradInput", {dy, in(1), in(0)}, attrs, kWhittleDomain)});
    if (need(1)) r.push_back({1, e.Op("ConvGradWeight", {in(0), dy}, attrs, kWhittleDomain)});
    if (in(2) >= 0 && need(2)) {
      std::vector<int64_t> axes{0};
      for (size_t i = 2; i < sw->size(); ++i) axes.push_back(static_cast<int64_t>(i));
      r.push_back({2, e.ReduceSum(dy, axes, false)});
    }
    return r;
  }
  if (op == "Relu") {
    // dx = dy where y > 0 (y: the Relu's output; the same set as x > 0).
    r.push_back({0, e.Op("ReluGrad", {n.outputs[0], dy}, {}, kWhittleDomain)});
    return r;
  }
  if (op == "MaxPool") {
    if (n.outputs.size() > 1 && n.outputs[1] >= 0) return Unimplemented(n.DebugName() + ": MaxPool with Indices");
    r.push_back({0, e.Op("MaxPoolGrad", {in(0), dy}, n.attrs, kWhittleDomain)});
    return r;
  }
  if (op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze") {
    r.push_back({0, e.ReshapeLike(dy, in(0))});
    return r;
  }
  auto scalar = [&](float v) { return e.Const(Tensor::Scalar<float>(v), "c"); };
  if (op == "Sigmoid") {  // dy * y * (1 - y)
    const int y = n.outputs[0];
    r.push_back({0, e.Op("Mul", {dy, e.Op("Mul", {y, e.Op("Sub", {scalar(1.f), y})})})});
    return r;
  }
  if (op == "Tanh") {  // dy * (1 - y^2)
    const int y = n.outputs[0];
    r.push_back({0, e.Op("Mul", {dy, e.Op("Sub", {scalar(1.f), e.Op("Mul", {y, y})})})});
    return r;
  }
  if (op == "LeakyRelu") {  // dy where x > 0, else alpha * dy
    const float alpha = n.attrs.GetFloat("alpha", 0.01f);
    r.push_back({0, e.Op("Where", {e.Op("Greater", {in(0), scalar(0.f)}), dy, e.Op("Mul", {dy, scalar(alpha)})})});
    return r;
  }
  if (op == "HardSwish") {  // x * relu6(x + 3) / 6: dy * (0 below -3, 1 above 3, (2x + 3) / 6 between)
    const int x = in(0);
    const int mid = e.Op("Div", {e.Op("Add", {e.Op("Mul", {x, scalar(2.f)}), scalar(3.f)}), scalar(6.f)});
    const int slope = e.Op("Where", {e.Op("Less", {x, scalar(-3.f)}), scalar(0.f),
                                     e.Op("Where", {e.Op("Greater", {x, scalar(3.f)}), scalar(1.f), mid})});
    r.push_back({0, e.Op("Mul", {dy, slope})});
    return r;
  }
  if (op == "Clip") {  // dy where min < x < max (min/max: attributes before opset 11, inputs since)
    const int x = in(0);
    int inside = -1;
    auto bound = [&](size_t slot, const char* attr, bool lower) {
      int b = -1;
      if (in(slot) >= 0) b = in(slot);
      else if (n.attrs.Has(attr)) b = scalar(n.attrs.GetFloat(attr, 0.f));
      if (b < 0) return;
      const int c = e.Op(lower ? "Greater" : "Less", {x, b});
      inside = inside < 0 ? c : e.Op("And", {inside, c});
    };
    bound(1, "min", true);
    bound(2, "max", false);
    r.push_back({0, inside < 0 ? dy : e.Op("Where", {inside, dy, scalar(0.f)})});
    return r;
  }
  if (op == "GlobalAveragePool") {  // dy spread evenly over each plane
    const std::optional<SymShape> sx = ShapeOf(g, in(0));
    if (!sx || sx->size() < 3) return Unimplemented(n.DebugName() + ": GlobalAveragePool gradient needs a known rank");
    int64_t area = 1;
    for (size_t i = 2; i < sx->size(); ++i) {
      if (!(*sx)[i].known()) return Unimplemented(n.DebugName() + ": GlobalAveragePool gradient needs known spatial dims");
      area *= (*sx)[i].value;
    }
    r.push_back({0, e.Op("Expand", {e.Op("Mul", {dy, scalar(1.f / static_cast<float>(area))}), e.Op("Shape", {in(0)})})});
    return r;
  }
  if (op == "Mul" || op == "Div") {
    const int a = in(0), b = in(1);
    if (need(0)) {
      WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, e.Op(op, {dy, b}), n.outputs[0], a));
      r.push_back({0, d});
    }
    if (need(1)) {
      // Mul: dy * a; Div: -dy * a / b^2 = -dy * y / b.
      const int t = op == "Mul" ? e.Op("Mul", {dy, a}) : e.Op("Neg", {e.Op("Div", {e.Op("Mul", {dy, n.outputs[0]}), b})});
      WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, t, n.outputs[0], b));
      r.push_back({1, d});
    }
    return r;
  }
  if (op == "BatchNormalization") {
    // Inference form (running statistics frozen): y = (x - mean) * k + bias, k = scale / sqrt(var + eps).
    if (n.attrs.GetInt("training_mode", 0) != 0 || n.outputs.size() > 1)
      return Unimplemented(n.DebugName() + ": BatchNormalization in training mode");
    const std::optional<SymShape> sx = ShapeOf(g, in(0));
    if (!sx || sx->size() < 2) return Unimplemented(n.DebugName() + ": BatchNormalization gradient needs a known rank");
    std::vector<int64_t> bshape{1, -1};  // [C] -> [1, C, 1, ...]
    for (size_t i = 2; i < sx->size(); ++i) bshape.push_back(1);
    auto per_channel = [&](int v) { return e.Op("Reshape", {v, e.Int64s(bshape)}); };
    const float eps = n.attrs.GetFloat("epsilon", 1e-5f);
    const int inv_std = e.Op("Reciprocal", {e.Op("Sqrt", {e.Op("Add", {in(4), scalar(eps)})})});
    std::vector<int64_t> axes{0};
    for (size_t i = 2; i < sx->size(); ++i) axes.push_back(static_cast<int64_t>(i));
    const bool batch_stats = ctx.bn_training.count(n.name) != 0;
    int xhat = -1;
    if (need(1) || batch_stats)
      xhat = e.Op("Mul", {e.Op("Sub", {in(0), per_channel(in(3))}), per_channel(inv_std)});
    if (need(0)) {
      // Training mode (mean and var are the batch's, functions of x):
      // dx = scale * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), means per channel.
      int g0 = dy;
      if (batch_stats)
        g0 = e.Op("Sub", {e.Op("Sub", {dy, e.ReduceMean(dy, axes, true)}),
                          e.Op("Mul", {xhat, e.ReduceMean(e.Op("Mul", {dy, xhat}), axes, true)})});
      r.push_back({0, e.Op("Mul", {g0, per_channel(e.Op("Mul", {in(1), inv_std}))})});
    }
    if (need(1)) r.push_back({1, e.ReduceSum(e.Op("Mul", {dy, xhat}), axes, false)});
    if (need(2)) r.push_back({2, e.ReduceSum(dy, axes, false)});
    return r;
  }
  if (op == "DequantizeLinear") {
    // The second half of a fake quantization: the straight-through gradient passes on to the
    // QuantizeLinear before it, which masks it.
    r.push_back({0, dy});
    return r;
  }
  if (op == "QuantizeLinear") {
    // Straight-through estimator: dy where x lies inside the representable range
    // [(qmin - zp) * s, (qmax - zp) * s], 0 where the quantization saturates.
    const Tensor* scale = g.ConstInput(n, 1, DType::kFloat32);
    const Tensor* zp = in(2) >= 0 ? g.ConstInput(n, 2) : nullptr;
    const std::optional<SymShape> sx = ShapeOf(g, in(0));
    if (!scale && in(1) >= 0 && g.value(in(1)).producer < 0 && !g.value(in(1)).is_constant() && (in(2) < 0 || zp)) {
      // A live (re-estimated) weight scale, fed as a graph input: it maps the largest |w| of
      // each channel to the stored weights' largest level, inside the range, so nothing
      // saturates and the straight-through gradient is dy itself.
      r.push_back({0, dy});
      return r;
    }
    if (!scale || (in(2) >= 0 && !zp) || !sx)
      return Unimplemented(n.DebugName() + ": fake-quantization gradient needs a constant scale and zero point");
    const DType qt = zp ? zp->dtype() : DType::kUInt8;
    double qmin = 0, qmax = 0;
    RangeOf(qt, &qmin, &qmax);
    const int64_t C = scale->numel();
    int64_t axis = n.attrs.GetInt("axis", 1);
    if (axis < 0) axis += static_cast<int64_t>(sx->size());
    Dims bd;
    if (C > 1) {
      bd.assign(sx->size(), 1);
      bd[static_cast<size_t>(axis)] = C;
    }
    Tensor lo(DType::kFloat32, bd), hi(DType::kFloat32, bd);
    for (int64_t c = 0; c < std::max<int64_t>(C, 1); ++c) {
      const double z = zp ? ZeroPointAt(*zp, c) : 0, sc = scale->data<float>()[c];
      lo.data<float>()[c] = static_cast<float>((qmin - z) * sc);
      hi.data<float>()[c] = static_cast<float>((qmax - z) * sc);
    }
    const int x = in(0);
    const int inside = e.Op("And", {e.Op("Not", {e.Op("Less", {x, e.Const(lo, "q_lo")})}),
                                    e.Op("Not", {e.Op("Greater", {x, e.Const(hi, "q_hi")})})});
    r.push_back({0, e.Op("Where", {inside, dy, scalar(0.f)})});
    return r;
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = n.attrs.GetInts("perm");
    if (perm.empty()) {
      const std::optional<SymShape> sx = ShapeOf(g, in(0));
      if (!sx) return Unimplemented(n.DebugName() + ": Transpose gradient needs a known rank");
      for (int64_t i = static_cast<int64_t>(sx->size()) - 1; i >= 0; --i) perm.push_back(i);
    }
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[static_cast<size_t>(perm[i])] = static_cast<int64_t>(i);
    AttributeMap a;
    a.Set("perm", Attribute::Ints(inv));
    r.push_back({0, e.Op("Transpose", {dy}, a)});
    return r;
  }
  if (op == "Cast") {  // float to float only: a Cast from integers never needs a gradient
    if (g.value(in(0)).dtype != DType::kFloat32)
      return Unimplemented(n.DebugName() + ": Cast gradient to a " + DTypeName(g.value(in(0)).dtype) + " input");
    r.push_back({0, dy});
    return r;
  }
  if (op == "Identity" || op == "Dropout") {
    r.push_back({0, dy});
    return r;
  }
  if (op == "Add" || op == "Sub") {
    for (size_t i = 0; i < 2; ++i) {
      if (!need(i)) continue;
      WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, dy, n.outputs[0], in(i)));
      r.push_back({i, op == "Sub" && i == 1 ? e.Op("Neg", {d}) : d});
    }
    return r;
  }
  if (op == "Softmax" || op == "LogSoftmax") {
    // Softmax: dx = y * (dy - sum(dy * y)); LogSoftmax: dx = dy - exp(y) * sum(dy), sums over the
    // softmax axes: the one axis since opset 13, every axis from `axis` on before (2-D flattening).
    const std::optional<SymShape> sx = ShapeOf(g, in(0));
    if (!sx) return Unimplemented(n.DebugName() + ": " + op + " gradient needs a known rank");
    const bool flat = e.opset() < 13;
    const int64_t axis = NormAxis(n.attrs.GetInt("axis", flat ? 1 : -1), sx->size());
    if (axis < 0 || axis >= static_cast<int64_t>(sx->size())) return InvalidArgument(n.DebugName() + ": bad axis");
    std::vector<int64_t> axes{axis};
    for (int64_t a = axis + 1; flat && a < static_cast<int64_t>(sx->size()); ++a) axes.push_back(a);
    const int y = n.outputs[0];
    if (op == "Softmax")
      r.push_back({0, e.Op("Mul", {y, e.Op("Sub", {dy, e.ReduceSum(e.Op("Mul", {dy, y}), axes, true)})})});
    else
      r.push_back({0, e.Op("Sub", {dy, e.Op("Mul", {e.Op("Exp", {y}), e.ReduceSum(dy, axes, true)})})});
    return r;
  }
  if (op == "LayerNormalization") {
    // y = xhat * scale + B over the axes from `axis` on; xhat recomputed from x. With g = dy * scale:
    // dx = inv_std * (g - mean(g) - xhat * mean(g * xhat)), dscale = sum(dy * xhat), dB = sum(dy).
    const std::optional<SymShape> sx = ShapeOf(g, in(0));
    if (!sx) return Unimplemented(n.DebugName() + ": LayerNormalization gradient needs a known rank");
    const int64_t axis = NormAxis(n.attrs.GetInt("axis", -1), sx->size());
    if (axis < 0 || axis >= static_cast<int64_t>(sx->size())) return InvalidArgument(n.DebugName() + ": bad axis");
    std::vector<int64_t> axes;
    for (int64_t a = axis; a < static_cast<int64_t>(sx->size()); ++a) axes.push_back(a);
    const float eps = n.attrs.GetFloat("epsilon", 1e-5f);
    const int xc = e.Op("Sub", {in(0), e.ReduceMean(in(0), axes, true)});
    const int inv_std = e.Op("Reciprocal", {e.Op("Sqrt", {e.Op("Add", {e.ReduceMean(e.Op("Mul", {xc, xc}), axes, true),
                                                                     scalar(eps)})})});
    const int xhat = e.Op("Mul", {xc, inv_std});
    if (need(0)) {
      const int gs = e.Op("Mul", {dy, in(1)});
      const int t = e.Op("Sub", {e.Op("Sub", {gs, e.ReduceMean(gs, axes, true)}),
                                 e.Op("Mul", {xhat, e.ReduceMean(e.Op("Mul", {gs, xhat}), axes, true)})});
      r.push_back({0, e.Op("Mul", {t, inv_std})});
    }
    if (need(1)) {
      WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, e.Op("Mul", {dy, xhat}), n.outputs[0], in(1)));
      r.push_back({1, d});
    }
    if (in(2) >= 0 && need(2)) {
      WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, dy, n.outputs[0], in(2)));
      r.push_back({2, d});
    }
    return r;
  }
  if (op == "Erf") {  // dy * 2 / sqrt(pi) * exp(-x^2)
    const int x = in(0);
    const int gauss = e.Op("Exp", {e.Op("Neg", {e.Op("Mul", {x, x})})});
    r.push_back({0, e.Op("Mul", {dy, e.Op("Mul", {scalar(1.1283791670955126f), gauss})})});
    return r;
  }
  if (op == "Sqrt") {  // dy / (2 y)
    r.push_back({0, e.Op("Div", {e.Op("Mul", {dy, scalar(0.5f)}), n.outputs[0]})});
    return r;
  }
  if (op == "Exp") {  // dy * y
    r.push_back({0, e.Op("Mul", {dy, n.outputs[0]})});
    return r;
  }
  if (op == "Log") {  // dy / x
    r.push_back({0, e.Op("Div", {dy, in(0)})});
    return r;
  }
  if (op == "Neg") {
    r.push_back({0, e.Op("Neg", {dy})});
    return r;
  }
  if (op == "Reciprocal") {  // -dy * y^2
    r.push_back({0, e.Op("Neg", {e.Op("Mul", {dy, e.Op("Mul", {n.outputs[0], n.outputs[0]})})})});
    return r;
  }
  if (op == "Pow") {  // dx = dy * p * x^(p - 1); a trained exponent is refused
    if (need(1))
      return Unimplemented(n.DebugName() + ": Pow gradient with respect to the exponent (only a fixed exponent "
                           "is supported)");
    int p = in(1);
    if (g.value(p).dtype != DType::kFloat32) p = e.CastFloat(p);
    const int t = e.Op("Mul", {dy, e.Op("Mul", {p, e.Op("Pow", {in(0), e.Op("Sub", {p, scalar(1.f)})})})});
    WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, t, n.outputs[0], in(0)));
    r.push_back({0, d});
    return r;
  }
  if (op == "Where") {  // the condition picks which branch gets dy
    for (size_t i : {size_t{1}, size_t{2}}) {
      if (!need(i)) continue;
      const int zero = scalar(0.f);
      const int t = i == 1 ? e.Op("Where", {in(0), dy, zero}) : e.Op("Where", {in(0), zero, dy});
      WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, t, n.outputs[0], in(i)));
      r.push_back({i, d});
    }
    return r;
  }
  if (op == "Expand") {
    WH_ASSIGN_OR_RETURN(int d, SumToShape(e, g, dy, n.outputs[0], in(0)));
    r.push_back({0, d});
    return r;
  }
  if (op == "ReduceSum" || op == "ReduceMean") {
    // dy put back on the reduced axes and broadcast over them (ReduceMean: divided by their size).
    const std::optional<SymShape> sx = ShapeOf(g, in(0));
    if (!sx) return Unimplemented(n.DebugName() + ": " + op + " gradient needs a known rank");
    bool noop = false;
    WH_ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(g, n, sx->size(), &noop));
    if (noop) {
      r.push_back({0, dy});
      return r;
    }
    int t = n.attrs.GetInt("keepdims", 1) != 0 ? dy : e.Unsqueeze(dy, axes);
    t = e.Op("Expand", {t, e.Op("Shape", {in(0)})});
    if (op == "ReduceMean") {
      int64_t count = 1;
      for (int64_t a : axes) {
        const Dim d = (*sx)[static_cast<size_t>(a)];
        count = count < 0 || !d.known() ? -1 : count * d.value;
      }
      // 1 / count; from the sizes at run time where a reduced dim is symbolic.
      const int ratio = count > 0 ? scalar(1.f / static_cast<float>(count))
                                  : e.Op("Div", {e.CastFloat(e.Op("Size", {n.outputs[0]})),
                                                 e.CastFloat(e.Op("Size", {in(0)}))});
      t = e.Op("Mul", {t, ratio});
    }
    r.push_back({0, t});
    return r;
  }
  if (op == "Concat") {  // each input's slice of dy
    const std::optional<SymShape> so = ShapeOf(g, n.outputs[0]);
    if (!so) return Unimplemented(n.DebugName() + ": Concat gradient needs a known rank");
    const int64_t axis = NormAxis(n.attrs.GetInt("axis", 0), so->size());
    int64_t off = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::optional<SymShape> si = ShapeOf(g, in(i));
      const bool known = si && si->size() == so->size() && (*si)[static_cast<size_t>(axis)].known();
      if (!known && need(i))
        return Unimplemented(n.DebugName() + ": Concat gradient needs the inputs' sizes along the axis");
      if (!known) {  // later inputs' offsets unknown: they cannot need a gradient either
        off = -1;
        continue;
      }
      const int64_t len = (*si)[static_cast<size_t>(axis)].value;
      if (need(i)) {
        if (off < 0) return Unimplemented(n.DebugName() + ": Concat gradient needs the inputs' sizes along the axis");
        r.push_back({i, e.Slice(dy, {off}, {off + len}, {axis})});
      }
      if (off >= 0) off += len;
    }
    return r;
  }
  if (op == "Slice") {  // dy zero-padded back to x's shape
    const std::optional<SymShape> sx = ShapeOf(g, in(0));
    if (!sx) return Unimplemented(n.DebugName() + ": Slice gradient needs a known rank");
    const size_t rank = sx->size();
    std::optional<std::vector<int64_t>> starts, ends, axes, steps;
    if (e.opset() < 10) {
      starts = n.attrs.GetInts("starts");
      ends = n.attrs.GetInts("ends");
      if (n.attrs.Has("axes")) axes = n.attrs.GetInts("axes");
    } else {
      starts = ConstInts(g, n, 1);
      ends = ConstInts(g, n, 2);
      if (in(3) >= 0) axes = ConstInts(g, n, 3);
      if (in(4) >= 0) steps = ConstInts(g, n, 4);
      if (!starts || !ends || (in(3) >= 0 && !axes) || (in(4) >= 0 && !steps))
        return Unimplemented(n.DebugName() + ": Slice gradient needs constant starts, ends, axes and steps");
    }
    if (!axes) {
      axes.emplace();
      for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
    }
    if (starts->size() != ends->size() || axes->size() != starts->size() || (steps && steps->size() != starts->size()))
      return InvalidArgument(n.DebugName() + ": starts, ends, axes and steps differ in length");
    std::vector<int64_t> pads(2 * rank, 0);
    for (size_t k = 0; k < axes->size(); ++k) {
      if (steps && (*steps)[k] != 1)
        return Unimplemented(n.DebugName() + ": Slice gradient with a step other than 1 (got " +
                             std::to_string((*steps)[k]) + ")");
      const int64_t a = NormAxis((*axes)[k], rank);
      if (a < 0 || a >= static_cast<int64_t>(rank)) return InvalidArgument(n.DebugName() + ": axis out of range");
      const Dim d = (*sx)[static_cast<size_t>(a)];
      if (!d.known()) return Unimplemented(n.DebugName() + ": Slice gradient needs known sizes on the sliced axes");
      auto clamp = [&](int64_t v) { return std::min(d.value, std::max<int64_t>(0, v < 0 ? v + d.value : v)); };
      const int64_t b = clamp((*starts)[k]), en = std::max(b, clamp((*ends)[k]));
      pads[static_cast<size_t>(a)] = b;
      pads[rank + static_cast<size_t>(a)] = d.value - en;
    }
    r.push_back({0, e.Pad(dy, pads)});
    return r;
  }
  if (op == "Gather") {  // dy scatter-added at the indices (they get no gradient)
    if (need(0)) r.push_back({0, e.Op("GatherGrad", {in(0), in(1), dy}, n.attrs, kWhittleDomain)});
    return r;
  }
  if (op == "AveragePool") {
    r.push_back({0, e.Op("AveragePoolGrad", {in(0), dy}, n.attrs, kWhittleDomain)});
    return r;
  }
  return Unimplemented(n.DebugName() + ": no gradient rule for " + op +
                       " (supported: Gemm, MatMul, Conv, Relu, LeakyRelu, Sigmoid, Tanh, HardSwish, Clip, MaxPool, "
                       "AveragePool, GlobalAveragePool, BatchNormalization, LayerNormalization, Softmax, LogSoftmax, "
                       "Erf, Sqrt, Exp, Log, Neg, Reciprocal, Pow, Where, Expand, ReduceSum, ReduceMean, Concat, "
                       "Split, Slice, Gather, Flatten, Reshape, Squeeze, Unsqueeze, Transpose, Identity, Dropout, Cast, "
                       "Add, Sub, Mul, Div)");
}

}  // namespace whittle::training
