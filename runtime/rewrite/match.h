// What every runtime rewrite rule checks before it touches the graph: that an input is a
// constant initializer, that a value has one consumer which reads it once and is not a graph
// output (so the producer's output may be rewritten), and who produces a value. Shared by
// fold_constants, fold_conv_bn, fold_into_conv, fuse_activations, fuse_qdq and nchwc (and the
// int8 pass, for the Clip bounds it fuses).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>

#include "lib/ir/graph.h"

namespace whittle::rewrite {

inline bool IsOp(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

// Input slot i of n, or -1 when absent.
inline int InputAt(const Node& n, size_t i) { return i < n.inputs.size() ? n.inputs[i] : -1; }

// The initializer of value id, or null (absent id, or not a constant).
inline const Tensor* ConstValue(const Graph& g, int id) {
  if (id < 0) return nullptr;
  const Value& v = g.value(id);
  return v.initializer ? &*v.initializer : nullptr;
}

// The initializer behind input slot of n, or null (no such input, or not a constant).
inline const Tensor* ConstInput(const Graph& g, const Node& n, size_t slot) { return ConstValue(g, InputAt(n, slot)); }

// The node producing value id, or null (absent id, a graph input or an initializer).
inline const Node* Producer(const Graph& g, int id) {
  if (id < 0) return nullptr;
  const int p = g.value(id).producer;
  return p < 0 ? nullptr : &g.nodes()[static_cast<size_t>(p)];
}

// The index of the only node reading value id, reading it once; -1 when id is absent, a graph
// output, or has other readers.
inline int SoleConsumer(const Graph& g, int id) { return id < 0 ? -1 : g.SoleConsumer(id); }

// An inference BatchNormalization's scale, B, mean and var (each float32 with `channels` values)
// and epsilon; the per-channel multiplier scale / sqrt(var + eps) is what the folds apply.
struct BatchNormConsts {
  const float *scale = nullptr, *beta = nullptr, *mean = nullptr, *var = nullptr;
  float eps = 1e-5f;
  float Multiplier(int64_t c) const { return scale[c] / std::sqrt(var[c] + eps); }
};
// bn's constants, or nullopt when any of its four is not a constant float32 [channels].
inline std::optional<BatchNormConsts> BatchNormConstants(const Graph& g, const Node& bn, int64_t channels) {
  const float* p[4];
  for (size_t i = 1; i < 5; ++i) {
    const Tensor* t = ConstInput(g, bn, i);
    if (!t || t->dtype() != DType::kFloat32 || t->numel() != channels) return std::nullopt;
    p[i - 1] = t->data<float>();
  }
  return BatchNormConsts{p[0], p[1], p[2], p[3], bn.attrs.GetFloat("epsilon", 1e-5f)};
}

// A Conv whose weight and bias a rewrite may fold more into: ai.onnx Conv without a fused
// activation yet, a constant float32 weight of rank >= 3, and a constant bias when it has one.
inline bool FoldableConv(const Graph& g, const Node& c) {
  if (!IsOp(c, "Conv") || c.attrs.Has("_activation")) return false;
  const Tensor* w = ConstInput(g, c, 1);
  if (!w || w->dtype() != DType::kFloat32 || w->rank() < 3) return false;
  return InputAt(c, 2) < 0 || ConstInput(g, c, 2);
}

// A Clip's bounds when both are known before the run: attributes below opset 11, else optional
// constant float32 scalar inputs. An absent bound is -inf or +inf. nullopt when a bound is computed.
struct ClipRange {
  float min = -std::numeric_limits<float>::infinity();
  float max = std::numeric_limits<float>::infinity();
};
inline std::optional<ClipRange> ConstClipRange(const Graph& g, const Node& clip) {
  ClipRange r;
  if (g.OpsetFor("") < 11) {
    r.min = clip.attrs.GetFloat("min", r.min);
    r.max = clip.attrs.GetFloat("max", r.max);
    return r;
  }
  for (size_t i = 1; i < 3; ++i) {
    if (InputAt(clip, i) < 0) continue;
    const Tensor* t = ConstInput(g, clip, i);
    if (!t || t->dtype() != DType::kFloat32 || t->numel() != 1) return std::nullopt;
    (i == 1 ? r.min : r.max) = t->data<float>()[0];
  }
  return r;
}
// A fused Clip's bounds as its producer's internal attributes (_min / _max where finite;
// kernels/common/fused_activation.h reads an absent one as unbounded).
inline void SetClipBounds(AttributeMap& a, const ClipRange& r) {
  if (std::isfinite(r.min)) a.Set("_min", Attribute::Float(r.min));
  if (std::isfinite(r.max)) a.Set("_max", Attribute::Float(r.max));
}

// When value y's only reader is a two-input Add whose other operand is a different value: that
// Add's node index, with the other operand in *other; else -1.
inline int SoleAddOf(const Graph& g, int y, int* other) {
  const int ai = SoleConsumer(g, y);
  if (ai < 0) return -1;
  const Node& add = g.nodes()[static_cast<size_t>(ai)];
  if (!IsOp(add, "Add") || add.inputs.size() != 2 || add.outputs.size() != 1) return -1;
  *other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  return *other < 0 || *other == y ? -1 : ai;
}

// A MatMul's bias as exporters write a Linear on 3-D input: y's only reader Add(y, b), either
// operand order, with b a constant float32 of one value per output channel (rank 1 or 2, its last
// dim `channels`). That Add's node index, with b's value id in *bias; else -1. The quantizer keeps
// such an Add before the layer's output QuantizeLinear and the runtime fuses it as the int32 bias.
inline int MatMulBiasAdd(const Graph& g, int y, int64_t channels, int* bias) {
  int other = -1;
  const int ai = SoleAddOf(g, y, &other);
  if (ai < 0 || g.nodes()[static_cast<size_t>(ai)].outputs[0] < 0) return -1;
  const Tensor* b = ConstValue(g, other);
  if (!b || b->dtype() != DType::kFloat32 || b->rank() < 1 || b->rank() > 2 || b->numel() != channels ||
      b->dim(b->rank() - 1) != channels)
    return -1;
  *bias = other;
  return ai;
}

}  // namespace whittle::rewrite
