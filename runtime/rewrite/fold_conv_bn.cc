#include "runtime/rewrite/fold_conv_bn.h"

#include <set>
#include <vector>

#include "runtime/rewrite/match.h"

namespace whittle {

Status FoldConvBatchNorm(Graph& g, int* count) {
  struct Match {
    int conv, bn;
  };
  std::vector<Match> matches;
  for (size_t bi = 0; bi < g.nodes().size(); ++bi) {
    const Node& bn = g.nodes()[bi];
    if (bn.op_type != "BatchNormalization" || !bn.domain.empty() || bn.inputs.size() < 5) continue;
    if (bn.attrs.GetInt("training_mode", 0) != 0) continue;
    bool extra_outputs = false;
    for (size_t i = 1; i < bn.outputs.size(); ++i) extra_outputs |= bn.outputs[i] >= 0;
    if (extra_outputs) continue;
    int x = bn.inputs[0];
    if (x < 0) continue;
    int ci = g.value(x).producer;
    if (ci < 0) continue;
    const Node& conv = g.nodes()[static_cast<size_t>(ci)];
    if (!rewrite::FoldableConv(g, conv) || rewrite::SoleConsumer(g, x) != static_cast<int>(bi)) continue;
    if (!rewrite::BatchNormConstants(g, bn, rewrite::ConstInput(g, conv, 1)->dim(0))) continue;
    matches.push_back({ci, static_cast<int>(bi)});
  }
  std::set<int> dead;
  for (const Match& m : matches) {
    Node& conv = g.nodes()[static_cast<size_t>(m.conv)];
    const Node& bn = g.nodes()[static_cast<size_t>(m.bn)];
    const Tensor& w = *rewrite::ConstInput(g, conv, 1);
    const int64_t oc = w.dim(0), per = w.numel() / oc;
    const rewrite::BatchNormConsts k = *rewrite::BatchNormConstants(g, bn, oc);
    Tensor nw = w.Clone();
    Tensor nb(DType::kFloat32, {oc});
    const Tensor* b = rewrite::ConstInput(g, conv, 2);
    for (int64_t c = 0; c < oc; ++c) {
      const float s = k.Multiplier(c);
      float* wp = nw.data<float>() + c * per;
      for (int64_t k = 0; k < per; ++k) wp[k] *= s;
      const float b0 = b ? b->data<float>()[c] : 0.f;
      nb.data<float>()[c] = (b0 - k.mean[c]) * s + k.beta[c];
    }
    int wid = g.AddInitializer(g.UniqueName(g.value(conv.inputs[1]).name + "_bnfold"), std::move(nw));
    int bid = g.AddInitializer(g.UniqueName(conv.name + "_bias_bnfold"), std::move(nb));
    conv.inputs.resize(3, -1);
    conv.inputs[1] = wid;
    conv.inputs[2] = bid;
    conv.outputs[0] = bn.outputs[0];
    dead.insert(m.bn);
  }
  g.RemoveNodes(dead);
  *count += static_cast<int>(dead.size());
  return Status::Ok();
}

}  // namespace whittle
