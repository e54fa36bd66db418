#include "runtime/training/autodiff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/codebook.h"
#include "lib/ops/op_def.h"
#include "runtime/training/lift.h"

namespace whittle::training {
namespace {


// Emits the backward nodes into g.
class Emitter {
 public:
  explicit Emitter(Graph& g) : g_(g), opset_(g.OpsetFor("")) {}

  int Op(const std::string& type, std::vector<int> in, AttributeMap attrs = {}, const std::string& domain = "") {
    Node n;
    n.name = g_.UniqueName(prefix_ + type);
    n.op_type = type;
    n.domain = domain;
    n.inputs = std::move(in);
    n.attrs = std::move(attrs);
    n.outputs = {g_.AddValue(g_.UniqueName(n.name + "_out"))};
    const int out = n.outputs[0];
    g_.AddNode(std::move(n));
    return out;
  }
  int Const(const Tensor& t, const std::string& what) { return g_.AddInitializer(g_.UniqueName(prefix_ + what), t); }
  int Int64s(const std::vector<int64_t>& v) {
    return Const(Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v), "axes");
  }
  // ReduceSum over axes (the attribute before opset 13, an input since).
  int ReduceSum(int x, const std::vector<int64_t>& axes, bool keepdims) {
    AttributeMap a;
    a.Set("keepdims", Attribute::Int(keepdims ? 1 : 0));
    if (opset_ < 13) {
      a.Set("axes", Attribute::Ints(axes));
      return Op("ReduceSum", {x}, a);
    }
    return Op("ReduceSum", {x, Int64s(axes)}, a);
  }
  int Gemm(int a, int b, bool ta, bool tb, float alpha = 1.f) {
    AttributeMap at;
    at.Set("transA", Attribute::Int(ta ? 1 : 0));
    at.Set("transB", Attribute::Int(tb ? 1 : 0));
    if (alpha != 1.f) at.Set("alpha", Attribute::Float(alpha));
    return Op("Gemm", {a, b}, at);
  }
  int Scale(int x, float s) { return s == 1.f ? x : Op("Mul", {x, Const(Tensor::Scalar<float>(s), "scale")}); }
  int Scalar(float v) { return Const(Tensor::Scalar<float>(v), "c"); }
  // x reshaped to the shape of like (at run time).
  int ReshapeLike(int x, int like) { return Op("Reshape", {x, Op("Shape", {like})}); }
  // ReduceMean over axes (the attribute before opset 18, an input since).
  int ReduceMean(int x, const std::vector<int64_t>& axes, bool keepdims) {
    AttributeMap a;
    a.Set("keepdims", Attribute::Int(keepdims ? 1 : 0));
    if (opset_ < 18) {
      a.Set("axes", Attribute::Ints(axes));
      return Op("ReduceMean", {x}, a);
    }
    return Op("ReduceMean", {x, Int64s(axes)}, a);
  }
  // Unsqueeze at axes of the output (the attribute before opset 13, an input since).
  int Unsqueeze(int x, const std::vector<int64_t>& axes) {
    AttributeMap a;
    if (opset_ < 13) {
      a.Set("axes", Attribute::Ints(axes));
      return Op("Unsqueeze", {x}, a);
    }
    return Op("Unsqueeze", {x, Int64s(axes)});
  }
  // x[starts:ends] on axes, step 1 (attributes before opset 10, inputs since).
  int Slice(int x, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
            const std::vector<int64_t>& axes) {
    if (opset_ < 10) {
      AttributeMap a;
      a.Set("starts", Attribute::Ints(starts));
      a.Set("ends", Attribute::Ints(ends));
      a.Set("axes", Attribute::Ints(axes));
      return Op("Slice", {x}, a);
    }
    return Op("Slice", {x, Int64s(starts), Int64s(ends), Int64s(axes)});
  }
  // Zero padding, pads = [begin..., end...] (the attribute before opset 11, an input since).
  int Pad(int x, const std::vector<int64_t>& pads) {
    if (opset_ < 11) {
      AttributeMap a;
      a.Set("pads", Attribute::Ints(pads));
      return Op("Pad", {x}, a);
    }
    return Op("Pad", {x, Int64s(pads)});
  }
  int Concat(std::vector<int> xs, int64_t axis) {
    AttributeMap a;
    a.Set("axis", Attribute::Int(axis));
    return Op("Concat", std::move(xs), a);
  }
  // float32 zeros of like's shape.
  int ZerosLike(int like) {
    AttributeMap a;
    a.Set("value", Attribute::TensorValue(Tensor::FromVector<float>({1}, {0.f})));
    return Op("ConstantOfShape", {Op("Shape", {like})}, a);
  }
  int CastFloat(int x) {
    AttributeMap a;
    a.Set("to", Attribute::Int(static_cast<int64_t>(DType::kFloat32)));
    return Op("Cast", {x}, a);
  }
  // Transposes the last two axes of a rank-r value.
  int SwapLast2(int x, size_t rank) {
    std::vector<int64_t> perm;
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(i));
    std::swap(perm[rank - 1], perm[rank - 2]);
    AttributeMap a;
    a.Set("perm", Attribute::Ints(perm));
    return Op("Transpose", {x}, a);
  }
  int64_t opset() const { return opset_; }
  void set_prefix(std::string p) { prefix_ = std::move(p); }

