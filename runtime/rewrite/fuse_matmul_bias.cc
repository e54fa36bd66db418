#include "runtime/rewrite/fuse_matmul_bias.h"

#include <set>

#include "runtime/rewrite/match.h"

namespace whittle {

Status FuseMatMulBias(Graph& g, int* count) {
  std::set<int> dead;
  for (size_t mi = 0; mi < g.nodes().size(); ++mi) {
    Node& mm = g.nodes()[mi];
    if (!rewrite::IsOp(mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1 || mm.attrs.Has("_activation"))
      continue;
    const Tensor* w = rewrite::ConstInput(g, mm, 1);
    const int y = mm.outputs[0];
    if (!w || w->dtype() != DType::kFloat32 || w->rank() != 2 || y < 0) continue;
    const Value& yv = g.value(y);
    if (yv.dtype != DType::kFloat32 || !yv.shape || yv.shape->size() < 2) continue;
    int bi = -1;
    const int ai = rewrite::SoleAddOf(g, y, &bi);
    if (ai < 0 || dead.count(ai)) continue;
    const Node& add = g.nodes()[static_cast<size_t>(ai)];
    const Tensor* b = rewrite::ConstValue(g, bi);
    const int64_t n = w->dim(1);
    if (!b || b->dtype() != DType::kFloat32 || b->numel() != n || b->rank() < 1 ||
        b->rank() > static_cast<int64_t>(yv.shape->size()) || b->dim(b->rank() - 1) != n)
      continue;
    mm.inputs.push_back(bi);
    mm.outputs[0] = add.outputs[0];
    dead.insert(ai);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

}  // namespace whittle
