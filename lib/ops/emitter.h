// Emitter: appends nodes, constants and the usual opset-dependent forms (ReduceSum, ReduceMean,
// Unsqueeze, Slice, Pad by attribute or by input) to a graph. The gradient rules (lib/ops/*_grad.cc)
// write the backward with it, and the training engine (runtime/training/autodiff.cc) its loss and
// batch statistics. Needs only lib/ir.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle {

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
inline std::optional<SymShape> ShapeOf(const Graph& g, int v) { return g.value(v).shape; }

}  // namespace whittle
