#include "passes/prune/prune_reconstruct.h"


#include <algorithm>
#include <limits>
#include <random>
#include <set>

#include "passes/layer_inputs_eigen.h"
#include "runtime/evaluate.h"
#include "whittle/session.h"

namespace whittle::prune {
namespace {

using Mat = RowMat;

// The consumer's weights as [features, outputs] (feature f = input position, or channel*K + tap
// for Conv), with its 1-D bias (or zeros) as a last row; *has_bias says whether it has one.
Mat FeatureWeights(const Graph& g, const Node& n, bool* has_bias) {
  const Tensor& w = *g.ConstInput(n, 1, DType::kFloat32);
  const float* pw = w.data<float>();
  Mat W;
  int64_t m = 0;
  if (n.op_type == "Conv") {
    m = w.dim(0);
    const int64_t per = w.numel() / m;  // C * K
    W = Mat::Zero(per + 1, m);
    for (int64_t o = 0; o < m; ++o)
      for (int64_t f = 0; f < per; ++f) W(f, o) = pw[o * per + f];
  } else {
    const bool trans_b = n.op_type == "Gemm" && n.attrs.GetInt("transB", 0) != 0;
    const int64_t k = trans_b ? w.dim(1) : w.dim(0);
    m = trans_b ? w.dim(0) : w.dim(1);
    W = Mat::Zero(k + 1, m);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t o = 0; o < m; ++o) W(i, o) = trans_b ? pw[o * k + i] : pw[i * m + o];
  }
  *has_bias = false;
  if (n.op_type != "MatMul") {
    const Tensor* b = g.ConstInput(n, 2, DType::kFloat32);
    if (b && b->rank() == 1 && b->dim(0) == m && g.Consumers(n.inputs[2]).size() == 1) {
      *has_bias = true;
      for (int64_t o = 0; o < m; ++o) W(W.rows() - 1, o) = b->data<float>()[o];
    }
  }
  return W;
}

// Feature indices of unit c of group root in the consumer's input map.
std::vector<int64_t> UnitFeatures(const ChannelAnalysis& a, const ChannelMap& m, int root, int64_t c, int64_t k) {
  std::vector<int64_t> f;
  int64_t offset = 0;
  for (const Segment& s : m.segs) {
    if (s.group >= 0 && a.Root(s.group) == root && c < s.channels)
      for (int64_t b = 0; b < s.block; ++b)
        for (int64_t t = 0; t < k; ++t) f.push_back((offset + c * s.block + b) * k + t);
    offset += s.channels * s.block;
  }
  return f;
}

}  // namespace

ReconstructionSetup FindReconstructableConsumers(const Graph& g, const ChannelAnalysis& a) {
  ReconstructionSetup r;
  std::set<int> seen;
  for (const Edit& e : a.edits) {
    if (e.kind != EditKind::kConsumerRows || !seen.insert(e.node).second) continue;
    std::string why;
    if (LayerInputSupported(g, e.node, &why) && g.Consumers(g.nodes()[static_cast<size_t>(e.node)].inputs[1]).size() != 1)
      why = "its weight is shared with another node";
    if (why.empty()) r.consumers.push_back(e.node);
    else r.unsupported[e.node] = why;
  }
  return r;
}

