#include "passes/prune/prune_scores.h"

#include <algorithm>
#include <cmath>

#include "runtime/evaluate.h"
#include "whittle/session.h"

namespace whittle::prune {
namespace {

// Per-unit scale of a BatchNormalization that is the producer output's only reader (1 when there
// is none): BN multiplies unit c by scale[c] / sqrt(var[c] + eps), so that is how much of the
// unit's weights reach the next layer.
std::vector<double> FoldedBatchNormScale(const Graph& g, const Producer& p) {
  std::vector<double> s(static_cast<size_t>(p.width), 1.0);
  std::vector<int> readers = g.Consumers(p.value);
  if (readers.size() != 1 || g.IsGraphOutput(p.value)) return s;
  const Node& bn = g.nodes()[static_cast<size_t>(readers[0])];
  if (bn.op_type != "BatchNormalization" || bn.inputs.empty() || bn.inputs[0] != p.value || p.axis != 1) return s;
  const Tensor *scale = g.ConstInput(bn, 1, DType::kFloat32), *var = g.ConstInput(bn, 4, DType::kFloat32);
  if (!scale || !var || scale->numel() != p.width || var->numel() != p.width) return s;
  const double eps = bn.attrs.GetFloat("epsilon", 1e-5f);
  for (int64_t c = 0; c < p.width; ++c)
    s[static_cast<size_t>(c)] = scale->data<float>()[c] / std::sqrt(static_cast<double>(var->data<float>()[c]) + eps);
  return s;
}

}  // namespace

std::vector<double> WeightScores(const Graph& g, const Producer& p, bool l2) {
  const Node& n = g.nodes()[static_cast<size_t>(p.node)];
  const Tensor& w = *g.ConstInput(n, 1, DType::kFloat32);
  const int64_t units = p.width;
  std::vector<double> sum(static_cast<size_t>(units), 0.0);
  // Attention heads: column c of a [F, heads, head_dim] layout belongs to head (c / head_dim) % heads.
  auto unit = [&](int64_t c) { return p.head_dim > 0 ? (c / p.head_dim) % units : c; };
  auto acc = [&](int64_t c, double v) { sum[static_cast<size_t>(unit(c))] += l2 ? v * v : std::fabs(v); };
  const float* pw = w.data<float>();
  if (n.op_type == "Gemm") {
    const bool trans_b = n.attrs.GetInt("transB", 0) != 0;
    for (int64_t i = 0; i < w.dim(0); ++i)
      for (int64_t j = 0; j < w.dim(1); ++j) acc(trans_b ? i : j, pw[i * w.dim(1) + j]);
  } else if (n.op_type == "MatMul") {
    for (int64_t i = 0; i < w.dim(0); ++i)
      for (int64_t j = 0; j < w.dim(1); ++j) acc(j, pw[i * w.dim(1) + j]);
  } else {  // Conv: [units, in/group, k...]
    const int64_t per = w.numel() / units;
    for (int64_t u = 0; u < units; ++u)
      for (int64_t k = 0; k < per; ++k) acc(u, pw[u * per + k]);
  }
  w.buffer()->ReleaseResidentPages();  // mapped weights: read again, one layer at a time, when pruned
  std::vector<double> s = FoldedBatchNormScale(g, p);
  for (size_t u = 0; u < sum.size(); ++u) sum[u] = std::fabs(s[u]) * (l2 ? std::sqrt(sum[u]) : sum[u]);
  return sum;
}

std::vector<double> ConsumerRowScores(const Graph& g, const ChannelAnalysis& a, int root, int64_t width,
                                      const std::map<int, ValueStats>* stats) {
  std::vector<double> score(static_cast<size_t>(width), 0.0);
  for (const Edit& e : a.edits) {
    if (e.kind != EditKind::kConsumerRows) continue;
    const Node& n = g.nodes()[static_cast<size_t>(e.node)];
    const Tensor* w = g.ConstInput(n, 1, DType::kFloat32);
    if (!w || (n.op_type != "MatMul" && n.op_type != "Gemm" && n.op_type != "Conv")) continue;
    if ((n.op_type != "Conv" && w->rank() != 2) || (n.op_type == "Conv" && n.attrs.GetInt("group", 1) != 1)) continue;
    const ChannelMap& m = *a.maps[static_cast<size_t>(e.value)];
    const ValueStats* vs = nullptr;
    if (stats) {
      auto it = stats->find(e.value);
      if (it == stats->end() || it->second.rms.size() != static_cast<size_t>(m.positions())) continue;
      vs = &it->second;
    }
    // |weights| of input position `pos` over every output (and kernel tap).
    auto row_l1 = [&](int64_t pos) {
      const float* pw = w->data<float>();
      double sum = 0;
      if (n.op_type == "Conv") {  // [out, in, k...]
        const int64_t in = w->dim(1), taps = w->numel() / (w->dim(0) * in);
        for (int64_t o = 0; o < w->dim(0); ++o)
          for (int64_t t = 0; t < taps; ++t) sum += std::fabs(pw[(o * in + pos) * taps + t]);
      } else if (n.op_type == "Gemm" && n.attrs.GetInt("transB", 0) != 0) {  // [out, in]
        for (int64_t o = 0; o < w->dim(0); ++o) sum += std::fabs(pw[o * w->dim(1) + pos]);
      } else {  // [in, out]
        for (int64_t o = 0; o < w->dim(1); ++o) sum += std::fabs(pw[pos * w->dim(1) + o]);
      }
      return sum;
    };
    int64_t offset = 0;
    for (const Segment& sg : m.segs) {
      if (sg.group >= 0 && a.Root(sg.group) == root && sg.channels == width)
        for (int64_t c = 0; c < sg.channels; ++c)
          for (int64_t b = 0; b < sg.block; ++b) {
            const int64_t pos = offset + c * sg.block + b;
            score[static_cast<size_t>(c)] += row_l1(pos) * (vs ? vs->rms[static_cast<size_t>(pos)] : 1.0);
          }
      offset += sg.channels * sg.block;
    }
    w->buffer()->ReleaseResidentPages();
  }
  return score;
}

StatusOr<std::map<int, ValueStats>> CollectStats(const Graph& g, const std::map<int, int>& value_axes,
                                                 const Dataset& data, const PassContext& ctx) {
  std::map<int, ValueStats> stats;
  if (value_axes.empty()) return stats;
  if (data.size() == 0) return InvalidArgument("calibration data '" + data.description + "' is empty");
  Graph probe = g;
  probe.outputs().clear();
  std::vector<int> order;
  for (const auto& [id, axis] : value_axes) {
    probe.outputs().push_back(id);
    order.push_back(id);
  }
  SessionOptions so;
  so.num_threads = ctx.num_threads;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(std::move(probe), so));
  std::map<int, std::vector<double>> sum, sum_abs, sum_sq;
  std::map<int, double> count;
  // Every watched value of a batch is held at once: 256 images' feature maps are small, but a
  // decoder's MLP activations are samples x tokens x intermediate x layers. The first run takes one
  // sample, and the batch then holds about kBatchBytes of watched values.
  constexpr int64_t kBatchBytes = int64_t{256} << 20;
  const int64_t n = data.size();
  int64_t batch = 1;
  for (int64_t b = 0, e = 0; b < n; b = e) {
    e = std::min(n, b + batch);
    ctx.Progress("prune: calibration", b, n);
    WH_ASSIGN_OR_RETURN(auto feeds, BatchFeeds(data, session->inputs(), b, e));
    WH_ASSIGN_OR_RETURN(std::vector<Tensor> outs, session->Run(feeds));
    if (b == 0) {
      int64_t bytes = 0;
      for (const Tensor& x : outs) bytes += static_cast<int64_t>(x.nbytes());
      batch = DataBatch(data, std::max<int64_t>(1, std::min<int64_t>(256, kBatchBytes / std::max<int64_t>(1, bytes))),
                        &session->inputs());
    }
    for (size_t k = 0; k < order.size(); ++k) {
      const Tensor& x = outs[k];
      const int axis = value_axes.at(order[k]);
      if (x.dtype() != DType::kFloat32 || axis >= x.rank())
        return Internal("calibration output '" + g.value(order[k]).name + "' is not float32 with a channel axis");
      int64_t outer = 1, inner = 1;
      for (int d = 0; d < axis; ++d) outer *= x.dim(d);
      for (int d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
      const int64_t p = x.dim(axis);
      std::vector<double>& s = sum[order[k]];
      std::vector<double>& sa = sum_abs[order[k]];
      std::vector<double>& sq = sum_sq[order[k]];
      s.resize(static_cast<size_t>(p), 0.0);
      sa.resize(static_cast<size_t>(p), 0.0);
      sq.resize(static_cast<size_t>(p), 0.0);
      const float* v = x.data<float>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < p; ++c) {
          double a = 0, aa = 0, a2 = 0;
          const float* row = v + (o * p + c) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            a += row[i];
            aa += std::fabs(row[i]);
            a2 += static_cast<double>(row[i]) * row[i];
          }
          s[static_cast<size_t>(c)] += a;
          sa[static_cast<size_t>(c)] += aa;
          sq[static_cast<size_t>(c)] += a2;
        }
      count[order[k]] += static_cast<double>(outer * inner);
    }
  }
  ctx.Progress("prune: calibration", n, n);
  for (int id : order) {
    ValueStats& vs = stats[id];
    for (double v : sum[id]) vs.mean.push_back(v / count[id]);
    for (double v : sum_abs[id]) vs.mean_abs.push_back(v / count[id]);
    for (double v : sum_sq[id]) vs.rms.push_back(std::sqrt(v / count[id]));
  }
  return stats;
}

}  // namespace whittle::prune
