// ONNX Runtime's quantized com.microsoft ops, read as standard ONNX at load (see contrib_ops.h):
// what ONNX Runtime 1.32's CPU kernels compute, written with the ops and in the order that keeps
// the result bit-exact where the README of tests/corpus/ort_quant says so (measured there; the
// order of every float operation matters, so the scale products below are formed as the kernels
// form them). Scales and zero points may be constants or values; the dtype of an 8-bit tensor
// whose zero point is absent is traced back to where it is made.
#include <cfloat>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "lib/onnx/contrib_expander.h"

namespace whittle::contrib {
namespace {

bool IsQuantOp(const std::string& op) {
  static const std::set<std::string> ops = {
      "DynamicQuantizeMatMul", "MatMulIntegerToFloat",     "QGemm",           "QLinearAdd",
      "QLinearMul",            "QLinearSigmoid",           "QLinearLeakyRelu", "QLinearConcat",
      "QLinearGlobalAveragePool", "QLinearAveragePool",    "QLinearSoftmax",  "QAttention",
      "QEmbedLayerNormalization", "DynamicQuantizeLSTM"};
  return ops.count(op) > 0;
}

AttributeMap To(DType t) {
  AttributeMap a;
  a.Set("to", Attribute::Int(static_cast<int64_t>(t)));
  return a;
}

int Cast(Expander& e, int x, DType t) { return e.Op("Cast", {x}, To(t)); }

// The element type of an 8-bit tensor, traced back through the ops that keep it to where it is
// declared or made; kUndefined when it cannot be told at load.
DType QType(const Graph& g, int id) {
  for (int hops = 0; id >= 0 && hops < 64; ++hops) {
    const Value& v = g.value(id);
    if (v.dtype != DType::kUndefined) return v.dtype;
    if (v.producer < 0) return DType::kUndefined;
    const Node& p = g.nodes()[static_cast<size_t>(v.producer)];
    const std::string& op = p.op_type;
    if (op == "DynamicQuantizeLinear") return Out(p, 1) == id ? DType::kFloat32 : DType::kUInt8;
    if (op == "Cast") return static_cast<DType>(p.attrs.GetInt("to", 0));
    if (op == "QuantizeLinear") {
      if (const Attribute* a = p.attrs.Find("output_dtype"); a && a->i != 0) return static_cast<DType>(a->i);
      if (In(p, 2) < 0) return DType::kUInt8;
      id = In(p, 2);
    } else if (op == "QLinearConcat") {
      id = In(p, 1);
    } else if (op == "QGemm") {
      if (In(p, 8) < 0) return DType::kFloat32;
      id = In(p, 8);
    } else if (op == "QLinearConv" || op == "QLinearMatMul") {
      id = In(p, 7);
    } else if (op.rfind("QLinear", 0) == 0 || op == "MaxPool" || op == "Flatten" || op == "Reshape" ||
               op == "Transpose" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" || op == "Slice" ||
               op == "Resize" || op == "Pad" || op == "Concat" || op == "Split" || op == "Gather" ||
               op == "SpaceToDepth" || op == "DepthToSpace" || op == "Tile" || op == "Expand") {
      id = In(p, 0);
    } else {
      return DType::kUndefined;
    }
  }
  return DType::kUndefined;
}

// CheckInputs, then the inputs in `required` beyond the leading ones are present too.
Status CheckPresent(const Node& n, size_t min, size_t max, std::initializer_list<size_t> required) {
  WH_RETURN_IF_ERROR(CheckInputs(n, min, max));
  for (size_t i : required)
    if (In(n, i) < 0) return InvalidArgument(n.DebugName() + ": required input " + std::to_string(i) + " is missing");
  return Status::Ok();
}

// The 8-bit type of the tensors of n: the first of the candidate values whose type can be told.
StatusOr<DType> EightBit(const Graph& g, const Node& n, std::initializer_list<int> candidates) {
  for (int id : candidates) {
    if (id < 0) continue;
    const DType t = QType(g, id);
    if (t == DType::kUInt8 || t == DType::kInt8) return t;
    if (t != DType::kUndefined)
      return InvalidArgument(n.DebugName() + ": '" + g.value(id).name + "' is " + DTypeName(t) +
                             ", expected uint8 or int8");
  }
  return Refuse(n, "the 8-bit type of its tensors cannot be told at load (no zero point or input of known type)");
}

// QuantizeLinear(x, scale, zp) with the zero point, when absent, 0 of `t`: the output is of type t.
int Quantize(Expander& e, int x, int scale, int zp, DType t, int to) {
  if (zp < 0) zp = e.Const(Tensor(t, {}));
  return e.Op("QuantizeLinear", {x, scale, zp}, {}, to);
}

int Dequantize(Expander& e, int x, int scale, int zp) {
  std::vector<int> ins = {x, scale};
  if (zp >= 0) ins.push_back(zp);
  return e.Op("DequantizeLinear", ins);
}

// float(MatMulInteger(a, b, a_zp, b_zp)) · scale (+ bias).
int IntMatMulToFloat(Expander& e, int a, int b, int a_zp, int b_zp, int scale, int bias, int to) {
  std::vector<int> ins = {a, b, a_zp, b_zp};
  while (!ins.empty() && ins.back() < 0) ins.pop_back();
  const int acc = Cast(e, e.Op("MatMulInteger", ins), DType::kFloat32);
  const int y = e.Op("Mul", {acc, scale}, {}, bias >= 0 ? -1 : to);
  return bias >= 0 ? e.Op("Add", {y, bias}, {}, to) : y;
}

// Reduce op over static axes with keepdims: axes an attribute before `input_from`, an input from it.
int Reduce(Graph& g, Expander& e, const std::string& op, int x, const std::vector<int64_t>& axes, int64_t input_from) {
  AttributeMap a;
  a.Set("keepdims", Attribute::Int(1));
  if (g.OpsetFor("") >= input_from) return e.Op(op, {x, e.I64(axes)}, a);
  a.Set("axes", Attribute::Ints(axes));
  return e.Op(op, {x}, a);
}

Status MatMulFamily(Graph& g, const Node& n, Expander& e) {
  // Y = float(Σ (A − a_zp)(B − b_zp)) · (a_scale · b_scale) + bias, A quantized per tensor to uint8
  // by DynamicQuantizeLinear for DynamicQuantizeMatMul: the chain ONNX Runtime's dynamic quantizer
  // writes before its optimizer fuses it.
  const bool dynamic = n.op_type == "DynamicQuantizeMatMul";
  WH_RETURN_IF_ERROR(CheckInputs(n, dynamic ? 3 : 4, dynamic ? 5 : 7));
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  int a = In(n, 0), a_scale, a_zp, b_scale, b_zp, bias;
  if (dynamic) {
    a = g.AddValue(g.UniqueName(n.name + "/a_quantized"));
    a_scale = g.AddValue(g.UniqueName(n.name + "/a_scale"));
    a_zp = g.AddValue(g.UniqueName(n.name + "/a_zero_point"));
    e.MultiOp("DynamicQuantizeLinear", {In(n, 0)}, {a, a_scale, a_zp}, {});
    b_scale = In(n, 2), b_zp = In(n, 3), bias = In(n, 4);
  } else {
    a_scale = In(n, 2), b_scale = In(n, 3), a_zp = In(n, 4), b_zp = In(n, 5), bias = In(n, 6);
    if (const Value& s = g.value(a_scale);
        s.shape && !s.shape->empty() && !(s.shape->size() == 1 && (*s.shape)[0].known() && (*s.shape)[0].value == 1))
      return Refuse(n, "a_scale must be one value per tensor");
  }
  IntMatMulToFloat(e, a, In(n, 1), a_zp, b_zp, e.Op("Mul", {a_scale, b_scale}), bias, Out(n, 0));
  return Status::Ok();
}

// QGemm(A, a_scale, a_zp, B, b_scale, b_zp[, C int32][, y_scale][, y_zp]; alpha, transA, transB):
// acc = Σ (A − a_zp)(B − b_zp) + C; m = (alpha · a_scale) · b_scale; float(acc) · m, or quantized
// as round(float(acc) · (m / y_scale)) + y_zp. A y_scale without y_zp gives float(acc) · m / y_scale.
Status QGemm(Graph& /*g*/, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckInputs(n, 6, 9));
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  int a = In(n, 0), b = In(n, 3);
  AttributeMap t2;
  t2.Set("perm", Attribute::Ints({1, 0}));
  if (n.attrs.GetInt("transA", 0)) a = e.Op("Transpose", {a}, t2);
  if (n.attrs.GetInt("transB", 0)) b = e.Op("Transpose", {b}, t2);
  int acc = e.Op("MatMulInteger", {a, b, In(n, 2), In(n, 5)});
  if (In(n, 6) >= 0) acc = e.Op("Add", {acc, In(n, 6)});
  int m = e.Op("Mul", {e.Op("Mul", {e.Scalar(n.attrs.GetFloat("alpha", 1.f)), In(n, 1)}), In(n, 4)});
  const int ys = In(n, 7), yzp = In(n, 8);
  if (ys >= 0) m = e.Op("Div", {m, ys});
  if (ys < 0 || yzp < 0) {
    e.Op("Mul", {Cast(e, acc, DType::kFloat32), m}, {}, Out(n, 0));
    return Status::Ok();
  }
  Quantize(e, e.Op("Mul", {Cast(e, acc, DType::kFloat32), m}), e.Scalar(1.f), yzp, DType::kUInt8, Out(n, 0));
  return Status::Ok();
}

// QLinearAdd(A, sa, za, B, sb, zb, sc[, zc]): Q(DQ(A) + DQ(B)) (ONNX Runtime's x86 kernel fuses
// multiply-adds, so this is within 1 LSB of it on about 1e-5 of the elements; no standard-op form
// is exact). QLinearMul: (A − za)(B − zb) in int32, times (sa · sb) / sc, plus zc, rounded.
Status QLinearBinary(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckPresent(n, 2, 8, {3, 4, 6}));
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  WH_ASSIGN_OR_RETURN(const DType t, EightBit(g, n, {In(n, 7), In(n, 2), In(n, 5), In(n, 0), In(n, 3)}));
  const int A = In(n, 0), sa = In(n, 1), za = In(n, 2), B = In(n, 3), sb = In(n, 4), zb = In(n, 5);
  const int sc = In(n, 6), zc = In(n, 7);
  if (n.op_type == "QLinearAdd") {
    Quantize(e, e.Op("Add", {Dequantize(e, A, sa, za), Dequantize(e, B, sb, zb)}), sc, zc, t, Out(n, 0));
    return Status::Ok();
  }
  auto centred = [&](int x, int z) {
    const int x32 = Cast(e, x, DType::kInt32);
    return z >= 0 ? e.Op("Sub", {x32, Cast(e, z, DType::kInt32)}) : x32;
  };
  const int p = e.Op("Mul", {centred(A, za), centred(B, zb)});
  int y = e.Op("Mul", {Cast(e, p, DType::kFloat32), e.Op("Div", {e.Op("Mul", {sa, sb}), sc})});
  if (zc >= 0) y = e.Op("Add", {y, Cast(e, zc, DType::kFloat32)});
  Quantize(e, y, e.Scalar(1.f), -1, t, Out(n, 0));  // round half to even, saturate
  return Status::Ok();
}