std::vector<bool> SelectByReconstruction(const Graph& g, const ChannelAnalysis& a, int root, int64_t width,
                                         int64_t kept, const std::map<int, InputGram>& grams) {
  // Backward elimination by the error after re-fitting. Per consumer, with P = G⁻¹ over the
  // features still in and Θ = P·G·W the least-squares weights on them (Θ = W while nothing is
  // removed), removing the feature block B of one unit raises the output error by
  // tr(Θ_Bᵀ (P_BB)⁻¹ Θ_B) (the optimal-brain-surgeon identity), and P, Θ are downdated in place.
  struct State {
    Mat P, Theta;
    std::vector<std::vector<int64_t>> feats;  // per unit
  };
  std::vector<State> states;
  for (const Edit& e : a.edits) {
    if (e.kind != EditKind::kConsumerRows) continue;
    auto it = grams.find(e.node);
    if (it == grams.end()) continue;
    const InputGram& cg = it->second;
    const ChannelMap& m = *a.maps[static_cast<size_t>(e.value)];
    State st;
    st.feats.resize(static_cast<size_t>(width));
    bool any = false;
    for (int64_t c = 0; c < width; ++c) {
      st.feats[static_cast<size_t>(c)] = UnitFeatures(a, m, root, c, cg.kernel);
      any |= !st.feats[static_cast<size_t>(c)].empty();
    }
    if (!any) continue;
    bool has_bias;
    st.Theta = FeatureWeights(g, g.nodes()[static_cast<size_t>(e.node)], &has_bias);
    const int64_t F = cg.features + 1;
    if (st.Theta.rows() != F) continue;
    Mat G = Eigen::Map<const Mat>(cg.gram().data(), F, F);
    G.diagonal().array() += 1e-5 * G.diagonal().mean() + 1e-12;
    st.P = G.ldlt().solve(Mat::Identity(F, F));
    if (!st.P.allFinite()) continue;
    states.push_back(std::move(st));
  }
  auto block = [](const Mat& m, const std::vector<int64_t>& r, const std::vector<int64_t>& c) {
    Mat out(static_cast<int64_t>(r.size()), static_cast<int64_t>(c.size()));
    for (size_t i = 0; i < r.size(); ++i)
      for (size_t j = 0; j < c.size(); ++j) out(static_cast<int64_t>(i), static_cast<int64_t>(j)) = m(r[i], c[j]);
    return out;
  };
  auto rows = [](const Mat& m, const std::vector<int64_t>& r) {
    Mat out(static_cast<int64_t>(r.size()), m.cols());
    for (size_t i = 0; i < r.size(); ++i) out.row(static_cast<int64_t>(i)) = m.row(r[i]);
    return out;
  };
  std::vector<bool> removed(static_cast<size_t>(width), false);
  for (int64_t step = 0; step < width - kept; ++step) {
    int64_t best = -1;
    double best_err = std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < width; ++c) {
      if (removed[static_cast<size_t>(c)]) continue;
      double err = 0;
      for (const State& st : states) {
        const auto& B = st.feats[static_cast<size_t>(c)];
        if (B.empty()) continue;
        const Mat tb = rows(st.Theta, B);
        err += (tb.transpose() * block(st.P, B, B).ldlt().solve(tb)).trace();
      }
      if (err < best_err) best_err = err, best = c;
    }
    if (best < 0) break;
    removed[static_cast<size_t>(best)] = true;
    for (State& st : states) {
      const auto& B = st.feats[static_cast<size_t>(best)];
      if (B.empty()) continue;
      Mat pcol(st.P.rows(), static_cast<int64_t>(B.size()));
      for (size_t j = 0; j < B.size(); ++j) pcol.col(static_cast<int64_t>(j)) = st.P.col(B[j]);
      const Mat K = block(st.P, B, B).ldlt().solve(pcol.transpose()).transpose();  // P_:B (P_BB)⁻¹
      st.Theta -= K * rows(st.Theta, B);
      st.P -= K * pcol.transpose();
      for (int64_t f : B) {
        st.P.row(f).setZero();
        st.P.col(f).setZero();
        st.Theta.row(f).setZero();
      }
    }
  }
  std::vector<bool> keep(static_cast<size_t>(width));
  for (int64_t c = 0; c < width; ++c) keep[static_cast<size_t>(c)] = !removed[static_cast<size_t>(c)];
  return keep;
}

