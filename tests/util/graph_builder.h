// A small builder for test graphs: name values, add inputs, initializers and nodes by name.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 17) { g_.opset_imports[""] = opset; }
  GraphBuilder& Input(const std::string& name, DType dt, SymShape shape);
  GraphBuilder& Init(const std::string& name, Tensor t);
  // Output names that do not exist yet are created; "" input means absent.
  GraphBuilder& Op(const std::string& op_type, const std::vector<std::string>& inputs,
                   const std::vector<std::string>& outputs, AttributeMap attrs = {});
  GraphBuilder& Output(const std::string& name);
  Graph Build() { return g_; }

 private:
  int Ensure(const std::string& name);
  Graph g_;
  int counter_ = 0;
};

}  // namespace whittle::testing