// QLinearSigmoid / QLinearLeakyRelu(X, xs[, xz], ys[, yz]): ONNX Runtime's 256-entry table of
// Q(f(DQ(v))), which is Q(f(DQ(X))) element by element.
Status QLinearUnary(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckPresent(n, 2, 5, {3}));
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  WH_ASSIGN_OR_RETURN(const DType t, EightBit(g, n, {In(n, 4), In(n, 2), In(n, 0)}));
  AttributeMap a;
  const bool leaky = n.op_type == "QLinearLeakyRelu";
  if (leaky) a.Set("alpha", Attribute::Float(n.attrs.GetFloat("alpha", 0.01f)));
  const int y = e.Op(leaky ? "LeakyRelu" : "Sigmoid", {Dequantize(e, In(n, 0), In(n, 1), In(n, 2))}, a);
  Quantize(e, y, In(n, 3), In(n, 4), t, Out(n, 0));
  return Status::Ok();
}

// QLinearConcat(ys, yz, (X, xs, xz)...; axis): each input dequantized, concatenated, quantized.
Status QLinearConcat(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  if (n.inputs.size() < 5 || (n.inputs.size() - 2) % 3 != 0)
    return InvalidArgument(n.DebugName() + ": has " + std::to_string(n.inputs.size()) +
                           " inputs, expected y_scale, y_zero_point and a (tensor, scale, zero point) triple per input");
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.inputs[i] < 0 && (i < 2 || (i - 2) % 3 != 2))
      return InvalidArgument(n.DebugName() + ": required input " + std::to_string(i) + " is missing");
  if (!n.attrs.Find("axis")) return InvalidArgument(n.DebugName() + ": attribute 'axis' is required");
  WH_ASSIGN_OR_RETURN(const DType t, EightBit(g, n, {In(n, 1)}));
  std::vector<int> parts;
  for (size_t i = 2; i < n.inputs.size(); i += 3) parts.push_back(Dequantize(e, In(n, i), In(n, i + 1), In(n, i + 2)));
  AttributeMap a;
  a.Set("axis", Attribute::Int(n.attrs.GetInt("axis", 0)));
  Quantize(e, e.Op("Concat", parts, a), In(n, 0), In(n, 1), t, Out(n, 0));
  return Status::Ok();
}

