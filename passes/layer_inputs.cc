#include "passes/layer_inputs.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <random>
#include <set>

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

namespace {

// Bytes of the Gram matrix a node's features make, (features + 1)^2 doubles; 0 if unknown.
int64_t GramBytes(const Graph& g, const Node& n) {
  const Tensor* w = g.ConstInput(n, 1, DType::kFloat32);
  if (!w) return 0;
  int64_t f = 0;
  if (n.op_type == "Conv" && w->rank() == 4) f = w->dim(1) * w->dim(2) * w->dim(3);
  else if (n.op_type == "Gemm" && w->rank() == 2) f = n.attrs.GetInt("transB", 0) ? w->dim(1) : w->dim(0);
  else if (w->rank() == 2) f = w->dim(0);
  return (f + 1) * (f + 1) * static_cast<int64_t>(sizeof(double));
}

// Gemm/MatMul consumers of one value see the same feature rows: they share one matrix. A Conv's
// rows depend on its kernel (and sampled positions): its own.
int64_t ShareKey(const Graph& g, int ni) {
  const Node& n = g.nodes()[static_cast<size_t>(ni)];
  return n.op_type == "Conv" ? -1 - int64_t{ni} : int64_t{n.inputs[0]};
}

// One pass over the data for `consumers` of base (all sharing-aware).
StatusOr<std::map<int, InputGram>> GramsOnePass(const Graph& base, const std::vector<int>& consumers,
                                                const Dataset& data, const PassContext& ctx, const std::string& stage,
                                                int64_t positions_per_image, std::mt19937_64* rng) {
  std::map<int, InputGram> grams;
  Graph probe = base;
  probe.outputs().clear();
  std::map<int, size_t> slot;  // consumer input value -> probe output index
  for (int ni : consumers) {
    const int v = base.nodes()[static_cast<size_t>(ni)].inputs[0];
    if (!slot.count(v)) {
      slot[v] = probe.outputs().size();
      probe.outputs().push_back(v);
    }
  }
  SessionOptions so;
  so.num_threads = ctx.num_threads;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(std::move(probe), so));
  std::map<int64_t, std::shared_ptr<std::vector<double>>> acc;  // by ShareKey
  std::map<int64_t, int64_t> rows_of, features_of;
  // Every consumer's input of a batch is held at once (and its feature rows, per shared matrix): a
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
      batch = DataBatch(data, std::max<int64_t>(1, std::min<int64_t>(128, kBatchBytes / std::max<int64_t>(1, bytes))),
                        &session->inputs());
    }
    std::set<int64_t> done;
    for (int ni : consumers) {
      const int64_t key = ShareKey(base, ni);
      if (!done.insert(key).second) continue;
      const Node& node = base.nodes()[static_cast<size_t>(ni)];
      const Tensor& x = outs[slot.at(node.inputs[0])];
      if (x.dtype() != DType::kFloat32) return Internal("reconstruction input of " + node.DebugName() + " is not float32");
      std::vector<int64_t> chosen;
      auto pick = [&](int64_t count) { return std::uniform_int_distribution<int64_t>(0, count - 1)(*rng); };
      if (node.op_type == "Conv" && x.rank() != 4) return Internal(node.DebugName() + ": input is not 4-D");
      const RowMat rows = FeatureRows(node, *base.value(node.inputs[1]).initializer, x, positions_per_image, pick, &chosen);
      auto& gm = acc[key];
      if (!gm) gm = std::make_shared<std::vector<double>>(static_cast<size_t>(rows.cols() * rows.cols()), 0.0);
      Eigen::Map<RowMat>(gm->data(), rows.cols(), rows.cols()).noalias() += rows.transpose() * rows;
      rows_of[key] += rows.rows();
      features_of[key] = rows.cols() - 1;
    }
  }
  ctx.Progress(stage, n, n);
  for (int ni : consumers) {
    const int64_t key = ShareKey(base, ni);
    InputGram& cg = grams[ni];
    const auto& gm = acc.at(key);
    cg.node = ni;
    cg.features = features_of.at(key);
    cg.kernel = FeaturesPerPosition(base, base.nodes()[static_cast<size_t>(ni)]);
    cg.shared = gm;
    cg.rows = rows_of.at(key);
  }
  return grams;
}

}  // namespace

int64_t GramBudgetBytes(const Graph& g, const PassContext& ctx) {
  if (ctx.statistics_budget_bytes > 0) return ctx.statistics_budget_bytes;
  int64_t weights = 0;
  for (const Value& v : g.values())
    if (v.initializer) weights += static_cast<int64_t>(v.initializer->nbytes());
  return std::max<int64_t>(int64_t{512} << 20, weights / 4);
}

Status ForEachInputGrams(const Graph& g, const std::vector<int>& consumers, const Dataset& data,
                         const PassContext& ctx, const std::string& stage, int64_t budget_bytes,
                         const std::function<Status(std::map<int, InputGram>&)>& fn, int64_t positions_per_image) {
  if (consumers.empty()) return Status::Ok();
  if (data.size() == 0) return InvalidArgument("calibration data '" + data.description + "' is empty");
  // Groups of consumers whose distinct matrices fit the budget, in the order given.
  std::vector<std::vector<int>> groups(1);
  std::set<int64_t> keys;
  int64_t bytes = 0;
  for (int ni : consumers) {
    const int64_t key = ShareKey(g, ni);
    if (!keys.count(key)) {  // a layer sharing a matrix already in the group stays with it
      const int64_t more = GramBytes(g, g.nodes()[static_cast<size_t>(ni)]);
      if (!groups.back().empty() && bytes + more > budget_bytes) {
        groups.emplace_back();
        keys.clear();
        bytes = 0;
      }
      keys.insert(key);
      bytes += more;
    }
    groups.back().push_back(ni);
  }
  // Every group's data runs through the graph as it was before fn changed anything.
  const Graph base = g;
  std::mt19937_64 rng(ctx.seed);
  for (size_t k = 0; k < groups.size(); ++k) {
    const std::string st = groups.size() == 1 ? stage
                                              : stage + " (layers group " + std::to_string(k + 1) + " of " +
                                                    std::to_string(groups.size()) + ")";
    WH_ASSIGN_OR_RETURN(auto grams, GramsOnePass(base, groups[k], data, ctx, st, positions_per_image, &rng));
    WH_RETURN_IF_ERROR(fn(grams));
  }
  return Status::Ok();
}

StatusOr<std::map<int, InputGram>> CollectInputGrams(const Graph& g, const std::vector<int>& consumers,
                                                     const Dataset& data, const PassContext& ctx,
                                                     const std::string& stage, int64_t positions_per_image) {
  std::map<int, InputGram> all;
  WH_RETURN_IF_ERROR(ForEachInputGrams(
      g, consumers, data, ctx, stage, std::numeric_limits<int64_t>::max(),
      [&](std::map<int, InputGram>& grams) {
        all = std::move(grams);
        return Status::Ok();
      },
      positions_per_image));
  return all;
}

}  // namespace whittle