namespace {

// Writes feature-layout weights Wn (rows: features, last row: bias) back into the consumer's
// initializers as new tensors (the old ones may be shared by graph copies).
void WriteBack(Graph& g, const Node& n, const Mat& Wn, bool has_bias) {
  const Tensor& w = *g.ConstInput(n, 1, DType::kFloat32);
  Tensor nw(DType::kFloat32, w.dims());
  float* pw = nw.data<float>();
  if (n.op_type == "Conv") {
    const int64_t mo = w.dim(0), per = w.numel() / mo;
    for (int64_t o = 0; o < mo; ++o)
      for (int64_t f = 0; f < per; ++f) pw[o * per + f] = static_cast<float>(Wn(f, o));
  } else {
    const bool trans_b = n.op_type == "Gemm" && n.attrs.GetInt("transB", 0) != 0;
    const int64_t k = trans_b ? w.dim(1) : w.dim(0), mo = trans_b ? w.dim(0) : w.dim(1);
    for (int64_t i = 0; i < k; ++i)
      for (int64_t o = 0; o < mo; ++o) (trans_b ? pw[o * k + i] : pw[i * mo + o]) = static_cast<float>(Wn(i, o));
  }
  const int wid = n.inputs[1], bid = has_bias ? n.inputs[2] : -1;
  g.value(wid).initializer = std::move(nw);
  if (bid >= 0) {
    Tensor nb(DType::kFloat32, {Wn.cols()});
    for (int64_t o = 0; o < Wn.cols(); ++o) nb.data<float>()[o] = static_cast<float>(Wn(Wn.rows() - 1, o));
    g.value(bid).initializer = std::move(nb);
  }
}

// Rows of the consumer's original output y ([N, M, ...] for Conv at the chosen positions; [.., M]
// for Gemm/MatMul).
Mat TargetRows(const Node& node, const Tensor& y, const std::vector<int64_t>& chosen) {
  const float* py = y.data<float>();
  if (node.op_type != "Conv") {
    const int64_t m = y.dim(y.rank() - 1), r = m == 0 ? 0 : y.numel() / m;
    Mat t(r, m);
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < m; ++j) t(i, j) = py[i * m + j];
    return t;
  }
  const int64_t M = y.dim(1), hw = y.dim(2) * y.dim(3);
  Mat t(static_cast<int64_t>(chosen.size()), M);
  for (size_t r = 0; r < chosen.size(); ++r) {
    const int64_t img = chosen[r] / hw, pos = chosen[r] % hw;
    for (int64_t o = 0; o < M; ++o) t(static_cast<int64_t>(r), o) = py[(img * M + o) * hw + pos];
  }
  return t;
}

}  // namespace

