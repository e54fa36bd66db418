#include "runtime/rewrite/fuse_qconv_pool.h"

#include <set>
#include <string>
#include <vector>

#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

bool AllEqual(const std::vector<int64_t>& v, int64_t x) {
  for (int64_t e : v)
    if (e != x) return false;
  return true;
}

// The MaxPool's window when it is one QConv can fuse (window = stride, no padding, dilation 1,
// floor mode, one output), else empty.
std::vector<int64_t> FusableWindow(const Node& pool, size_t spatial) {
  if (!rewrite::IsOp(pool, "MaxPool") || pool.inputs.size() != 1) return {};
  if (pool.outputs.size() > 1 && pool.outputs[1] >= 0) return {};  // Indices
  const AttributeMap& a = pool.attrs;
  const std::vector<int64_t> window = a.GetInts("kernel_shape");
  if (window.size() != spatial || a.GetInts("strides") != window) return {};
  const std::string auto_pad = a.GetString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return {};
  if (!AllEqual(a.GetInts("pads"), 0) || !AllEqual(a.GetInts("dilations"), 1) || a.GetInt("ceil_mode", 0) != 0)
    return {};
  return window;
}

}  // namespace

Status FuseQConvMaxPool(Graph& g, int* count) {
  std::set<int> dead;
  for (Node& conv : g.nodes()) {
    if (conv.domain != kWhittleDomain || conv.op_type != "QConv" || conv.attrs.Has("_max_pool")) continue;
    if (conv.attrs.GetInt("group", 1) != 1 || conv.outputs.size() != 1) continue;
    const int y = conv.outputs[0];
    const Value& yv = g.value(y);
    if (yv.dtype != DType::kUInt8 && yv.dtype != DType::kInt8) continue;
    if (!yv.shape || (yv.shape->size() != 3 && yv.shape->size() != 4)) continue;
    const int pi = rewrite::SoleConsumer(g, y);
    if (pi < 0 || dead.count(pi)) continue;
    const Node& pool = g.nodes()[static_cast<size_t>(pi)];
    const std::vector<int64_t> window = FusableWindow(pool, yv.shape->size() - 2);
    if (window.empty() || pool.inputs[0] != y) continue;
    // Known spatial dims must hold at least one window (else the pool would be empty).
    bool fits = true;
    for (size_t i = 0; i < window.size(); ++i) {
      const Dim& d = (*yv.shape)[i + 2];
      fits = fits && (!d.known() || d.value >= window[i]);
    }
    if (!fits) continue;
    conv.attrs.Set("_max_pool", Attribute::Ints(window));
    conv.outputs[0] = pool.outputs[0];
    dead.insert(pi);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

}  // namespace whittle
