// Helpers shared by the test suites: deterministic random tensors, closeness checks, and
// running a single node on every built backend against the reference.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/tensor.h"
#include "runtime/node_runner.h"
#include "whittle/session.h"

namespace whittle::testing {

// Uniform floats in [lo, hi) from a fixed seed.
Tensor RandomFloat(const Dims& dims, uint32_t seed, float lo = -1.f, float hi = 1.f);
// The fine-tuning tests' fixture: every op registered, the bundled MLP, and the first n_train
// Fashion-MNIST training and n_eval test samples (a load that fails is a test failure).
void LoadMlpAndData(int64_t n_train, int64_t n_eval, std::optional<Graph>* mlp, std::optional<Dataset>* train,
                    std::optional<Dataset>* eval);
// Uniform integers in [lo, hi].
Tensor RandomInt64(const Dims& dims, uint32_t seed, int64_t lo, int64_t hi);
Tensor RandomInt8(const Dims& dims, uint32_t seed);
Tensor RandomUInt8(const Dims& dims, uint32_t seed);
// Random sign bits of n rows of k binary weights (uint64 [n, ceil(k / 64)], padding bits zero:
// lib/ir/binary_format.h's layout).
Tensor RandomSignBits(int64_t n, int64_t k, uint32_t seed);

// Max |a-b| over elements (float32); dims must match.
float MaxAbsDiff(const Tensor& a, const Tensor& b);
// Mean squared difference of the first outputs of graphs a and b run on input `x` (fed as `input`).
double OutputMse(const Graph& a, const Graph& b, const std::string& input, const Tensor& x);
// How many nodes of g have this op type.
int CountOps(const Graph& g, const std::string& op_type);
// The runtime-rewrite check: g run unoptimized on the reference kernels gives the expected
// outputs; g optimized on the reference kernels, on the CPU ones and on the CPU ones without the
// blocked layout must match them (float32 outputs, within 1e-4 + 1e-4*|expected|).
void ExpectOptimizedMatchesUnoptimized(const Graph& g, const std::map<std::string, Tensor>& inputs);
// gtest assertion: same dtype and dims; float types within atol + rtol*|b|; others bitwise.
::testing::AssertionResult TensorsClose(const Tensor& a, const Tensor& b, float atol = 1e-5f, float rtol = 1e-5f);

// Builds a node with op_type, the given attributes and n inputs/outputs (value ids are
// placeholders: RunNode only looks at which are present).
Node MakeNode(const std::string& op_type, int num_inputs, int num_outputs, AttributeMap attrs = {},
              const std::string& domain = "");

// The built backends whose device this machine has (BuiltBackends() less CUDA without a GPU,
// said once on stdout): what kernel tests loop over.
const std::vector<Backend>& TestedBackends();

// The one cross-backend check: runs node on the reference backend and on every other built
// backend (TestedBackends(): the CPU one, CUDA when built and a GPU is present) and expects close outputs; returns the
// reference outputs. opset defaults to 17; inputs_const hands the inputs to the kernel factories
// as constants (the prepacking path).
std::vector<Tensor> ExpectBackendsMatchReference(const Node& node, const std::vector<Tensor>& inputs,
                                                 float atol = 1e-5f, float rtol = 1e-5f, int opset = 17,
                                                 int threads = 2, bool inputs_const = false);

// A model of one ai.whittle op on x [batch, in_features] followed by the given constant inputs in
// order (undefined tensors at the end are absent optional inputs), loaded on backend: how the
// kernel tests feed a compressed op hostile tensors and see what its load says.
StatusOr<std::unique_ptr<Session>> LoadWhittleOp(const std::string& op_type, int64_t in_features,
                                                 const std::vector<Tensor>& consts, AttributeMap attrs, Backend backend);

// g on a fresh session (backend, threads) fed x as its first input.
StatusOr<std::vector<Tensor>> RunGraph(const Graph& g, const Tensor& x, Backend backend = Backend::kCpu,
                                       int threads = 1);

// original with the weight of each named node replaced by a dense W [N, K] (row n: output
// feature n) stored in that node's layout — MatMul [K, N], Gemm with transB [N, K], Conv
// [N, K / (kh kw), kh, kw] — what a compressed layer must compute, to compare its model against.
Graph WithDenseWeights(const Graph& original, const std::map<std::string, std::vector<float>>& w_nk);

// How many float initializers of the model at b differ from a's, expecting the same op list and
// every float initializer of a present in b with the same dims (a retrained model: new values,
// same graph); -1 when a file does not load.
int CountRetrainedWeights(const std::string& a, const std::string& b);

}  // namespace whittle::testing
