#include "runtime/rewrite/fold_constants.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "lib/ir/memory_meter.h"
#include "lib/ops/op_def.h"
#include "runtime/node_runner.h"
#include "runtime/rewrite/match.h"

namespace whittle {

namespace {

// The output of a Shape node over value id's producer as far as static inference knows it: the
// dims (after Shape's start/end), -1 where a dim is symbolic; nullopt when id is not a Shape's
// output or the rank is unknown.
std::optional<Tensor> PartialShape(const Graph& g, int id) {
  const Node* p = rewrite::Producer(g, id);
  if (!p || !rewrite::IsOp(*p, "Shape") || p->inputs.empty() || p->inputs[0] < 0) return std::nullopt;
  const std::optional<SymShape>& shape = g.value(p->inputs[0]).shape;
  if (!shape) return std::nullopt;
  const int64_t rank = static_cast<int64_t>(shape->size());
  auto clamp = [rank](int64_t a) { return std::min(std::max(a < 0 ? a + rank : a, int64_t{0}), rank); };
  const int64_t start = clamp(p->attrs.GetInt("start", 0)), end = clamp(p->attrs.GetInt("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) {
    const Dim& d = (*shape)[static_cast<size_t>(i)];
    dims.push_back(d.known() ? d.value : -1);
  }
  return Tensor::FromVector<int64_t>({static_cast<int64_t>(dims.size())}, dims);
}

}  // namespace

// Folding must not make a constant much larger than what it is made from: ConstantOfShape, Expand,
// Tile or Range of a few bytes can ask for gigabytes (issue 41: a hostile [2^31, 4] fill), and a
// folded constant is allocated at load, outside the session's memory budget. A node is folded
// when its outputs' inferred size is at most 16 MiB or 4 times its inputs' (a transposed or
// reshaped weight still folds); else it runs, where the budget meter can refuse it.
static bool FoldKeepsSize(const Graph& g, const Node& n, const std::vector<Tensor>& inputs) {
  constexpr uint64_t kAlwaysFold = uint64_t{16} << 20;
  uint64_t in_bytes = 0, out_bytes = 0;
  for (const Tensor& t : inputs)
    if (t.defined()) in_bytes += t.nbytes();
  for (int o : n.outputs) {
    if (o < 0) continue;
    const Value& v = g.value(o);
    std::optional<Dims> d = v.shape ? ToDims(*v.shape) : std::nullopt;
    if (!d || DTypeSize(v.dtype) == 0) continue;  // unknown: the kernel's own checks apply
    auto bytes = CheckedNumBytes(*d, v.dtype);
    if (!bytes.ok()) return false;
    out_bytes += *bytes;
  }
  return out_bytes <= kAlwaysFold || out_bytes / 4 <= in_bytes;
}

Status FoldConstants(Graph& g, int* count) {
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::set<int> dead;
  for (int ni : order) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    if (!n.domain.empty()) continue;
    if (n.implicit_inputs > 0 || !n.attrs.Subgraphs().empty()) continue;  // control flow: run time's
    // A sequence or an optional is no initializer (SequenceEmpty has no inputs to wait for).
    if (std::any_of(n.outputs.begin(), n.outputs.end(),
                    [&](int o) { return o >= 0 && g.value(o).kind != ValueKind::kTensor; }))
      continue;
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
    // Gather / Slice of constant positions from a Shape whose selected dims are static (TorchScript's
    // x.size(1), x.shape[2:]) is a constant too, even when other dims (the batch) are symbolic: run
    // it on the shape with -1 for the unknown dims and fold it if none was selected.
    bool partial = false;
    if (!all_const && (n.op_type == "Gather" || n.op_type == "Slice") && !n.inputs.empty()) {
      std::optional<Tensor> shape = PartialShape(g, n.inputs[0]);
      bool rest_const = shape.has_value();
      inputs = {shape ? *shape : Tensor()};
      for (size_t i = 1; rest_const && i < n.inputs.size(); ++i) {
        const Tensor* t = rewrite::ConstInput(g, n, i);
        rest_const = n.inputs[i] < 0 || t;
        inputs.push_back(t ? *t : Tensor());
      }
      all_const = partial = rest_const;
    }
    if (!all_const) continue;
    if (!FoldKeepsSize(g, n, inputs)) continue;  // left to run time and its memory budget
    auto out = RunNode(n, static_cast<int>(g.OpsetFor(n.domain)), inputs, Backend::kReference, 1, true);
    if (!out.ok()) {
      if (partial) continue;  // left to run time, which reports a bad index with the real shape
      return out.status();
    }
    if (partial) {
      const Tensor& t = (*out)[0];
      const int64_t* v = t.data<int64_t>();
      if (std::any_of(v, v + t.numel(), [](int64_t d) { return d < 0; })) continue;  // a symbolic dim
    }
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
