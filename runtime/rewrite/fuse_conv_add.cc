#include "runtime/rewrite/fuse_conv_add.h"

#include <set>

#include "runtime/rewrite/match.h"

namespace whittle {

Status FuseConvAdd(Graph& g, int* count) {
  std::set<int> dead;
  for (size_t ci = 0; ci < g.nodes().size(); ++ci) {
    Node& conv = g.nodes()[ci];
    if (!rewrite::IsOp(conv, "Conv") || conv.attrs.Has("_activation") || conv.inputs.size() > 3 ||
        conv.outputs.size() != 1)
      continue;
    const int y = conv.outputs[0];
    if (y < 0 || g.value(y).dtype != DType::kFloat32 || !g.value(y).shape) continue;
    int r = -1;
    const int ai = rewrite::SoleAddOf(g, y, &r);
    if (ai < 0 || dead.count(ai)) continue;
    const Node& add = g.nodes()[static_cast<size_t>(ai)];
    const Value& rv = g.value(r);
    // Same dtype and the same shape, dim by dim (a symbolic batch matches the same symbol): no
    // broadcasting inside the Conv.
    if (rv.dtype != DType::kFloat32 || !rv.shape || *rv.shape != *g.value(y).shape) continue;
    bool known = true;
    for (const Dim& d : *rv.shape) known &= d.known() || !d.param.empty();
    if (!known) continue;
    conv.inputs.resize(3, -1);
    conv.inputs.push_back(r);
    conv.outputs[0] = add.outputs[0];
    dead.insert(ai);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

}  // namespace whittle