StatusOr<std::vector<int>> RefitConsumers(Graph& g, const ChannelAnalysis& a,
                                          const std::map<int, std::vector<bool>>& keep,
                                          const std::vector<int>& consumers, const Dataset& data,
                                          const PassContext& ctx, int64_t positions_per_image) {
  const Graph original = g;
  // Kept feature rows of every consumer that loses input positions; the others are left alone.
  std::map<int, std::vector<int64_t>> kept_features;
  for (int ni : consumers) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    if (!a.maps[static_cast<size_t>(n.inputs[0])]) continue;
    const ChannelMap& m = *a.maps[static_cast<size_t>(n.inputs[0])];
    const std::vector<int64_t> kept = KeptPositions(a, m, keep);
    if (static_cast<int64_t>(kept.size()) == m.positions()) continue;
    const int64_t k = FeaturesPerPosition(g, n);
    for (int64_t p : kept)
      for (int64_t t = 0; t < k; ++t) kept_features[ni].push_back(p * k + t);
  }
  // The model as pruned so far: every affected consumer ignores its removed inputs (zero rows),
  // which is what the apply step's slicing computes.
  for (const auto& [ni, feats] : kept_features) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    bool has_bias;
    Mat W = FeatureWeights(g, n, &has_bias);
    std::vector<bool> on(static_cast<size_t>(W.rows() - 1), false);
    for (int64_t f : feats) on[static_cast<size_t>(f)] = true;
    for (int64_t f = 0; f + 1 < W.rows(); ++f)
      if (!on[static_cast<size_t>(f)]) W.row(f).setZero();
    WriteBack(g, n, W, has_bias);
  }
  // Re-fit consumers in topological order, each on the inputs the model pruned so far gives it,
  // against the outputs the original model gave: errors upstream are corrected, not compounded.
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::vector<int> refit;
  std::mt19937_64 rng(ctx.seed);
  int done = 0;
  for (int ni : order) {
    auto kf = kept_features.find(ni);
    if (kf == kept_features.end()) continue;
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    ctx.Progress("prune: re-fitting " + n.name, done++, static_cast<int64_t>(kept_features.size()));
    Graph probe = g, target = original;
    probe.outputs() = {n.inputs[0]};
    target.outputs() = {original.nodes()[static_cast<size_t>(ni)].outputs[0]};
    SessionOptions so;
    so.num_threads = ctx.num_threads;
    so.optimize = false;
    WH_ASSIGN_OR_RETURN(auto sp, Session::FromGraph(std::move(probe), so));
    WH_ASSIGN_OR_RETURN(auto st, Session::FromGraph(std::move(target), so));
    bool has_bias;
    const Mat W = FeatureWeights(g, n, &has_bias);
    const int64_t F = W.rows();
    Mat G = Mat::Zero(F, F), C = Mat::Zero(F, W.cols());
    const int64_t total = data.size(), batch = DataBatch(data, 128, &sp->inputs());
    for (int64_t b = 0; b < total; b += batch) {
      const int64_t e = std::min(total, b + batch);
      WH_ASSIGN_OR_RETURN(auto pruned_feeds, BatchFeeds(data, sp->inputs(), b, e));
      WH_ASSIGN_OR_RETURN(auto target_feeds, BatchFeeds(data, st->inputs(), b, e));
      WH_ASSIGN_OR_RETURN(std::vector<Tensor> xs, sp->Run(pruned_feeds));
      WH_ASSIGN_OR_RETURN(std::vector<Tensor> ys, st->Run(target_feeds));
      std::vector<int64_t> chosen;
      auto pick = [&](int64_t count) { return std::uniform_int_distribution<int64_t>(0, count - 1)(rng); };
      const Mat X = FeatureRows(n, *g.ConstInput(n, 1, DType::kFloat32), xs[0], positions_per_image, pick, &chosen);
      const Mat Y = TargetRows(n, ys[0], chosen);
      if (X.rows() != Y.rows() || X.cols() != F) return Internal(n.DebugName() + ": re-fit rows do not match");
      G.noalias() += X.transpose() * X;
      C.noalias() += X.transpose() * Y;
    }
    std::vector<int64_t> S = kf->second;
    if (has_bias) S.push_back(F - 1);
    const int64_t s = static_cast<int64_t>(S.size());
    Mat Gss(s, s), Rhs(s, W.cols());
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j < s; ++j) Gss(i, j) = G(S[static_cast<size_t>(i)], S[static_cast<size_t>(j)]);
      Rhs.row(i) = C.row(S[static_cast<size_t>(i)]);
    }
    Gss.diagonal().array() += 1e-6 * Gss.diagonal().mean() + 1e-12;
    const Mat sol = Gss.ldlt().solve(Rhs);
    if (!sol.allFinite()) continue;
    Mat Wn = Mat::Zero(F, W.cols());
    for (int64_t i = 0; i < s; ++i) Wn.row(S[static_cast<size_t>(i)]) = sol.row(i);
    if (!has_bias) Wn.row(F - 1) = W.row(F - 1);
    WriteBack(g, n, Wn, has_bias);
    refit.push_back(ni);
  }
  return refit;
}

}  // namespace whittle::prune