 private:
  Graph& g_;
  int64_t opset_;
  std::string prefix_ = "grad/";
};

// A copy: emitting nodes adds values and moves the graph's value storage.
std::optional<SymShape> ShapeOf(const Graph& g, int v) { return g.value(v).shape; }

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

// Where each input of a node gets its gradient: (input slot, gradient value).
using InputGrads = std::vector<std::pair<size_t, int>>;

// What the rules need to know beyond the node.
struct RuleContext {
  std::set<std::string> bn_training;  // BatchNormalization nodes fed the batch statistics
};

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
template <class Need>
StatusOr<InputGrads> CodebookMatMulGrad(Emitter& e, const Graph& g, const Node& n, int dy, const Need& need) {
  InputGrads r;
  const int64_t bits = n.attrs.GetInt("bits", 8), N = n.attrs.GetInt("out_features", 0), K = n.attrs.GetInt("in_features", 0);
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

template <class Need>
StatusOr<InputGrads> GradOf(Emitter& e, const Graph& g, const Node& n, const std::vector<int>& dys, const Need& need,
                            const RuleContext& ctx) {
  InputGrads r;
  const std::string& op = n.op_type;
  auto in = [&](size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; };
  if (n.domain == kWhittleDomain && op == "CodebookMatMul" && dys.size() == 1 && dys[0] >= 0)
    return CodebookMatMulGrad(e, g, n, dys[0], need);
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

// Slots whose constant float input is a trainable weight.
bool TrainableSlot(const Node& n, size_t slot) {
  if (n.domain == kWhittleDomain && n.op_type == "CodebookMatMul") return slot == 1 || slot == 3;  // codebook, bias
  if (!n.domain.empty()) return false;
  if (n.op_type == "Gemm" || n.op_type == "Conv") return slot <= 2;
  if (n.op_type == "MatMul") return slot <= 1;
  if (n.op_type == "Add" || n.op_type == "Mul") return true;  // a bias, a scale
  if (n.op_type == "BatchNormalization") return slot == 1 || slot == 2;  // scale, bias (statistics are not trained)
  if (n.op_type == "LayerNormalization") return slot == 1 || slot == 2;  // scale, bias
  if (n.op_type == "Gather") return slot == 0;                             // an embedding table
  if (n.op_type == "Concat") return true;                                  // a learned token
  return false;
}

// Whether a value carries a gradient: float values, and the integer output of a fake
// quantization (its straight-through gradient passes on to the DequantizeLinear after it).
bool Differentiable(const Graph& g, const Node& producer, int v) {
  const DType t = g.value(v).dtype;
  if (t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64 || t == DType::kBFloat16) return true;
  return producer.domain.empty() && producer.op_type == "QuantizeLinear";
}

// bn_training: every BatchNormalization is fed the batch's statistics (mean and biased variance
// over all axes but the channel axis, computed by ReduceMean nodes) in place of its running ones,
// which become state inputs; the running statistics' ONNX training-mode update
//   running = running * momentum + batch * (1 - momentum)
// is appended as a graph output per statistic. Returns the rewritten nodes' names.
StatusOr<std::set<std::string>> UseBatchStatistics(Graph& g, std::vector<std::pair<int, int>>* updates) {
  std::set<std::string> names;
  Emitter e(g);
  e.set_prefix("bn_train/");
  std::set<int> seen;
  const size_t count = g.nodes().size();
  for (size_t ni = 0; ni < count; ++ni) {
    const Node n = g.nodes()[ni];  // a copy: emitting grows the node list
    if (!n.domain.empty() || n.op_type != "BatchNormalization") continue;
    if (n.attrs.GetInt("training_mode", 0) != 0 || n.outputs.size() > 1)
      return Unimplemented(n.DebugName() + ": BatchNormalization already in training mode (extra outputs)");
    const std::optional<SymShape> sx = ShapeOf(g, n.inputs[0]);
    if (!sx || sx->size() < 2) return Unimplemented(n.DebugName() + ": BatchNormalization needs a known rank");
    for (size_t slot : {size_t{3}, size_t{4}}) {
      const int v = n.inputs[slot];
      if (!g.ConstInput(n, slot, DType::kFloat32))
        return Unimplemented(n.DebugName() + ": training mode needs the running statistics as float32 initializers");
      if (!seen.insert(v).second)
        return Unimplemented(n.DebugName() + ": running statistic '" + g.value(v).name + "' is shared by two nodes");
    }
    std::vector<int64_t> axes{0}, bshape{1, -1};
    for (size_t i = 2; i < sx->size(); ++i) {
      axes.push_back(static_cast<int64_t>(i));
      bshape.push_back(1);
    }
    const int x = n.inputs[0];
    const int mean = e.ReduceMean(x, axes, false);
    const int xc = e.Op("Sub", {x, e.Op("Reshape", {mean, e.Int64s(bshape)})});
    const int var = e.ReduceMean(e.Op("Mul", {xc, xc}), axes, false);
    const float momentum = n.attrs.GetFloat("momentum", 0.9f);
    for (const auto& [slot, batch] : {std::pair<size_t, int>{3, mean}, std::pair<size_t, int>{4, var}}) {
      const int running = n.inputs[slot];
      const int updated =
          e.Op("Add", {e.Op("Mul", {running, e.Scalar(momentum)}), e.Op("Mul", {batch, e.Scalar(1.f - momentum)})});
      updates->push_back({running, updated});
    }
    Node& bn = g.nodes()[ni];
    bn.inputs[3] = mean;
    bn.inputs[4] = var;
    names.insert(n.name);
  }
  return names;
}

}  // namespace

StatusOr<TrainingGraph> BuildTrainingGraph(const Graph& model, float temperature, const TrainingGraphOptions& options) {
  RegisterAllOps();
  TrainingGraph tg;
  Graph& g = tg.graph;
  g = model;
  std::vector<int> live_scales;
  WH_ASSIGN_OR_RETURN(std::set<int> latent,
                      LiftQuantizedWeights(g, &tg.quantized, options.refresh_weight_scales, &live_scales));
  WH_ASSIGN_OR_RETURN(std::set<int> binary_latent, LiftBinaryWeights(g, &tg.binary));
  latent.insert(binary_latent.begin(), binary_latent.end());
  WH_ASSIGN_OR_RETURN(std::set<int> circulant_blocks, LiftCirculant(g));
  latent.insert(circulant_blocks.begin(), circulant_blocks.end());
  if (g.inputs().size() != 1) return InvalidArgument("fine-tuning needs a model with exactly one data input");
  for (int v : live_scales) g.inputs().push_back(v);
  WH_RETURN_IF_ERROR(InferShapes(g));
  if (g.outputs().empty()) return InvalidArgument("the model has no outputs");
  const int logits = g.outputs()[0];
  tg.logits = g.value(logits).name;
  tg.model_input = g.value(g.inputs()[0]).name;
  const std::optional<SymShape> ls = ShapeOf(g, logits);
  if (g.value(logits).dtype != DType::kFloat32 || !ls || ls->size() != 2)
    return InvalidArgument("the model's first output '" + tg.logits + "' must be float32 logits [batch, classes]");
  const SymShape logits_shape = *ls;
  RuleContext ctx;
  std::vector<std::pair<int, int>> state;  // (running statistic, its updated value)
  if (options.bn_training) {
    WH_ASSIGN_OR_RETURN(ctx.bn_training, UseBatchStatistics(g, &state));
    WH_RETURN_IF_ERROR(InferShapes(g));
  }

  // Nodes on the path to the logits, in topological order.
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::set<int> live_values{logits};
  std::vector<int> live_nodes;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& n = g.nodes()[static_cast<size_t>(*it)];
    bool live = false;
    for (int o : n.outputs) live = live || (o >= 0 && live_values.count(o));
    if (!live) continue;
    live_nodes.push_back(*it);
    for (int i : n.inputs)
      if (i >= 0) live_values.insert(i);
  }
  // live_nodes is in reverse topological order. The params, and which values need gradients:
  // the float values downstream of a param (shape arithmetic, casts of integers, comparisons and
  // the other integer plumbing exporters emit never need one).
  std::set<int> params;
  for (int ni : live_nodes) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      const int v = n.inputs[s];
      if (v < 0 || !g.value(v).is_constant() || g.value(v).dtype != DType::kFloat32) continue;
      if ((TrainableSlot(n, s) || latent.count(v)) && g.value(v).initializer->rank() >= 1) params.insert(v);
    }
  }
  if (params.empty()) return InvalidArgument("the model has no trainable float32 weights on the path to its logits");
  std::set<int> needs(params.begin(), params.end());
  for (auto it = live_nodes.rbegin(); it != live_nodes.rend(); ++it) {
    const Node& n = g.nodes()[static_cast<size_t>(*it)];
    bool any = false;
    for (int i : n.inputs) any = any || (i >= 0 && needs.count(i));
    if (any)
      for (int o : n.outputs)
        if (o >= 0 && Differentiable(g, n, o)) needs.insert(o);
  }

  // The loss gradient at the logits.
  Emitter e(g);
  const int target = g.AddValue(kTargetInput, DType::kFloat32, logits_shape);
  const int a = g.AddValue(kCeCoefInput, DType::kFloat32, SymShape{});
  const int b = g.AddValue(kKdCoefInput, DType::kFloat32, SymShape{});
  g.inputs().push_back(target);
  g.inputs().push_back(a);
  g.inputs().push_back(b);
  AttributeMap last_axis;
  last_axis.Set("axis", Attribute::Int(1));
  const int s = e.Op("Softmax", {logits}, last_axis);
  const int q = e.Op("Softmax", {e.Op("Div", {logits, e.Const(Tensor::Scalar<float>(temperature), "temperature")})},
                     last_axis);
  const int dz = e.Op("Sub", {e.Op("Add", {e.Op("Mul", {s, a}), e.Op("Mul", {q, b})}), target});

  // Backward, accumulating contributions per value.
  std::map<int, std::vector<int>> contrib;
  contrib[logits].push_back(dz);
  // Feature (hint) losses: c_i (s - t_i) at each hint tensor.
  std::set<int> live_set;
  for (int ni : live_nodes)
    for (int o : g.nodes()[static_cast<size_t>(ni)].outputs) live_set.insert(o);
  std::vector<int> hint_values;
  for (size_t i = 0; i < options.hints.size(); ++i) {
    const std::string& name = options.hints[i];
    const int v = g.FindValue(name);
    if (v < 0) return InvalidArgument("hint: the student has no tensor '" + name + "'");
    if (g.value(v).dtype != DType::kFloat32 || !live_set.count(v) || !needs.count(v))
      return InvalidArgument("hint: '" + name + "' is not a float32 tensor between the trainable weights and the logits");
    const int t = g.AddValue(kHintTargetPrefix + std::to_string(i), DType::kFloat32, g.value(v).shape);
    const int c = g.AddValue(std::string(kHintCoefInput) + "_" + std::to_string(i), DType::kFloat32, SymShape{});
    g.inputs().push_back(t);
    g.inputs().push_back(c);
    contrib[v].push_back(e.Op("Mul", {e.Op("Sub", {v, t}), c}));
    hint_values.push_back(v);
  }
  auto GradOfValue = [&](int v) -> int {
    auto it = contrib.find(v);
    if (it == contrib.end()) return -1;
    int sum = it->second[0];
    for (size_t i = 1; i < it->second.size(); ++i) sum = e.Op("Add", {sum, it->second[i]});
    it->second = {sum};
    return sum;
  };
  for (int ni : live_nodes) {
    const Node n = g.nodes()[static_cast<size_t>(ni)];  // copy: emitting grows the node list
    std::vector<int> dys;
    bool any = false;
    for (int o : n.outputs) {
      dys.push_back(o >= 0 && needs.count(o) ? GradOfValue(o) : -1);
      any = any || dys.back() >= 0;
    }
    if (!any) continue;  // nothing downstream depends on it
    auto need = [&](size_t slot) { return slot < n.inputs.size() && n.inputs[slot] >= 0 && needs.count(n.inputs[slot]); };
    WH_ASSIGN_OR_RETURN(InputGrads grads, GradOf(e, g, n, dys, need, ctx));
    for (const auto& [slot, gv] : grads) contrib[n.inputs[slot]].push_back(gv);
  }

  // Lifts an initializer to a graph input (fed each step).
  auto lift = [&](int v) {
    Value& pv = g.value(v);
    Tensor init = *pv.initializer;
    pv.shape = ToSymShape(init.dims());
    pv.initializer.reset();
    g.inputs().push_back(v);
    return init;
  };
  // A named graph output for v, via Identity (the same value may not be output twice).
  auto output = [&](int v, const std::string& name) {
    Node id;
    id.name = g.UniqueName("grad/" + name);
    id.op_type = "Identity";
    id.inputs = {v};
    id.outputs = {g.AddValue(g.UniqueName(name))};
    const int out = id.outputs[0];
    g.AddNode(std::move(id));
    g.outputs().push_back(out);
    return g.value(out).name;
  };
  // Params become inputs; their gradients become outputs after the logits.
  g.outputs() = {logits};
  for (int p : params) {
    const int gv = GradOfValue(p);
    if (gv < 0) continue;  // no path (cannot happen for a live param, kept for safety)
    const std::string name = g.value(p).name;
    tg.params.push_back(name);
    tg.initial.push_back(lift(p));
    output(gv, "grad_" + name);
  }
  // Running statistics: inputs too, their updates the last outputs.
  for (const auto& [running, updated] : state) {
    StateUpdate u;
    u.initializer = g.value(running).name;
    u.initial = lift(running);
    u.output = output(updated, u.initializer + "_updated");
    tg.state.push_back(std::move(u));
  }
  for (int v : hint_values) tg.hint_outputs.push_back(output(v, "hint_" + g.value(v).name));
  if (g.OpsetFor(kWhittleDomain) == 0) g.opset_imports[kWhittleDomain] = 1;
  WH_RETURN_IF_ERROR(g.Compact());
  WH_RETURN_IF_ERROR(g.Verify());
  WH_RETURN_IF_ERROR(InferShapes(g));
  return tg;
}

}  // namespace whittle::training
