#include "tests/util/node_case.h"

#include <algorithm>
#include <filesystem>

#include "lib/onnx/model_io.h"

namespace whittle::testing {

StatusOr<NodeCase> LoadNodeCase(const std::string& dir) {
  NodeCase c;
  WH_ASSIGN_OR_RETURN(c.graph, LoadModel(dir + "/model.onnx"));
  if (c.graph.nodes().size() != 1) return InvalidArgument(dir + ": not a single-node case");
  c.node = c.graph.nodes()[0];
  const auto& gi = c.graph.inputs();
  for (int v : c.node.inputs) {
    const auto pos = std::find(gi.begin(), gi.end(), v);
    if (v < 0 || pos == gi.end() || c.graph.value(v).initializer) {
      c.inputs.push_back(v >= 0 && c.graph.value(v).initializer ? *c.graph.value(v).initializer : Tensor());
      continue;
    }
    WH_ASSIGN_OR_RETURN(Tensor t, LoadTensorProtoFile(dir + "/test_data_set_0/input_" +
                                                      std::to_string(pos - gi.begin()) + ".pb"));
    c.inputs.push_back(std::move(t));
  }
  for (size_t k = 0; k < c.graph.outputs().size(); ++k) {
    WH_ASSIGN_OR_RETURN(Tensor t, LoadTensorProtoFile(dir + "/test_data_set_0/output_" + std::to_string(k) + ".pb"));
    c.outputs.push_back(std::move(t));
  }
  return c;
}

}  // namespace whittle::testing
