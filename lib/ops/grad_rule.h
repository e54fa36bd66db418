// Gradient rules, registered per op family beside the ops' definitions (lib/ops/<family>_grad.cc)
// into one registry keyed by (domain, op type); the training engine's autodiff
// (runtime/training/autodiff.cc) applies them node by node in reverse topological order. A rule
// sees the forward node, the gradient of each of its outputs (-1 where nothing downstream needs
// one) and which inputs need gradients, and returns the gradient value of each such input, built
// with the Emitter from standard ONNX ops where they exist, ai.whittle grad ops (lib/ops/grad.cc)
// where not. A new op's rule is one function and one Register line in its family's file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "lib/ops/emitter.h"

namespace whittle {

// Where each input of a node gets its gradient: (input slot, gradient value).
using InputGrads = std::vector<std::pair<size_t, int>>;

// What the rules need to know beyond the node.
struct GradContext {
  std::set<std::string> bn_training;  // BatchNormalization nodes fed the batch statistics
};

// Whether input `slot` of the node needs a gradient.
using Need = std::function<bool(size_t)>;

// One rule's arguments.
struct GradArgs {
  Emitter& e;
  const Graph& g;
  const Node& n;
  const std::vector<int>& dys;  // each output's gradient, -1 where none reaches it
  int dy;                       // output 0's (>= 0 except in a rule that reads every output)
  const Need& need;
  const GradContext& ctx;
  // Input i's value, -1 when absent.
  int in(size_t i) const { return i < n.inputs.size() ? n.inputs[i] : -1; }
};

// The node's input gradients; Unimplemented (naming the node) for a refused case.
using GradRule = StatusOr<InputGrads> (*)(const GradArgs& a);

class GradRegistry {
 public:
  struct Entry {
    GradRule rule = nullptr;
    bool every_output = false;  // reads dys itself; else only output 0 may carry a gradient
  };
  static GradRegistry& Global();
  // domain: "" for ai.onnx; one rule per op.
  void Register(const std::string& domain, const std::string& op_type, GradRule rule, bool every_output = false);
  const Entry* Find(const std::string& domain, const std::string& op_type) const;
  // The op types of a domain that have a rule, sorted.
  std::vector<std::string> OpTypes(const std::string& domain) const;

 private:
  std::map<std::pair<std::string, std::string>, Entry> rules_;
};

// Registers every family's rules (idempotent, thread-safe; lib/ops/register_all.cc lists them).
void RegisterAllGrads();

// The node's input gradients given its outputs' (dys): the node's rule, or Unimplemented naming
// the node where no rule exists. An op outside ai.onnx has a rule only for its one output; an
// ai.onnx op's rule runs when output 0 has a gradient and no other output has one (unless the
// rule reads every output).
StatusOr<InputGrads> GradOf(Emitter& e, const Graph& g, const Node& n, const std::vector<int>& dys, const Need& need,
                            const GradContext& ctx);

// Helpers the families share.

// dy (shape *so) summed down to the shape *st under numpy broadcasting: leading extra dims are
// summed away, dims where *st has 1 and *so does not are summed with keepdims.
int SumToShapeOf(Emitter& e, int dy, const SymShape* so, const SymShape* st);
// dy (the gradient of value out) summed down to the shape of value target.
StatusOr<int> SumToShape(Emitter& e, const Graph& g, int dy, int out, int target);
// A negative axis counted from the back of a rank.
inline int64_t NormAxis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }
// A constant int64 (or int32) input as values; nullopt when absent or not a constant.
std::optional<std::vector<int64_t>> ConstInts(const Graph& g, const Node& n, size_t slot);

}  // namespace whittle
