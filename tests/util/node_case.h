// One single-node case of the ONNX backend suite (libonnx-testdata: model.onnx and
// test_data_set_0/{input,output}_N.pb), read for tests that feed a kernel's parts directly.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::testing {

// Where the suite's node cases are installed (Debian's libonnx-testdata).
inline const char* kOnnxNodeCases = "/usr/share/libonnx-testdata/data/node";

struct NodeCase {
  Graph graph;
  Node node;                    // the graph's only node
  std::vector<Tensor> inputs;   // per node input: its data-set tensor or initializer; undefined when absent
  std::vector<Tensor> outputs;  // the expected outputs, in the graph's order
};

StatusOr<NodeCase> LoadNodeCase(const std::string& dir);

// The dtypes (kUndefined for an undefined tensor) and pointers (null likewise) a KernelInit and
// RecurrentDims::Resolve take for inputs.
inline void InputViews(const std::vector<Tensor>& inputs, std::vector<DType>* dtypes,
                       std::vector<const Tensor*>* ptrs) {
  dtypes->clear();
  ptrs->clear();
  for (const Tensor& t : inputs) {
    dtypes->push_back(t.defined() ? t.dtype() : DType::kUndefined);
    ptrs->push_back(t.defined() ? &t : nullptr);
  }
}

}  // namespace whittle::testing
