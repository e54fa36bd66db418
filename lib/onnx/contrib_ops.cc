#include "lib/onnx/contrib_ops.h"

#include <cfloat>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/onnx/contrib_expander.h"

namespace whittle {
namespace contrib {
namespace {

// Whether the node is one this module reads.
bool IsContrib(const Node& n) {
  static const std::set<std::string> ms = {"SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
                                           "Gelu",           "BiasGelu",
                                           "FastGelu",       "QuickGelu",
                                           "BiasAdd",        "BiasSplitGelu",
                                           "FusedMatMul",    "SimplifiedLayerNormalization",
                                           "FusedGemm",      "EmbedLayerNormalization",
                                           "Attention"};
  if (n.domain == kMs) return ms.count(n.op_type) > 0 || IsQuantContrib(n);
  return (n.domain.empty() || n.domain == "ai.onnx") && n.op_type == "SimplifiedLayerNormalization";
}

// RMS normalization of x over its last axis: x / √(mean(x²) + ε) · gamma; inv_std written to
// `inv_to` when >= 0.
void Rms(Expander& e, int x, int gamma, float eps, int y_to, int inv_to) {
  const int ms = e.MeanLast(e.Op("Mul", {x, x}));
  const int inv = e.Op("Reciprocal", {e.Op("Sqrt", {e.Op("Add", {ms, e.Scalar(eps)})})}, {}, inv_to);
  e.Op("Mul", {e.Op("Mul", {x, inv}), gamma}, {}, y_to);
}

// The rank of the mask feeding Attention, read back through Casts to where it is declared: a
// graph input, or EmbedLayerNormalization's mask_index (1-D). 0 when it cannot be told.
int MaskRank(const Graph& g, int id, const Node** embed) {
  for (int hops = 0; id >= 0 && hops < 8; ++hops) {
    const Value& v = g.value(id);
    if (v.shape) return static_cast<int>(v.shape->size());
    if (v.producer < 0) return 0;
    const Node& p = g.nodes()[static_cast<size_t>(v.producer)];
    if (p.domain == kMs && (p.op_type == "EmbedLayerNormalization" || p.op_type == "QEmbedLayerNormalization") &&
        Out(p, 1) == id) {
      *embed = &p;
      return 1;
    }
    if (p.op_type != "Cast" && p.op_type != "Identity") return 0;
    id = In(p, 0);
  }
  return 0;
}

// com.microsoft Attention: qkv = input · W + bias split into Q, K, V of num_heads
// heads; softmax(scale · Q·Kᵀ + attention_bias + mask) · V, heads joined (AttentionFromQkv).
Status ExpandAttention(Graph& g, const Node& n, Expander& e) {
  WH_RETURN_IF_ERROR(CheckInputs(n, 2, 7));
  WH_RETURN_IF_ERROR(CheckAttentionForm(g, n, 4));
  WH_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, QkvSizes(g, n));
  int qkv = e.Op("MatMul", {In(n, 0), In(n, 1)});
  if (In(n, 2) >= 0) qkv = e.Op("Add", {qkv, In(n, 2)});
  return AttentionFromQkv(g, n, e, qkv, In(n, 0), sizes, In(n, 3), In(n, 5), In(n, 4));
}

Status ExpandOne(Graph& g, const Node& n, Expander& e) {
  const std::string& op = n.op_type;
  if (op == "SkipLayerNormalization" || op == "SkipSimplifiedLayerNormalization") {
    const bool simplified = op == "SkipSimplifiedLayerNormalization";
    WH_RETURN_IF_ERROR(CheckInputs(n, 3, simplified ? 4 : 5));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 4));
    const float eps = n.attrs.GetFloat("epsilon", 1e-12f);
    const int beta = simplified ? -1 : In(n, 3), bias = In(n, simplified ? 3 : 4);
    const int x = e.Sum(In(n, 0), In(n, 1), bias, Out(n, 3));
    if (simplified) {
      if (Out(n, 1) >= 0 && (!g.Consumers(Out(n, 1)).empty() || g.IsGraphOutput(Out(n, 1))))
        return Refuse(n, "its output 1 (mean) is read, which ONNX Runtime fills with zeros for the simplified form");
      Rms(e, x, In(n, 2), eps, Out(n, 0), Out(n, 2));
      return Status::Ok();
    }
    e.LayerNorm(x, In(n, 2), beta, eps, Out(n, 0), Out(n, 1), Out(n, 2));
    return Status::Ok();
  }
  if (op == "SimplifiedLayerNormalization") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 2, 2));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 2));
    if (n.attrs.GetInt("axis", -1) != -1)
      return Refuse(n, "axis " + std::to_string(n.attrs.GetInt("axis", -1)) + " is not supported (only -1, the last axis)");
    Rms(e, In(n, 0), In(n, 1), n.attrs.GetFloat("epsilon", 1e-5f), Out(n, 0), Out(n, 1));
    return Status::Ok();
  }
  if (op == "Gelu" || op == "BiasGelu") {
    WH_RETURN_IF_ERROR(CheckInputs(n, op == "Gelu" ? 1 : 2, op == "Gelu" ? 1 : 2));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
    e.GeluErf(e.Sum(In(n, 0), In(n, 1), -1), Out(n, 0));
    return Status::Ok();
  }
  if (op == "FastGelu") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 1, 2));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
    e.GeluTanh(e.Sum(In(n, 0), In(n, 1), -1), Out(n, 0));
    return Status::Ok();
  }
  if (op == "QuickGelu") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 1, 1));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
    const int x = In(n, 0);
    e.Op("Mul", {x, e.Op("Sigmoid", {e.Op("Mul", {x, e.Scalar(n.attrs.GetFloat("alpha", 1.702f))})})}, {}, Out(n, 0));
    return Status::Ok();
  }
  if (op == "BiasAdd") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 3, 3));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
    e.Sum(In(n, 0), In(n, 1), In(n, 2), Out(n, 0));
    return Status::Ok();
  }
  if (op == "BiasSplitGelu") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 2, 2));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
    const int x = e.Sum(In(n, 0), In(n, 1), -1);
    // The two halves of the last axis: the left gated by Gelu of the right. Split with no sizes
    // halves it (num_outputs from opset 18).
    const int left = g.AddValue(g.UniqueName(n.name + "/left"), DType::kFloat32);
    const int right = g.AddValue(g.UniqueName(n.name + "/right"), DType::kFloat32);
    AttributeMap a;
    a.Set("axis", Attribute::Int(-1));
    if (g.OpsetFor("") >= 18) a.Set("num_outputs", Attribute::Int(2));
    e.MultiOp("Split", {x}, {left, right}, a);
    e.Op("Mul", {left, e.GeluErf(right, -1)}, {}, Out(n, 0));
    return Status::Ok();
  }
  if (op == "FusedMatMul") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 2, 2));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
    if (n.attrs.GetInt("transBatchA", 0) || n.attrs.GetInt("transBatchB", 0))
      return Refuse(n, "transBatchA/transBatchB are not supported");
    std::vector<int> ops = {In(n, 0), In(n, 1)};
    const char* attr[2] = {"transA", "transB"};
    for (int k = 0; k < 2; ++k) {
      if (!n.attrs.GetInt(attr[k], 0)) continue;
      const Value& v = g.value(ops[static_cast<size_t>(k)]);
      if (!v.shape || v.shape->size() < 2)
        return Refuse(n, std::string(attr[k]) + "=1 needs the rank of '" + v.name +
                             "' (at least 2), which the model does not declare");
      std::vector<int64_t> perm;
      const int64_t r = static_cast<int64_t>(v.shape->size());
      for (int64_t i = 0; i < r; ++i) perm.push_back(i);
      std::swap(perm[static_cast<size_t>(r - 1)], perm[static_cast<size_t>(r - 2)]);
      AttributeMap a;
      a.Set("perm", Attribute::Ints(perm));
      ops[static_cast<size_t>(k)] = e.Op("Transpose", {ops[static_cast<size_t>(k)]}, a);
    }
    const float alpha = n.attrs.GetFloat("alpha", 1.f);
    const int y = e.Op("MatMul", ops, {}, alpha == 1.f ? Out(n, 0) : -1);
    if (alpha != 1.f) e.Op("Mul", {y, e.Scalar(alpha)}, {}, Out(n, 0));
    return Status::Ok();
  }
  if (op == "FusedGemm") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 2, 3));
    WH_RETURN_IF_ERROR(CheckOutputs(n, 1));
    AttributeMap a;
    for (const char* k : {"alpha", "beta", "transA", "transB"})
      if (const Attribute* v = n.attrs.Find(k)) a.Set(k, *v);
    const std::string act = n.attrs.GetString("activation", "");
    std::vector<int> ins = {In(n, 0), In(n, 1)};
    if (In(n, 2) >= 0) ins.push_back(In(n, 2));
    if (act.empty()) {
      e.Op("Gemm", ins, a, Out(n, 0));
      return Status::Ok();
    }
    AttributeMap fa;
    if (act == "LeakyRelu") {
      fa.Set("alpha", Attribute::Float(n.attrs.GetFloat("activation_alpha", 0.01f)));
    } else if (act == "HardSigmoid") {
      fa.Set("alpha", Attribute::Float(n.attrs.GetFloat("activation_alpha", 0.2f)));
      fa.Set("beta", Attribute::Float(n.attrs.GetFloat("activation_beta", 0.5f)));
    } else if (act != "Relu" && act != "Tanh" && act != "Sigmoid") {
      return Refuse(n, "activation '" + act + "' is not supported (Relu, Tanh, Sigmoid, LeakyRelu, HardSigmoid)");
    }
    e.Op(act, {e.Op("Gemm", ins, a)}, fa, Out(n, 0));
    return Status::Ok();
  }
  if (op == "EmbedLayerNormalization") {
    WH_RETURN_IF_ERROR(CheckInputs(n, 1, 9));
    std::vector<int> ins;
    for (size_t i = 0; i < 9; ++i) ins.push_back(In(n, i));
    return EmbedLayerNorm(g, n, e, ins);
  }
  if (op == "Attention") return ExpandAttention(g, n, e);
  if (IsQuantContrib(n)) return ExpandQuantContrib(g, n, e);
  return Refuse(n, "not expanded");
}

}  // namespace