// QLinearGlobalAveragePool(X, xs, xz, ys, yz; channels_last): the exact int32 sum s over the
// spatial axes (n elements), round(float(s − xz·n) · (xs / (ys · n))) + yz.
Status QLinearGlobalAveragePool(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckInputs(n, 5, 5));
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  if (g.OpsetFor("") < 13) return Refuse(n, "needs ai.onnx opset 13 or later (ReduceSum with axes as an input)");
  WH_ASSIGN_OR_RETURN(const DType t, EightBit(g, n, {In(n, 4), In(n, 2), In(n, 0)}));
  const int X = In(n, 0);
  const bool last = n.attrs.GetInt("channels_last", 0) != 0;
  const int shape = e.Op("Shape", {X});
  const int rank = e.Op("Size", {shape});
  const int axes = last ? e.Op("Range", {e.I64({1}, true), e.Op("Sub", {rank, e.I64({1}, true)}), e.I64({1}, true)})
                        : e.Op("Range", {e.I64({2}, true), rank, e.I64({1}, true)});
  AttributeMap gather0, keep0, keep1;
  gather0.Set("axis", Attribute::Int(0));
  keep0.Set("keepdims", Attribute::Int(0));
  keep1.Set("keepdims", Attribute::Int(1));
  const int count = e.Op("ReduceProd", {e.Op("Gather", {shape, axes}, gather0)}, keep0);
  int s = e.Op("ReduceSum", {Cast(e, X, DType::kInt32), axes}, keep1);
  s = e.Op("Sub", {s, e.Op("Mul", {Cast(e, In(n, 2), DType::kInt32), Cast(e, count, DType::kInt32)})});
  const int m = e.Op("Div", {In(n, 1), e.Op("Mul", {In(n, 3), Cast(e, count, DType::kFloat32)})});
  Quantize(e, e.Op("Mul", {Cast(e, s, DType::kFloat32), m}), e.Scalar(1.f), In(n, 4), t, Out(n, 0));
  return Status::Ok();
}

