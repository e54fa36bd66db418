#include "tests/util/graph_builder.h"

namespace whittle::testing {

GraphBuilder& GraphBuilder::Input(const std::string& name, DType dt, SymShape shape) {
  g_.inputs().push_back(g_.AddValue(name, dt, std::move(shape)));
  return *this;
}

GraphBuilder& GraphBuilder::Init(const std::string& name, Tensor t) {
  g_.AddInitializer(name, std::move(t));
  return *this;
}

int GraphBuilder::Ensure(const std::string& name) {
  int id = g_.FindValue(name);
  return id >= 0 ? id : g_.AddValue(name);
}

GraphBuilder& GraphBuilder::Op(const std::string& op_type, const std::vector<std::string>& inputs,
                               const std::vector<std::string>& outputs, AttributeMap attrs) {
  Node n;
  n.op_type = op_type;
  n.name = op_type + "_" + std::to_string(counter_++);
  n.attrs = std::move(attrs);
  for (const auto& i : inputs) n.inputs.push_back(i.empty() ? -1 : Ensure(i));
  for (const auto& o : outputs) n.outputs.push_back(o.empty() ? -1 : Ensure(o));
  g_.AddNode(std::move(n));
  return *this;
}

GraphBuilder& GraphBuilder::Output(const std::string& name) {
  g_.outputs().push_back(Ensure(name));
  return *this;
}

}  // namespace whittle::testing