Status CheckAttentionForm(const Graph& g, const Node& n, size_t past_slot) {
  if (g.OpsetFor("") < 11) return Refuse(n, "needs ai.onnx opset 11 or later (Range)");
  WH_RETURN_IF_ERROR(CheckOutputs(n, 2));
  if (n.attrs.GetInt("num_heads", 0) <= 0) return InvalidArgument(n.DebugName() + ": num_heads must be positive");
  if (n.attrs.GetInt("do_rotary", 0) != 0) return Refuse(n, "do_rotary=1 is not supported");
  if (n.attrs.GetInt("past_present_share_buffer", 0) != 0)
    return Refuse(n, "past_present_share_buffer=1 is not supported");
  if (In(n, past_slot) >= 0 && n.inputs.size() > past_slot + 2 && n.inputs[past_slot + 2] >= 0)
    return Refuse(n, "a past_sequence_length input is not supported");
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> QkvSizes(const Graph& g, const Node& n) {
  std::vector<int64_t> sizes = n.attrs.GetInts("qkv_hidden_sizes");
  if (!sizes.empty()) return sizes;
  // Without the attribute, the weights' width in thirds: from the constant or its declared shape.
  int64_t width = -1;
  if (const Tensor* w = g.ConstInput(n, 1); w && w->rank() == 2) {
    width = w->dim(1);
  } else if (const Value& v = g.value(In(n, 1)); v.shape && v.shape->size() == 2 && (*v.shape)[1].known()) {
    width = (*v.shape)[1].value;
  }
  if (width <= 0 || width % 3 != 0)
    return Refuse(n, "without qkv_hidden_sizes its weights must be a [in, 3 x hidden] matrix of known width");
  return std::vector<int64_t>{width / 3, width / 3, width / 3};
}

// The mask is additive, mask_filter_value (default -10000) where a key is masked: a 1-D key
// length per sequence (what EmbedLayerNormalization's mask_index gives) or a 2-D [B, T] mask that
// keeps keys > 0.
Status AttentionFromQkv(Graph& g, const Node& n, Expander& e, int qkv, int input, const std::vector<int64_t>& sizes,
                        int mask_in, int attention_bias, int past) {
  const int64_t heads = n.attrs.GetInt("num_heads", 0);
  if (sizes.size() != 3 || sizes[0] != sizes[1] || sizes[0] <= 0 || sizes[2] <= 0 || sizes[0] % heads != 0 ||
      sizes[2] % heads != 0)
    return InvalidArgument(n.DebugName() + ": qkv_hidden_sizes must be three positive sizes, Q and K equal, each a "
                           "multiple of num_heads " + std::to_string(heads));
  const int64_t head = sizes[0] / heads, head_v = sizes[2] / heads;
  float scale = n.attrs.GetFloat("scale", 0.f);
  if (scale == 0.f) scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head)));
  const float filter = n.attrs.GetFloat("mask_filter_value", -10000.f);

  const bool opset13 = g.OpsetFor("") >= 13;
  const bool causal = n.attrs.GetInt("unidirectional", 0) != 0;
  const int present = Out(n, 1) >= 0 && (!g.Consumers(Out(n, 1)).empty() || g.IsGraphOutput(Out(n, 1))) ? Out(n, 1) : -1;
  if ((past >= 0 || present >= 0) && head != head_v)
    return Refuse(n, "a past or present key/value needs V as wide as Q and K");
  int qh, kt, vh;  // [B, N, S, h], [B, N, h, T], [B, N, T, hv]
  if (sizes[0] == sizes[2] && !causal && past < 0 && present < 0) {
    // Equal widths: the packed-qkv form exporters write for ViT-style attention, which the
    // runtime's fuse_attention turns into its fused kernel: Reshape to [B, S, 3, N, h],
    // Transpose [2, 0, 3, 1, 4], Split along the 3, Squeeze; K transposed last.
    AttributeMap perm5, split0, squeeze0, kperm;
    perm5.Set("perm", Attribute::Ints({2, 0, 3, 1, 4}));
    kperm.Set("perm", Attribute::Ints({0, 1, 3, 2}));
    split0.Set("axis", Attribute::Int(0));
    const int t = e.Op("Transpose", {e.Op("Reshape", {qkv, e.I64({0, 0, 3, heads, head})})}, perm5);
    int parts[3];
    for (int& p : parts) p = g.AddValue(g.UniqueName(n.name + "/qkv_part"));
    if (opset13) {
      e.MultiOp("Split", {t, e.I64({1, 1, 1})}, {parts[0], parts[1], parts[2]}, split0);
    } else {
      split0.Set("split", Attribute::Ints({1, 1, 1}));
      e.MultiOp("Split", {t}, {parts[0], parts[1], parts[2]}, split0);
    }
    auto squeeze = [&](int x) {
      if (opset13) return e.Op("Squeeze", {x, e.I64({0})});
      AttributeMap a;
      a.Set("axes", Attribute::Ints({0}));
      return e.Op("Squeeze", {x}, a);
    };
    qh = squeeze(parts[0]);
    kt = e.Op("Transpose", {squeeze(parts[1])}, kperm);
    vh = squeeze(parts[2]);
  } else {
    const int q = g.AddValue(g.UniqueName(n.name + "/q"));
    const int k = g.AddValue(g.UniqueName(n.name + "/k"));
    const int v = g.AddValue(g.UniqueName(n.name + "/v"));
    AttributeMap split;
    split.Set("axis", Attribute::Int(-1));
    if (opset13) {
      e.MultiOp("Split", {qkv, e.I64(sizes)}, {q, k, v}, split);
    } else {
      split.Set("split", Attribute::Ints(sizes));
      e.MultiOp("Split", {qkv}, {q, k, v}, split);
    }
    auto heads_of = [&](int x, int64_t width, std::vector<int64_t> perm) {  // [B, S, N·h] -> permuted [B, S, N, h]
      AttributeMap tp;
      tp.Set("perm", Attribute::Ints(std::move(perm)));
      return e.Op("Transpose", {e.Op("Reshape", {x, e.I64({0, 0, heads, width})})}, tp);
    };
    qh = heads_of(q, head, {0, 2, 1, 3});
    vh = heads_of(v, head_v, {0, 2, 1, 3});
    if (past < 0 && present < 0) {
      kt = heads_of(k, head, {0, 2, 3, 1});
    } else {
      // The keys and values of earlier steps ([2, B, N, P, h]) come first; present holds them all.
      int kh = heads_of(k, head, {0, 2, 1, 3});
      AttributeMap gather0, concat0, concat2, kperm;
      gather0.Set("axis", Attribute::Int(0));
      concat0.Set("axis", Attribute::Int(0));
      concat2.Set("axis", Attribute::Int(2));
      kperm.Set("perm", Attribute::Ints({0, 1, 3, 2}));
      if (past >= 0) {
        kh = e.Op("Concat", {e.Op("Gather", {past, e.I64({0}, true)}, gather0), kh}, concat2);
        vh = e.Op("Concat", {e.Op("Gather", {past, e.I64({1}, true)}, gather0), vh}, concat2);
      }
      if (present >= 0) e.Op("Concat", {e.Unsqueeze(kh, {0}), e.Unsqueeze(vh, {0})}, concat0, present);
      kt = e.Op("Transpose", {kh}, kperm);
    }
  }
  int scores = e.Op("Mul", {e.Op("MatMul", {qh, kt}), e.Scalar(scale)});
  if (attention_bias >= 0) scores = e.Op("Add", {scores, attention_bias});
  if (const int mask = mask_in; mask >= 0) {
    const Node* embed = nullptr;
    const int rank = MaskRank(g, mask, &embed);
    int keep;  // [B, T] bool: the keys each sequence attends to
    if (rank == 1) {
      // Key lengths: key j is kept where j < length[b]. A declared 1-D mask may also be [2B]: end
      // positions, then start positions (key j kept where start[b] <= j < end[b]).
      AttributeMap gather0, to_i32, concat0;
      gather0.Set("axis", Attribute::Int(0));
      concat0.Set("axis", Attribute::Int(0));
      to_i32.Set("to", Attribute::Int(static_cast<int64_t>(DType::kInt32)));
      const int shape = e.Op("Shape", {input});
      const int t = e.Op("Cast", {e.Op("Gather", {e.Op("Shape", {scores}), e.I64({3}, true)}, gather0)}, to_i32);
      const int j = e.Unsqueeze(e.Op("Range", {e.I32({0}, true), t, e.I32({1}, true)}), {0});  // [1, T]
      if (embed) {
        keep = e.Op("Less", {j, e.Unsqueeze(mask, {1})});
      } else {
        const int b = e.Op("Slice", {shape, e.I64({0}), e.I64({1})});
        const int b2 = e.Op("Add", {b, b});
        const int end = e.Op("Slice", {mask, e.I64({0}), b});
        AttributeMap zeros;
        zeros.Set("value", Attribute::TensorValue(Tensor::FromVector<int32_t>({1}, {0})));
        const int padded = e.Op("Concat", {mask, e.Op("ConstantOfShape", {b}, zeros)}, concat0);
        const int start = e.Op("Slice", {padded, b, b2});  // zeros for a [B] mask
        keep = e.Op("And", {e.Op("Less", {j, e.Unsqueeze(end, {1})}),
                            e.Op("Not", {e.Op("Less", {j, e.Unsqueeze(start, {1})})})});
      }
    } else if (rank == 2) {
      keep = e.Op("Greater", {mask, e.I32({0}, true)});
    } else {
      return Refuse(n, rank == 0 ? "the rank of its mask_index cannot be told at load (declare it on the graph input "
                                   "or take it from EmbedLayerNormalization)"
                                 : "a " + std::to_string(rank) + "-D mask_index is not supported (1-D lengths or 2-D [batch, keys])");
    }
    const int add = e.Op("Where", {keep, e.Scalar(0.f), e.Scalar(filter)});  // [B, T]
    scores = e.Op("Add", {scores, e.Unsqueeze(add, {1, 2})});
  }
  if (causal) {
    // Key j is hidden from query i where j > P + i (P earlier steps, P = T - S): the lowest float
    // is added there, as ONNX Runtime does, whatever mask_filter_value is.
    AttributeMap gather0;
    gather0.Set("axis", Attribute::Int(0));
    const int shape = e.Op("Shape", {scores});
    const int sq = e.Op("Gather", {shape, e.I64({2}, true)}, gather0);
    const int tk = e.Op("Gather", {shape, e.I64({3}, true)}, gather0);
    const int i = e.Op("Add", {e.Op("Range", {e.I64({0}, true), sq, e.I64({1}, true)}), e.Op("Sub", {tk, sq})});
    const int j = e.Op("Range", {e.I64({0}, true), tk, e.I64({1}, true)});
    const int later = e.Op("Greater", {e.Unsqueeze(j, {0}), e.Unsqueeze(i, {1})});  // [S, T]
    scores = e.Op("Add", {scores, e.Op("Where", {later, e.Scalar(-FLT_MAX), e.Scalar(0.f)})});
  }
  AttributeMap softmax;
  softmax.Set("axis", Attribute::Int(-1));
  const int probs = e.Op("Softmax", {scores}, softmax);
  AttributeMap back;
  back.Set("perm", Attribute::Ints({0, 2, 1, 3}));
  const int ctx = e.Op("Transpose", {e.Op("MatMul", {probs, vh})}, back);  // [B, S, N, hv]
  e.Op("Reshape", {ctx, e.I64({0, 0, sizes[2]})}, {}, Out(n, 0));
  return Status::Ok();
}