// QLinearAveragePool(X, xs, xz, ys[, yz]; AveragePool's attributes, channels_last): DQ, the float
// average (NHWC transposed around it), then round(y / ys + yz) — the zero point is added before
// rounding, as the kernel does.
Status QLinearAveragePool(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckPresent(n, 2, 5, {3}));
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  WH_ASSIGN_OR_RETURN(const DType t, EightBit(g, n, {In(n, 4), In(n, 2), In(n, 0)}));
  const std::vector<int64_t> kernel = n.attrs.GetInts("kernel_shape");
  if (kernel.empty()) return InvalidArgument(n.DebugName() + ": attribute 'kernel_shape' is required");
  AttributeMap pool;
  for (const char* k : {"kernel_shape", "strides", "pads", "auto_pad", "ceil_mode"})
    if (const Attribute* v = n.attrs.Find(k)) pool.Set(k, *v);
  pool.Set("count_include_pad", Attribute::Int(n.attrs.GetInt("count_include_pad", 0)));
  const bool last = n.attrs.GetInt("channels_last", 0) != 0;
  const int64_t rank = static_cast<int64_t>(kernel.size()) + 2;
  int x = Dequantize(e, In(n, 0), In(n, 1), In(n, 2));
  if (last) {
    std::vector<int64_t> perm = {0, rank - 1};
    for (int64_t i = 1; i < rank - 1; ++i) perm.push_back(i);
    AttributeMap a;
    a.Set("perm", Attribute::Ints(perm));
    x = e.Op("Transpose", {x}, a);
  }
  int y = e.Op("AveragePool", {x}, pool);
  if (last) {
    std::vector<int64_t> perm = {0};
    for (int64_t i = 2; i < rank; ++i) perm.push_back(i);
    perm.push_back(1);
    AttributeMap a;
    a.Set("perm", Attribute::Ints(perm));
    y = e.Op("Transpose", {y}, a);
  }
  y = e.Op("Div", {y, In(n, 3)});
  if (In(n, 4) >= 0) y = e.Op("Add", {y, Cast(e, In(n, 4), DType::kFloat32)});
  Quantize(e, y, e.Scalar(1.f), -1, t, Out(n, 0));
  return Status::Ok();
}

