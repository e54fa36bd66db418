#include "runtime/rewrite/fold_constants.h"

#include <optional>
#include <set>
#include <vector>

#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "runtime/rewrite/match.h"

namespace whittle {

Status FoldConstants(Graph& g, int* count) {
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::set<int> dead;
  for (int ni : order) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    if (!n.domain.empty()) continue;
    // Random ops draw anew on every run unless seeded: folding would freeze one draw.
    if ((n.op_type == "Dropout" || n.op_type.rfind("Random", 0) == 0 || n.op_type == "Multinomial" ||
         n.op_type == "Bernoulli") &&
        !n.attrs.Has("seed"))
      continue;
    std::vector<Tensor> inputs;
    bool all_const = true;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] < 0) {
        inputs.emplace_back();
        continue;
      }
      const Tensor* t = rewrite::ConstInput(g, n, i);
      if (!t) {
        all_const = false;
        break;
      }
      inputs.push_back(*t);
    }
    // Shape of a statically known shape is a constant too.
    if (!all_const && n.op_type == "Shape" && !n.inputs.empty() && n.inputs[0] >= 0) {
      const Value& in = g.value(n.inputs[0]);
      std::optional<Dims> d = in.shape ? ToDims(*in.shape) : std::nullopt;
      if (d && in.dtype != DType::kUndefined && DTypeSize(in.dtype) > 0 && NumElements(*d) <= (1 << 20)) {
        inputs = {Tensor(in.dtype, *d)};
        all_const = true;
      }
    }
    if (!all_const) continue;
    auto out = RunNode(n, static_cast<int>(g.OpsetFor(n.domain)), inputs, Backend::kReference, 1, true);
    if (!out.ok()) return out.status();
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      int o = n.outputs[i];
      if (o < 0) continue;
      Value& v = g.value(o);
      v.initializer = (*out)[i].Clone();  // no aliasing of another constant's buffer
      v.dtype = v.initializer->dtype();
      v.shape = ToSymShape(v.initializer->dims());
    }
    dead.insert(ni);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

}  // namespace whittle