Status EmbedLayerNorm(Graph& g, const Node& n, Expander& e, const std::vector<int>& ins) {
  auto I = [&](size_t i) { return i < ins.size() ? ins[i] : -1; };
  if (g.OpsetFor("") < 11) return Refuse(n, "needs ai.onnx opset 11 or later (Range)");
  WH_RETURN_IF_ERROR(CheckOutputs(n, 3));
  const int ids = I(0), segment_ids = I(1), word = I(2), pos_table = I(3), seg_table = I(4);
  for (size_t i : {2, 3, 5, 6})  // word, position embeddings, gamma, beta; segments are optional
    if (I(i) < 0) return InvalidArgument(n.DebugName() + ": required input " + std::to_string(i) + " is missing");
  AttributeMap gather0;
  gather0.Set("axis", Attribute::Int(0));
  int sum = e.Op("Gather", {word, ids}, gather0);
  int pos;
  if (I(8) >= 0) {
    pos = e.Op("Gather", {pos_table, I(8)}, gather0);  // [B or 1, S, H]
  } else {  // positions 0..S-1, broadcast over the batch
    const int seq = e.Op("Gather", {e.Op("Shape", {ids}), e.I64({1}, true)}, gather0);
    pos = e.Op("Gather", {pos_table, e.Op("Range", {e.I64({0}, true), seq, e.I64({1}, true)})}, gather0);
  }
  sum = e.Op("Add", {sum, pos}, {}, segment_ids >= 0 && seg_table >= 0 ? -1 : Out(n, 2));
  if (segment_ids >= 0 && seg_table >= 0) sum = e.Op("Add", {sum, e.Op("Gather", {seg_table, segment_ids}, gather0)}, {}, Out(n, 2));
  e.LayerNorm(sum, I(5), I(6), n.attrs.GetFloat("epsilon", 1e-12f), Out(n, 0), -1, -1);
  if (Out(n, 1) >= 0) {
    // mask_index: per sequence, the count of mask entries equal to 1 (0 for all without a mask).
    AttributeMap to_i32, to_f32;
    to_i32.Set("to", Attribute::Int(static_cast<int64_t>(DType::kInt32)));
    to_f32.Set("to", Attribute::Int(static_cast<int64_t>(DType::kFloat32)));
    const int ones = I(7) >= 0 ? e.Op("Cast", {e.Op("Equal", {I(7), e.I32({1}, true)})}, to_f32)
                                   : e.Op("Mul", {e.Op("Cast", {ids}, to_f32), e.Scalar(0.f)});
    e.Op("Cast", {e.SumOver(ones, {1}, -1)}, to_i32, Out(n, 1));
  }
  return Status::Ok();
}

}  // namespace contrib

Status ExpandContribOps(Graph& g, int* count) {
  if (count) *count = 0;
  bool any = false;
  for (const Node& n : g.nodes()) any = any || contrib::IsContrib(n);
  if (!any) return Status::Ok();
  std::set<std::string> names;
  for (const Node& n : g.nodes()) names.insert(n.name);
  std::vector<Node> out;
  out.reserve(g.nodes().size());
  const std::vector<Node> nodes = g.nodes();  // the Expander adds values, never nodes, to g
  for (const Node& n : nodes) {
    if (!contrib::IsContrib(n)) {
      out.push_back(n);
      continue;
    }
    // The constants an expansion adds are float32 (ids and masks are integers of any width).
    for (int id : n.inputs) {
      const DType t = id >= 0 ? g.value(id).dtype : DType::kUndefined;
      if (t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat64)
        return contrib::Refuse(n, std::string("input '") + g.value(id).name + "' is " + DTypeName(t) +
                             "; only float32 models are read");
    }
    contrib::Expander e(g, n, names, out);
    WH_RETURN_IF_ERROR(contrib::ExpandOne(g, n, e));
    if (count) ++*count;
  }
  g.nodes() = std::move(out);
  g.Reindex();
  return Status::Ok();
}

}  // namespace whittle