// QLinearSoftmax(X, xs[, xz], ys, yz; axis = -1, opset): per row of D values, d = x − max (an
// integer), e = float32(exp((d + C / xs) · xs)) in double with C = max(0, ln(FLT_MAX / D) − 5),
// S = Σ e, y = round((e · floor(1 / ys)) / S) + yz. opset < 13: rows of the input coerced to 2-D.
Status QLinearSoftmax(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckPresent(n, 2, 5, {3, 4}));
  WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
  const Attribute* opset_attr = n.attrs.Find("opset");
  if (!opset_attr) return InvalidArgument(n.DebugName() + ": attribute 'opset' is required");
  WH_ASSIGN_OR_RETURN(const DType t, EightBit(g, n, {In(n, 4), In(n, 2), In(n, 0)}));
  const int64_t axis = n.attrs.GetInt("axis", -1);
  const bool coerced = opset_attr->i < 13;
  int x = In(n, 0);
  int64_t red = axis;
  if (coerced) {
    AttributeMap a;
    a.Set("axis", Attribute::Int(axis));
    x = e.Op("Flatten", {x}, a);
    red = 1;
  }
  AttributeMap gather0;
  gather0.Set("axis", Attribute::Int(0));
  const int xi = Cast(e, x, DType::kInt32);
  const int d = e.Op("Sub", {xi, Reduce(g, e, "ReduceMax", xi, {red}, 18)});  // in [-255, 0]
  const int width = Cast(e, e.Op("Gather", {e.Op("Shape", {x}), e.I64({red}, true)}, gather0), DType::kFloat64);
  const int xs = Cast(e, In(n, 1), DType::kFloat64);
  const int c = e.Op("Max", {e.Op("Sub", {e.Op("Log", {e.Op("Div", {e.Const(Tensor::Scalar<double>(FLT_MAX)), width})}),
                                          e.Const(Tensor::Scalar<double>(5.0))}),
                             e.Const(Tensor::Scalar<double>(0.0))});
  const int arg = e.Op("Mul", {e.Op("Add", {Cast(e, d, DType::kFloat64), e.Op("Div", {c, xs})}), xs});
  const int ex = Cast(e, e.Op("Exp", {arg}), DType::kFloat32);
  const int sum = Reduce(g, e, "ReduceSum", ex, {red}, 13);
  const int levels = e.Op("Floor", {e.Op("Div", {e.Scalar(1.f), In(n, 3)})});
  const int q = e.Op("Div", {e.Op("Mul", {ex, levels}), sum});
  if (!coerced) {
    Quantize(e, q, e.Scalar(1.f), In(n, 4), t, Out(n, 0));
    return Status::Ok();
  }
  e.Op("Reshape", {Quantize(e, q, e.Scalar(1.f), In(n, 4), t, -1), e.Op("Shape", {In(n, 0)})}, {}, Out(n, 0));
  return Status::Ok();
}

// QAttention(input uint8, weight, bias, input_scale, weight_scale[, mask][, input_zp][, weight_zp]
// [, past]): qkv = float(Σ (input − izp)(weight − wzp)) · (input_scale · weight_scale) + bias, then
// Attention's computation from the projected [Q | K | V].
Status QAttention(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckInputs(n, 5, 9));
  WH_RETURN_IF_ERROR(CheckAttentionForm(g, n, 8));
  WH_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, QkvSizes(g, n));
  const int qkv =
      IntMatMulToFloat(e, In(n, 0), In(n, 1), In(n, 6), In(n, 7), e.Op("Mul", {In(n, 3), In(n, 4)}), In(n, 2), -1);
  return AttentionFromQkv(g, n, e, qkv, In(n, 0), sizes, In(n, 5), -1, In(n, 8));
}

