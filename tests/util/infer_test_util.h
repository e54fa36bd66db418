// Helpers for OpDef tests: run one op's shape inference on symbolic or constant inputs, validate
// its attributes, and assert on inferred shapes and error messages.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lib/ops/op_def.h"

namespace whittle::testing {

// One inference input: dtype, optional symbolic shape, optional known value, presence.
struct In {
  DType dt = DType::kFloat32;
  std::optional<SymShape> shape;
  const Tensor* value = nullptr;
  bool present = true;
};
inline In Sh(SymShape s, DType dt = DType::kFloat32) { return In{dt, std::move(s), nullptr, true}; }
inline In Val(const Tensor& t) { return In{t.dtype(), ToSymShape(t.dims()), &t, true}; }
inline In NoRank(DType dt = DType::kFloat32) { return In{dt, std::nullopt, nullptr, true}; }
inline In Absent() { return In{DType::kUndefined, std::nullopt, nullptr, false}; }

struct Inferred {
  Status status;
  std::vector<DType> dtypes;
  std::vector<std::optional<SymShape>> shapes;
};

inline Inferred Infer(const Node& node, int opset, const std::vector<In>& ins) {
  RegisterAllOps();
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op_type);
  Inferred r;
  if (!def) {
    r.status = NotFound("no OpDef for " + node.op_type);
    return r;
  }
  InferContext ctx(node, opset);
  for (const In& i : ins) ctx.AddInput(i.present, i.dt, i.shape, i.value);
  for (int o : node.outputs) ctx.AddOutputSlot(o >= 0);
  r.status = InferNode(*def, ctx);
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    r.dtypes.push_back(ctx.OutputDType(i));
    r.shapes.push_back(ctx.OutputShape(i));
  }
  return r;
}

inline Status Validate(const Node& node, int opset) { return ValidateNode(node, opset); }

inline AttributeMap Attrs(std::initializer_list<std::pair<const std::string, Attribute>> kv) {
  AttributeMap a;
  for (const auto& [k, v] : kv) a.Set(k, v);
  return a;
}

inline const Dim kBatch = Dim::Symbol("batch");
inline Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v); }

inline ::testing::AssertionResult ShapeIs(const Inferred& r, const SymShape& want, int out = 0) {
  if (!r.status.ok()) return ::testing::AssertionFailure() << r.status.message();
  if (!r.shapes[static_cast<size_t>(out)]) return ::testing::AssertionFailure() << "no shape inferred";
  if (*r.shapes[static_cast<size_t>(out)] != want)
    return ::testing::AssertionFailure() << SymShapeToString(*r.shapes[static_cast<size_t>(out)]) << " vs "
                                         << SymShapeToString(want);
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult FailsWith(const Status& st, const std::string& part) {
  if (st.ok()) return ::testing::AssertionFailure() << "expected an error containing '" << part << "'";
  if (st.message().find(part) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << st.message() << "' lacks '" << part << "'";
  return ::testing::AssertionSuccess();
}

}  // namespace whittle::testing
