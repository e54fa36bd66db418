#include "lib/onnx/schema_compat.h"

#include <onnx/defs/schema.h>

#include <vector>

namespace whittle {
namespace {

std::string Step(const std::string& op, int a, int b) {
  return op + " " + std::to_string(a) + " -> " + std::to_string(b) + ": ";
}

// Empty when `next` is a compatible extension of `prev`, else what changed.
std::string Difference(const onnx::OpSchema& prev, const onnx::OpSchema& next) {
  for (const auto& [name, a] : prev.attributes()) {
    auto it = next.attributes().find(name);
    if (it == next.attributes().end()) return "attribute '" + name + "' was removed";
    const auto& b = it->second;
    if (a.type != b.type) return "attribute '" + name + "' changed its type";
    if (a.required != b.required) return "attribute '" + name + "' changed whether it is required";
    if (a.default_value.SerializeAsString() != b.default_value.SerializeAsString())
      return "attribute '" + name + "' changed its default";
  }
  for (const auto& [name, b] : next.attributes())
    if (!prev.attributes().count(name) && b.required) return "a required attribute '" + name + "' was added";
  auto params = [](const std::vector<onnx::OpSchema::FormalParameter>& p, const std::vector<onnx::OpSchema::FormalParameter>& q,
                   const char* what) -> std::string {
    if (q.size() < p.size()) return std::string(what) + "s were removed";
    for (size_t i = 0; i < p.size(); ++i) {
      if (p[i].GetName() != q[i].GetName())
        return std::string(what) + " " + std::to_string(i) + " changed from '" + p[i].GetName() + "' to '" +
               q[i].GetName() + "'";
      const auto po = p[i].GetOption(), qo = q[i].GetOption();
      if (po != qo && !(po == onnx::OpSchema::Single && qo == onnx::OpSchema::Optional))
        return std::string(what) + " '" + p[i].GetName() + "' changed its arity";
    }
    for (size_t i = p.size(); i < q.size(); ++i)
      if (q[i].GetOption() != onnx::OpSchema::Optional)
        return "a required " + std::string(what) + " '" + q[i].GetName() + "' was added";
    return "";
  };
  std::string d = params(prev.inputs(), next.inputs(), "input");
  if (!d.empty()) return d;
  return params(prev.outputs(), next.outputs(), "output");
}

}  // namespace

bool OpUnchangedBetween(const std::string& op, int64_t from, int64_t to, std::string* why) {
  const onnx::OpSchema* prev = onnx::OpSchemaRegistry::Schema(op, static_cast<int>(from), onnx::ONNX_DOMAIN);
  if (!prev) {
    *why = op + ": no ONNX schema at opset " + std::to_string(from);
    return false;
  }
  for (int64_t v = from + 1; v <= to; ++v) {
    const onnx::OpSchema* next = onnx::OpSchemaRegistry::Schema(op, static_cast<int>(v), onnx::ONNX_DOMAIN);
    if (!next) {
      *why = op + ": no ONNX schema at opset " + std::to_string(v);
      return false;
    }
    if (next->SinceVersion() == prev->SinceVersion()) continue;
    if (next->Deprecated()) {
      *why = Step(op, prev->SinceVersion(), next->SinceVersion()) + "the op is deprecated";
      return false;
    }
    const std::string d = Difference(*prev, *next);
    if (!d.empty()) {
      *why = Step(op, prev->SinceVersion(), next->SinceVersion()) + d;
      return false;
    }
    prev = next;
  }
  return true;
}

}  // namespace whittle