// QEmbedLayerNormalization: its five 8-bit tables dequantized, then EmbedLayerNormalization.
Status QEmbedLayerNorm(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckPresent(n, 1, 18, {2, 3, 5, 6, 8, 9, 11, 12}));
  auto dq = [&](size_t table, size_t scale, size_t zp) {
    return In(n, table) < 0 ? -1 : Dequantize(e, In(n, table), In(n, scale), In(n, zp));
  };
  if (In(n, 4) >= 0 && In(n, 10) < 0)
    return InvalidArgument(n.DebugName() + ": a segment embedding needs its scale (input 10)");
  return EmbedLayerNorm(g, n, e,
                        {In(n, 0), In(n, 1), dq(2, 8, 13), dq(3, 9, 14), dq(4, 10, 15), dq(5, 11, 16), dq(6, 12, 17),
                         In(n, 7), -1});
}

// DynamicQuantizeLSTM(X, W [dirs, I, 4H], R [dirs, H, 4H][, B][, sequence_lens][, initial_h]
// [, initial_c][, P], W_scale, W_zp, R_scale, R_zp): X·W with all of X quantized once
// (DynamicQuantizeLinear), then a Scan over time per direction whose body quantizes h each step
// and multiplies it by R in integers; gates i, o, f, c as ONNX LSTM. Only the first zero point of
// each direction is used (as ONNX Runtime does). A reverse direction scans X·W reversed (Slice with
// step -1) and reverses what it emits.
Status DynamicQuantizeLstm(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckPresent(n, 3, 12, {8, 9, 10, 11}));  // the scales and zero points of W and R
  WH_RETURN_IF_ERROR(CheckOutputs(n, 3));
  if (g.OpsetFor("") < 11) return Refuse(n, "needs ai.onnx opset 11 or later (DynamicQuantizeLinear)");
  if (In(n, 4) >= 0) return Refuse(n, "sequence_lens is not supported");
  if (n.attrs.GetInt("input_forget", 0) != 0) return Refuse(n, "input_forget=1 is not supported");
  if (const Attribute* a = n.attrs.Find("activations")) {
    for (size_t i = 0; i < a->strings.size(); ++i)
      if (a->strings[i] != (i % 3 == 0 ? "Sigmoid" : "Tanh"))
        return Refuse(n, "activation '" + a->strings[i] + "' is not supported (only Sigmoid, Tanh, Tanh)");
  }
  const int64_t hidden = n.attrs.GetInt("hidden_size", 0);
  if (hidden <= 0) return InvalidArgument(n.DebugName() + ": hidden_size must be positive");
  const std::string direction = n.attrs.GetString("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return InvalidArgument(n.DebugName() + ": direction '" + direction + "' is not forward, reverse or bidirectional");
  const int dirs = direction == "bidirectional" ? 2 : 1;
  const Attribute* clip = n.attrs.Find("clip");
  const int64_t H = hidden;
  const int X = In(n, 0), W = In(n, 1), R = In(n, 2), Bias = In(n, 3), h0 = In(n, 5), c0 = In(n, 6), P = In(n, 7);
  AttributeMap gather0, concat0, concat1;
  gather0.Set("axis", Attribute::Int(0));
  concat0.Set("axis", Attribute::Int(0));
  concat1.Set("axis", Attribute::Int(1));
  auto gather = [&](int x, int64_t i) { return e.Op("Gather", {x, e.I64({i}, true)}, gather0); };
  auto slice = [&](int x, int64_t b, int64_t end) { return e.Op("Slice", {x, e.I64({b}), e.I64({end})}); };
  const int shape = e.Op("Shape", {X});  // [S, B, I]
  const int xq = g.AddValue(g.UniqueName(n.name + "/x_quantized"));
  const int xs = g.AddValue(g.UniqueName(n.name + "/x_scale"));
  const int xz = g.AddValue(g.UniqueName(n.name + "/x_zero_point"));
  e.MultiOp("DynamicQuantizeLinear", {e.Op("Reshape", {X, e.Op("Concat", {e.I64({-1}), slice(shape, 2, 3)}, concat0)})},
            {xq, xs, xz}, {});
  auto flip = [&](int x) { return e.Op("Slice", {x, e.I64({-1}), e.I64({INT64_MIN / 2}), e.I64({0}), e.I64({-1})}); };
  std::vector<int> ys, yhs, ycs;
  for (int d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    // ONNX Runtime uses the first zero point of each direction only.
    auto first_zp = [&](int zp) { return gather(e.Op("Reshape", {gather(zp, d), e.I64({-1})}), 0); };
    const int wd = gather(W, d), rd = gather(R, d), wsd = gather(In(n, 8), d), rsd = gather(In(n, 10), d);
    const int wzd = first_zp(In(n, 9)), rzd = first_zp(In(n, 11));
    int xw = IntMatMulToFloat(e, xq, wd, xz, wzd, e.Op("Mul", {xs, wsd}), -1, -1);  // [S·B, 4H]
    xw = e.Op("Reshape", {xw, e.Op("Concat", {slice(shape, 0, 2), e.I64({4 * H})}, concat0)});
    // Outer values the body reads: R, its scale and zero point, Wb + Rb split by gate, P split.
    std::vector<int> outer = {rd, rsd, rzd};
    if (Bias >= 0) {
      const int bd = gather(Bias, d);
      const int sum = e.Op("Add", {slice(bd, 0, 4 * H), slice(bd, 4 * H, 8 * H)});
      std::vector<int> parts;
      for (int k = 0; k < 4; ++k) parts.push_back(g.AddValue(g.UniqueName(n.name + "/bias_gate")));
      e.Split(sum, 0, {H, H, H, H}, parts);
      outer.insert(outer.end(), parts.begin(), parts.end());
    }
    if (P >= 0) {
      std::vector<int> parts;
      for (int k = 0; k < 3; ++k) parts.push_back(g.AddValue(g.UniqueName(n.name + "/peephole")));
      e.Split(gather(P, d), 0, {H, H, H}, parts);
      outer.insert(outer.end(), parts.begin(), parts.end());
    }
    AttributeMap zeros;
    zeros.Set("value", Attribute::TensorValue(Tensor::FromVector<float>({1}, {0.f})));
    const int bh = e.Op("ConstantOfShape", {e.Op("Concat", {slice(shape, 1, 2), e.I64({H})}, concat0)}, zeros);
    const int hinit = h0 >= 0 ? gather(h0, d) : bh, cinit = c0 >= 0 ? gather(c0, d) : bh;

    // The body: state (h, c), scan input X·W at t [B, 4H], scan output h.
    // Its values are named under the direction's own prefix: a saved model's names must be unique
    // across the main graph and every subgraph.
    Graph body;
    Node tag;
    tag.name = n.name + "/direction" + std::to_string(d);
    body.name = tag.name;
    body.opset_imports = g.opset_imports;
    std::set<std::string> body_names;
    std::vector<Node> body_nodes;
    Expander b(body, tag, body_names, body_nodes);
    auto named = [&](const char* what, DType t = DType::kUndefined) { return body.AddValue(tag.name + "/" + what, t); };
    const int h_in = named("h_prev", DType::kFloat32), c_in = named("c_prev", DType::kFloat32);
    const int xw_t = named("xw_t", DType::kFloat32);
    body.inputs() = {h_in, c_in, xw_t};
    std::vector<int> in_body;
    for (size_t k = 0; k < outer.size(); ++k) {
      in_body.push_back(named(("outer_" + std::to_string(k)).c_str()));
      body.inputs().push_back(in_body.back());
    }
    body.outer_inputs = static_cast<int>(outer.size());
    const int b_rd = in_body[0], b_rs = in_body[1], b_rz = in_body[2];
    const int hq = named("h_quantized"), hs = named("h_scale"), hz = named("h_zero_point");
    b.MultiOp("DynamicQuantizeLinear", {h_in}, {hq, hs, hz}, {});
    const int gates = b.Op("Add", {xw_t, IntMatMulToFloat(b, hq, b_rd, hz, b_rz, b.Op("Mul", {hs, b_rs}), -1, -1)});
    int gi = named("gate_i"), go = named("gate_o"), gf = named("gate_f"), gc = named("gate_c");
    b.Split(gates, 1, {H, H, H, H}, {gi, go, gf, gc});
    const size_t peep = Bias >= 0 ? 7 : 3;
    if (P >= 0) {
      gi = b.Op("Add", {gi, b.Op("Mul", {in_body[peep + 0], c_in})});
      gf = b.Op("Add", {gf, b.Op("Mul", {in_body[peep + 2], c_in})});
    }
    if (Bias >= 0) {
      gi = b.Op("Add", {gi, in_body[3]});
      gf = b.Op("Add", {gf, in_body[5]});
      gc = b.Op("Add", {gc, in_body[6]});
    }
    int lo = -1, hi = -1;
    if (clip) {
      lo = b.Scalar(-clip->f), hi = b.Scalar(clip->f);
      gi = b.Op("Clip", {gi, lo, hi}), gf = b.Op("Clip", {gf, lo, hi}), gc = b.Op("Clip", {gc, lo, hi});
    }
    const int c_new = named("c_new", DType::kFloat32);
    b.Op("Add", {b.Op("Mul", {b.Op("Sigmoid", {gf}), c_in}), b.Op("Mul", {b.Op("Sigmoid", {gi}), b.Op("Tanh", {gc})})},
         {}, c_new);
    if (P >= 0) go = b.Op("Add", {go, b.Op("Mul", {in_body[peep + 1], c_new})});
    if (Bias >= 0) go = b.Op("Add", {go, in_body[4]});
    if (clip) go = b.Op("Clip", {go, lo, hi});
    const int h_new = named("h_new", DType::kFloat32), h_scan = named("h_scan", DType::kFloat32);
    b.Op("Mul", {b.Op("Sigmoid", {go}), b.Op("Tanh", {c_new})}, {}, h_new);
    b.Op("Identity", {h_new}, {}, h_scan);
    body.outputs() = {h_new, c_new, h_scan};
    for (Node& m : body_nodes) body.AddNode(std::move(m));
    WH_RETURN_IF_ERROR(body.Verify().WithContext(n.DebugName() + ": its expansion's Scan body"));

    const int h_last = g.AddValue(g.UniqueName(n.name + "/h_last"));
    const int c_last = g.AddValue(g.UniqueName(n.name + "/c_last"));
    int h_all = g.AddValue(g.UniqueName(n.name + "/h_all"));
    AttributeMap scan;
    scan.Set("body", Attribute::GraphValue(std::move(body)));
    scan.Set("num_scan_inputs", Attribute::Int(1));
    std::vector<int> scan_in = {hinit, cinit, reverse ? flip(xw) : xw};
    scan_in.insert(scan_in.end(), outer.begin(), outer.end());
    e.MultiOp("Scan", scan_in, {h_last, c_last, h_all}, scan);
    e.Last().implicit_inputs = static_cast<int>(outer.size());
    if (reverse) h_all = flip(h_all);
    const bool one = dirs == 1;
    ys.push_back(e.Unsqueeze(h_all, {1}, one ? Out(n, 0) : -1));
    yhs.push_back(e.Unsqueeze(h_last, {0}, one ? Out(n, 1) : -1));
    ycs.push_back(e.Unsqueeze(c_last, {0}, one ? Out(n, 2) : -1));
  }
  if (dirs == 2) {
    e.Op("Concat", ys, concat1, Out(n, 0));
    e.Op("Concat", yhs, concat0, Out(n, 1));
    e.Op("Concat", ycs, concat0, Out(n, 2));
  }
  return Status::Ok();
}

}  // namespace

