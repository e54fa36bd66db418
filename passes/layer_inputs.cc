#include "passes/layer_inputs.h"

#include <algorithm>
#include <random>

#include "passes/layer_inputs_eigen.h"
#include "runtime/evaluate.h"
#include "whittle/session.h"

namespace whittle {
bool LayerInputSupported(const Graph& g, int node, std::string* why) {
  const Node& n = g.nodes()[static_cast<size_t>(node)];
  const Tensor* w = g.ConstInput(n, 1, DType::kFloat32);
  why->clear();
  if (!w) *why = "its weight is not a constant float32 initializer";
  else if (n.op_type == "Conv") {
    const std::string pad = n.attrs.GetString("auto_pad", "NOTSET");
    if (w->rank() != 4) *why = "only 2-D convolutions are supported";
    else if (n.attrs.GetInt("group", 1) != 1) *why = "grouped convolutions are not supported";
    else if (pad != "NOTSET" && pad != "VALID") *why = "auto_pad " + pad + " is not supported";
  } else if (n.op_type == "Gemm") {
    if (n.attrs.GetInt("transA", 0) != 0) *why = "Gemm with transA=1 is not supported";
    else if (w->rank() != 2) *why = "its weight is not 2-D";
  } else if (n.op_type == "MatMul") {
    if (w->rank() != 2) *why = "its weight is not 2-D";
  } else {
    *why = n.op_type + " layers are not supported";
  }
  return why->empty();
}

int64_t FeaturesPerPosition(const Graph& g, const Node& n) {
  if (n.op_type != "Conv") return 1;
  const Tensor& w = *g.ConstInput(n, 1, DType::kFloat32);
  return w.dim(2) * w.dim(3);
}

StatusOr<std::map<int, InputGram>> CollectInputGrams(const Graph& g, const std::vector<int>& consumers,
                                                     const Dataset& data, const PassContext& ctx,
                                                     const std::string& stage, int64_t positions_per_image) {
  std::map<int, InputGram> grams;
  if (consumers.empty()) return grams;
  if (data.size() == 0) return InvalidArgument("calibration data '" + data.description + "' is empty");
  Graph probe = g;
  probe.outputs().clear();
  std::map<int, size_t> slot;  // consumer input value -> probe output index
  for (int ni : consumers) {
    const int v = g.nodes()[static_cast<size_t>(ni)].inputs[0];
    if (!slot.count(v)) {
      slot[v] = probe.outputs().size();
      probe.outputs().push_back(v);
    }
  }
  SessionOptions so;
  so.num_threads = ctx.num_threads;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(std::move(probe), so));
  std::map<int, RowMat> acc;
  std::mt19937_64 rng(ctx.seed);
  // Every consumer's input of a batch is held at once (and its feature rows, per consumer): a
  // decoder's are samples x tokens x width x layers. The first run takes one sample, and the batch
  // then holds about kBatchBytes of inputs.
  constexpr int64_t kBatchBytes = int64_t{256} << 20;
  const int64_t n = data.size();
  int64_t batch = 1;
  for (int64_t b = 0, e = 0; b < n; b = e) {
    e = std::min(n, b + batch);
    ctx.Progress(stage, b, n);
    WH_ASSIGN_OR_RETURN(auto feeds, BatchFeeds(data, session->inputs(), b, e));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session->Run(feeds));
    if (b == 0) {
      int64_t bytes = 0;
      for (const Tensor& x : outs) bytes += static_cast<int64_t>(x.nbytes());
      batch = std::max<int64_t>(1, std::min<int64_t>(128, kBatchBytes / std::max<int64_t>(1, bytes)));
    }
    for (int ni : consumers) {
      const Node& node = g.nodes()[static_cast<size_t>(ni)];
      const Tensor& x = outs[slot.at(node.inputs[0])];
      if (x.dtype() != DType::kFloat32) return Internal("reconstruction input of " + node.DebugName() + " is not float32");
      std::vector<int64_t> chosen;
      auto pick = [&](int64_t count) { return std::uniform_int_distribution<int64_t>(0, count - 1)(rng); };
      if (node.op_type == "Conv" && x.rank() != 4) return Internal(node.DebugName() + ": input is not 4-D");
      const RowMat rows = FeatureRows(node, *g.value(node.inputs[1]).initializer, x, positions_per_image, pick, &chosen);
      RowMat& gm = acc[ni];
      if (gm.size() == 0) gm = RowMat::Zero(rows.cols(), rows.cols());
      gm.noalias() += rows.transpose() * rows;
      grams[ni].rows += rows.rows();
    }
  }
  ctx.Progress(stage, n, n);
  for (int ni : consumers) {
    InputGram& cg = grams[ni];
    const RowMat& gm = acc[ni];
    cg.node = ni;
    cg.features = gm.rows() - 1;
    cg.kernel = FeaturesPerPosition(g, g.nodes()[static_cast<size_t>(ni)]);
    cg.gram.assign(gm.data(), gm.data() + gm.size());
  }
  return grams;
}

}  // namespace whittle