bool IsQuantContrib(const Node& n) { return n.domain == kMs && IsQuantOp(n.op_type); }

Status ExpandQuantContrib(Graph& g, const Node& n, Expander& e) {
  const std::string& op = n.op_type;
  if (g.OpsetFor("") < 10) return Refuse(n, "needs ai.onnx opset 10 or later (MatMulInteger, QuantizeLinear)");
  if (op == "DynamicQuantizeMatMul" || op == "MatMulIntegerToFloat") return MatMulFamily(g, n, e);
  if (op == "QGemm") return QGemm(g, n, e);
  if (op == "QLinearAdd" || op == "QLinearMul") return QLinearBinary(g, n, e);
  if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu") return QLinearUnary(g, n, e);
  if (op == "QLinearConcat") return QLinearConcat(g, n, e);
  if (op == "QLinearGlobalAveragePool") return QLinearGlobalAveragePool(g, n, e);
  if (op == "QLinearAveragePool") return QLinearAveragePool(g, n, e);
  if (op == "QLinearSoftmax") return QLinearSoftmax(g, n, e);
  if (op == "QAttention") return QAttention(g, n, e);
  if (op == "QEmbedLayerNormalization") return QEmbedLayerNorm(g, n, e);
  if (op == "DynamicQuantizeLSTM") return DynamicQuantizeLstm(g, n, e);
  return Refuse(n, "not expanded");
}

}  // namespace whittle::contrib
