// The --svd pass: options, the rank choice per layer (rank=, energy=, or the ratio= allocation
// by measured sensitivity), and the report. Matching and the rewrite are in low_rank_layer.h,
// the SVD numerics in linalg.h, the greedy allocation in rank_allocation.h.
#include "lib/ir/format.h"
#include "passes/svd/svd_pass.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <Eigen/Dense>

#include "passes/accuracy_probe.h"
#include "passes/layer_inputs.h"
#include "passes/layer_selection.h"
#include "passes/cost.h"
#include "passes/svd/linalg.h"
#include "passes/svd/low_rank_layer.h"
#include "passes/svd/rank_allocation.h"

namespace whittle {
namespace {

// Randomized SVD settings (Halko et al.): oversampling keeps the top-k subspace accurate,
// power iterations sharpen the slowly decaying spectra of trained weights.
constexpr int64_t kOversample = 16;
constexpr int kPowerIters = 2;
// algo=auto uses the randomized SVD from this size on, when the wanted rank is at most a
// quarter of the full rank; below that the full SVD is cheap or not much slower.
constexpr int64_t kRandomizedMinSize = 512;
constexpr size_t kSpectrumCap = 512;

enum class Criterion { kRank, kEnergy, kRatio };

// layer=NAME:rank=|energy=|mode= (layer=NAME:skip=1 is SvdConfig::select's).
struct LayerOverride {
  std::optional<int64_t> rank;
  std::optional<double> energy;
  std::optional<bool> spatial;
};

struct SvdConfig {
  Criterion criterion = Criterion::kEnergy;
  int64_t rank = 0;
  double energy = 0.95;
  double ratio = 0;
  bool spatial = false;
  int64_t round = 8;
  std::string algo = "auto";
  int64_t candidates = 8;
  int whiten = -1;  // -1: on exactly when calibration data is given
  LayerSelection select;  // exclude= and the layer= names
  std::map<std::string, LayerOverride> layers;
  std::string spec;
};

// r rounded up to a multiple of `round`, never past the full rank.
int64_t RoundRank(int64_t r, int64_t round, int64_t full) {
  r = std::max<int64_t>(r, 1);
  if (round > 1) r = (r + round - 1) / round * round;
  return std::min(r, full);
}

uint64_t LayerSeed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return seed ^ h;
}

// The SVD a layer needs: the top `need` triplets for rank=/ratio=, or (energy >= 0) enough of
// the spectrum to find the energy rank up to `need` (the largest useful rank: past it the
// layer is skipped anyway, so more values are never needed).
SvdResult LayerSvd(const Matrix& w, const std::string& algo, int64_t need, double energy, uint64_t seed) {
  const int64_t full = std::min(w.rows, w.cols);
  need = std::max<int64_t>(1, std::min(need, full));
  const bool big = full >= kRandomizedMinSize;
  if (algo == "full" || (algo == "auto" && !big)) return FullSvd(w);
  const int64_t auto_cap = full / 4;  // auto: beyond this the full SVD is not much slower
  if (energy < 0) {
    if (algo == "auto" && need + kOversample > auto_cap) return FullSvd(w);
    return RandomizedSvd(w, need, kOversample, kPowerIters, seed);
  }
  // Energy: grow k until the top-k values hold the energy or reach `need`.
  int64_t k = std::min(need, std::max<int64_t>(64, full / 16));
  while (true) {
    if (algo == "auto" && k + kOversample > auto_cap) return FullSvd(w);
    SvdResult r = RandomizedSvd(w, k, kOversample, kPowerIters, seed);
    if (k >= need || ReachesEnergy(r, energy)) return r;
    k = std::min(need, 2 * k);
  }
}

StatusOr<SvdConfig> ParseConfig(PassOptions& o) {
  SvdConfig c;
  c.spec = o.spec();
  int given = o.Has("rank") + o.Has("energy") + o.Has("ratio");
  if (given > 1) return InvalidArgument("--svd: give only one of rank=, energy= and ratio=");
  WH_ASSIGN_OR_RETURN(c.rank, o.GetInt("rank", 0, 1, int64_t{1} << 40));
  WH_ASSIGN_OR_RETURN(c.energy, o.GetDouble("energy", 0.95, 0, 1));
  WH_ASSIGN_OR_RETURN(c.ratio, o.GetDouble("ratio", 0.5, 0, 1));
  if (o.Has("rank")) c.criterion = Criterion::kRank;
  if (o.Has("ratio")) c.criterion = Criterion::kRatio;
  if (o.Has("energy") && c.energy <= 0) return InvalidArgument("--svd: energy must be in (0, 1], got 0");
  if (o.Has("ratio") && (c.ratio <= 0 || c.ratio >= 1))
    return InvalidArgument("--svd: ratio must be in (0, 1) (the fraction of the model's MACs to remove)");
  WH_ASSIGN_OR_RETURN(std::string mode, o.GetChoice("mode", "channel", {"channel", "spatial"}));
  c.spatial = mode == "spatial";
  WH_ASSIGN_OR_RETURN(c.round, o.GetInt("round", 8, 1, 4096));
  WH_ASSIGN_OR_RETURN(c.algo, o.GetChoice("algo", "auto", {"auto", "full", "randomized"}));
  WH_ASSIGN_OR_RETURN(c.candidates, o.GetInt("candidates", 8, 2, 256));
  if (o.Has("candidates") && c.criterion != Criterion::kRatio)
    return InvalidArgument("--svd: candidates= only applies to ratio=");
  if (o.Has("whiten")) {
    WH_ASSIGN_OR_RETURN(int64_t wv, o.GetInt("whiten", 1, 0, 1));
    c.whiten = static_cast<int>(wv);
  }
  WH_ASSIGN_OR_RETURN(c.select, LayerSelection::Parse(o, LayerSelection::Skip::kAllowed));
  for (auto& [name, lo] : o.layers()) {
    LayerOverride ov;
    const bool skip = c.select.skipped(name);
    if (lo.Has("rank") && lo.Has("energy"))
      return InvalidArgument("--svd layer=" + name + ": give only one of rank= and energy=");
    if (skip && (lo.Has("rank") || lo.Has("energy") || lo.Has("mode")))
      return InvalidArgument("--svd layer=" + name + ": skip=1 takes no other settings");
    if (lo.Has("rank")) {
      WH_ASSIGN_OR_RETURN(int64_t r, lo.GetInt("rank", 0, 1, int64_t{1} << 40));
      ov.rank = r;
    }
    if (lo.Has("energy")) {
      WH_ASSIGN_OR_RETURN(double e, lo.GetDouble("energy", 0.95, 0, 1));
      if (e <= 0) return InvalidArgument("--svd layer=" + name + ": energy must be in (0, 1], got 0");
      ov.energy = e;
    }
    if (lo.Has("mode")) {
      WH_ASSIGN_OR_RETURN(std::string m, lo.GetChoice("mode", "channel", {"channel", "spatial"}));
      ov.spatial = m == "spatial";
    }
    c.layers[name] = ov;
  }
  WH_RETURN_IF_ERROR(o.Finish());
  return c;
}

// One matched layer with its decision so far.
struct Work {
  LowRankLayer layer;
  // The SVD, truncated to the largest rank the layer may take (rank=/energy=: the chosen one;
  // ratio=: its break-even rank). A whitened SVD is mapped back at once (Unwhiten), so u·s·vt
  // approximates the layer's own weight either way and the input statistics can go.
  SvdResult svd;
  std::vector<float> spectrum;  // leading singular values for the report (whitened ones when whitened)
  bool factorized = false;
  bool whitened = false;
  int64_t rank = 0;  // chosen; 0 = left alone
  std::string skip_reason;
  std::string note;  // detail suffix, e.g. " (energy 0.951)"
  std::vector<SensitivityPoint> sensitivity;
  std::vector<int64_t> allowed;  // ratio=: ranks it may take
};

using RowMajorMap = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

// Lᵀ·W (input side = rows) or W·L (input side = columns), for the whitened SVD, where C = L·Lᵀ
// holds the input features' second moments (lower, n×n row-major).
Matrix Whitened(const Matrix& w, const std::vector<double>& chol, bool rows) {
  const int64_t n = rows ? w.rows : w.cols;
  RowMajorMap L(chol.data(), n, n);
  Eigen::MatrixXd wm(w.rows, w.cols);
  for (int64_t i = 0; i < w.rows; ++i)
    for (int64_t j = 0; j < w.cols; ++j) wm(i, j) = w.at(i, j);
  const Eigen::MatrixXd m = rows ? Eigen::MatrixXd(L.transpose() * wm) : Eigen::MatrixXd(wm * L);
  Matrix out(w.rows, w.cols);
  for (int64_t i = 0; i < w.rows; ++i)
    for (int64_t j = 0; j < w.cols; ++j) out.at(i, j) = static_cast<float>(m(i, j));
  return out;
}

// Maps the SVD of the whitened matrix back to the weight: Lᵀ·W = U·S·Vᵀ gives W = (L⁻ᵀ·U)·S·Vᵀ,
// and W·L = U·S·Vᵀ gives W = U·S·(Vᵀ·L⁻¹). Each triplet maps on its own, so any truncation of the
// result equals the mapped truncation — the factors need not wait for the rank choice.
void Unwhiten(SvdResult* svd, const std::vector<double>& chol, bool rows) {
  Matrix& f = rows ? svd->u : svd->vt;
  const int64_t n = rows ? f.rows : f.cols, k = rows ? f.cols : f.rows;
  RowMajorMap L(chol.data(), n, n);
  Eigen::MatrixXd x(n, k);  // the factor with the input side as rows
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) x(i, j) = rows ? f.at(i, j) : f.at(j, i);
  x = L.transpose().triangularView<Eigen::Upper>().solve(x);  // Lᵀ·x' = x
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) (rows ? f.at(i, j) : f.at(j, i)) = static_cast<float>(x(i, j));
}

// The Cholesky factor of a Gram matrix's feature block (null when it is not positive definite).
std::shared_ptr<const std::vector<double>> GramCholesky(const InputGram& ig) {
  const int64_t n = ig.features;
  Eigen::MatrixXd C(n, n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) C(i, j) = ig.gram()[static_cast<size_t>(i * (n + 1) + j)];
  C.diagonal().array() += 1e-6 * C.diagonal().mean() + 1e-12;  // dead inputs keep C positive definite
  Eigen::LLT<Eigen::MatrixXd> llt(C);
  if (llt.info() != Eigen::Success) return nullptr;
  auto chol = std::make_shared<std::vector<double>>(static_cast<size_t>(n * n));
  const Eigen::MatrixXd L = llt.matrixL();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) (*chol)[static_cast<size_t>(i * n + j)] = L(i, j);
  return chol;
}

double EnergyKept(const SvdResult& svd, int64_t r) {
  double acc = 0;
  for (int64_t i = 0; i < r && i < svd.rank(); ++i) acc += static_cast<double>(svd.s[static_cast<size_t>(i)]) * svd.s[static_cast<size_t>(i)];
  return svd.total_energy > 0 ? acc / svd.total_energy : 1.0;
}

class SvdPass : public Pass {
 public:
  explicit SvdPass(SvdConfig c) : c_(std::move(c)) {}
  std::string name() const override { return "svd"; }
  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override;

 private:
  void Decide(Work& w, const Matrix& m, const PassContext& ctx) const;
  Status AllocateByRatio(const Graph& g, const PassContext& ctx, std::vector<Work*>& eligible, int64_t fixed_saved,
                         PassReport* rep) const;
  SvdConfig c_;
};

// The rank of one layer by rank=/energy= (its layer= override first), or its allowed ranks for
// ratio=, with the SVD of its matrix m (whitened or not) truncated to what may be used.
void SvdPass::Decide(Work& w, const Matrix& m, const PassContext& ctx) const {
  const LowRankLayer& l = w.layer;
  auto ov = c_.layers.find(l.name);
  const LayerOverride* o = ov == c_.layers.end() ? nullptr : &ov->second;
  Criterion crit = c_.criterion;
  int64_t want_rank = c_.rank;
  double energy = c_.energy;
  if (o && o->rank) crit = Criterion::kRank, want_rank = *o->rank;
  if (o && o->energy) crit = Criterion::kEnergy, energy = *o->energy;
  const int64_t full = l.full_rank(), useful = l.MaxUsefulRank();
  const uint64_t seed = LayerSeed(ctx.seed, l.name);
  if (RoundRank(1, c_.round, full) > useful) {
    w.skip_reason = "no rank" + (c_.round > 1 ? " that is a multiple of round=" + std::to_string(c_.round) : std::string()) +
                    " reduces MACs (break-even rank " + std::to_string(useful) + " of " + std::to_string(full) + ")";
    return;
  }
  int64_t keep = 0;  // triplets kept past this call
  if (crit == Criterion::kRank) {
    const int64_t r = RoundRank(want_rank, c_.round, full);
    if (r > useful) {
      w.skip_reason = "rank " + std::to_string(r) + " would not reduce MACs (break-even rank " +
                      std::to_string(useful) + " of " + std::to_string(full) + ")";
      return;
    }
    w.svd = LayerSvd(m, c_.algo, r, -1, seed);
    w.rank = keep = r;
    w.note = " (energy " + Fmt("%.3f", EnergyKept(w.svd, r)) + (w.svd.complete ? "" : ", estimated") +
             (w.whitened ? ", whitened" : "") + ")";
  } else if (crit == Criterion::kEnergy) {
    w.svd = LayerSvd(m, c_.algo, std::max<int64_t>(useful, 1), energy, seed);
    const bool reached = ReachesEnergy(w.svd, energy);
    const int64_t r = RoundRank(RankForEnergy(w.svd, energy), c_.round, full);
    if (!reached || r > useful) {
      w.skip_reason = "energy " + Fmt("%.3g", energy) + " needs rank " + (reached ? "" : "> ") +
                      std::to_string(reached ? r : w.svd.rank()) + ", which would not reduce MACs (break-even rank " +
                      std::to_string(useful) + " of " + std::to_string(full) + ")";
      w.svd = SvdResult();
      return;
    }
    w.rank = keep = r;
    w.note = " (energy " + Fmt("%.3f", EnergyKept(w.svd, r)) + (w.whitened ? ", whitened" : "") + ")";
  } else {
    for (int64_t r = c_.round; r <= useful; r += c_.round) w.allowed.push_back(r);
    w.svd = LayerSvd(m, c_.algo, w.allowed.back(), -1, seed);
    keep = w.allowed.back();
  }
  w.spectrum.assign(w.svd.s.begin(), w.svd.s.begin() + static_cast<std::ptrdiff_t>(std::min(w.svd.s.size(), kSpectrumCap)));
  TruncateSvd(&w.svd, keep);
}

StatusOr<PassReport> SvdPass::Run(Graph& g, const PassContext& ctx) {
  WH_RETURN_IF_ERROR(c_.select.Check(g));
  if (c_.criterion == Criterion::kRatio && !ctx.calibration)
    return InvalidArgument("--svd ratio= allocates ranks by measured accuracy and needs --calibration-data");
  if (c_.whiten == 1 && !ctx.calibration)
    return InvalidArgument("--svd whiten=1 whitens with the layers' input statistics and needs --calibration-data");
  const bool whiten = c_.whiten == 1 || (c_.whiten < 0 && ctx.calibration);
  PassReport rep;
  rep.pass = "svd";
  rep.config = c_.spec;

  // Match every candidate node first; nothing is edited until all decisions are made.
  std::vector<Work> work;
  std::map<int, LayerReport> skipped;  // node index -> report
  for (int i = 0; i < static_cast<int>(g.nodes().size()); ++i) {
    const Node& n = g.nodes()[static_cast<size_t>(i)];
    auto ov = c_.layers.find(n.name);
    const LayerOverride* o = ov == c_.layers.end() ? nullptr : &ov->second;
    const bool spatial = o && o->spatial ? *o->spatial : c_.spatial;
    Work w;
    std::string reason;
    if (!MatchLowRankLayer(g, i, spatial, &w.layer, &reason)) {
      if (!reason.empty()) skipped[i] = SkippedLayer(g, g.nodes()[static_cast<size_t>(i)], reason);
      continue;
    }
    if (const std::string why = c_.select.LeftAloneReason(n.name); !why.empty()) {
      skipped[i] = SkippedLayer(g, g.nodes()[static_cast<size_t>(i)], why);
      continue;
    }
    work.push_back(std::move(w));
  }

  // Every layer is factorized as soon as its matrix is known, and its SVD kept only up to the
  // largest rank it may take: a pass over a gigabyte model holds one layer's matrix at a time
  // (LayerMatrix gives a mapped weight's pages back once copied), and the input statistics of
  // one group of layers at a time.
  int64_t factorized = 0;
  auto factorize = [&](Work& w, const Matrix& m) {
    ctx.Progress("svd: factorizing " + w.layer.name, factorized++, static_cast<int64_t>(work.size()));
    Decide(w, m, ctx);
    w.factorized = true;
  };
  std::string whiten_note;
  if (whiten) {
    // Whitening: each supported layer's input second moments, in groups within a memory budget,
    // with one Cholesky factor per input value (a decoder's q/k/v, gate/up share theirs).
    std::vector<int> nodes;
    std::string why;
    for (const Work& w : work)
      if (w.layer.kind != LowRankKind::kConvSpatial && LayerInputSupported(g, w.layer.node, &why))
        nodes.push_back(w.layer.node);
    int whitened = 0;
    const Status st = ForEachInputGrams(
        g, nodes, *ctx.calibration, ctx, "svd: whitening statistics", GramBudgetBytes(g, ctx),
        [&](std::map<int, InputGram>& grams) -> Status {
          std::map<const void*, std::shared_ptr<const std::vector<double>>> factor_of;  // by shared Gram matrix
          for (Work& w : work) {
            auto it = grams.find(w.layer.node);
            if (it == grams.end()) continue;
            const InputGram& ig = it->second;
            const bool rows = w.layer.kind != LowRankKind::kConvChannel;
            if (ig.features != (rows ? w.layer.m : w.layer.n)) continue;
            auto f = factor_of.find(ig.shared.get());
            if (f == factor_of.end()) f = factor_of.emplace(ig.shared.get(), GramCholesky(ig)).first;
            if (!f->second) continue;  // not positive definite: plain SVD below
            w.whitened = true;
            factorize(w, Whitened(LayerMatrix(g, w.layer), *f->second, rows));
            if (w.svd.rank() > 0) Unwhiten(&w.svd, *f->second, rows);
            ++whitened;
          }
          return Status::Ok();
        });
    if (!st.ok()) return st.WithContext("--svd: running the calibration data '" + ctx.calibration->description + "'");
    whiten_note = ("whitened SVD on " + std::to_string(whitened) + " of " + std::to_string(work.size()) +
                        " layer(s): truncates the layer's output error on the calibration data, not its weight error"
                        " (whiten=0 for plain SVD)");
  }
  for (Work& w : work)
    if (!w.factorized) factorize(w, LayerMatrix(g, w.layer));
  ctx.Progress("svd: factorizing", static_cast<int64_t>(work.size()), static_cast<int64_t>(work.size()));

  // ratio= layers get their ranks from the sensitivity analysis; the rest have theirs.
  std::vector<Work*> eligible;
  int64_t fixed_saved = 0;
  for (Work& w : work) {
    if (!w.allowed.empty()) eligible.push_back(&w);
    else if (w.rank > 0) fixed_saved += w.layer.macs_before - w.layer.MacsAfter(w.rank);
  }
  if (c_.criterion == Criterion::kRatio) WH_RETURN_IF_ERROR(AllocateByRatio(g, ctx, eligible, fixed_saved, &rep));

  // Report in node order, then apply (ApplyLowRank only appends, so indices stay valid).
  for (Work& w : work)
    if (w.rank == 0 && !w.skip_reason.empty())
      skipped[w.layer.node] = SkippedLayer(g, g.nodes()[static_cast<size_t>(w.layer.node)], w.skip_reason);
  std::map<int, LayerReport> done;
  for (Work& w : work) {
    if (w.rank == 0) continue;
    const LowRankLayer& l = w.layer;
    LayerReport r;
    r.node = l.name;
    r.op_type = l.op_type;
    r.action = l.Action();
    r.detail = "rank " + std::to_string(w.rank) + " of " + std::to_string(l.full_rank()) + w.note;
    r.params_before = l.params_before;
    r.params_after = l.ParamsAfter(w.rank);
    r.macs_before = l.macs_before;
    r.macs_after = l.MacsAfter(w.rank);
    r.setting = w.rank;
    r.full_setting = l.full_rank();
    r.spectrum = w.spectrum;
    r.sensitivity = w.sensitivity;
    done[l.node] = std::move(r);
  }
  for (auto& [idx, r] : skipped) done[idx] = std::move(r);
  for (auto& [idx, r] : done) rep.layers.push_back(std::move(r));
  for (Work& w : work) {
    if (w.rank == 0) continue;
    Matrix a, b;
    SplitFactors(w.svd, w.rank, &a, &b);
    ApplyLowRank(g, w.layer, a, b);
    w.svd = SvdResult();  // applied: its factors at the larger rank go now, not at the pass's end
  }
  WH_RETURN_IF_ERROR(g.Compact());
  if (!whiten_note.empty()) rep.notes.push_back(whiten_note);
  return rep;
}

Status SvdPass::AllocateByRatio(const Graph& g, const PassContext& ctx, std::vector<Work*>& eligible,
                                int64_t fixed_saved, PassReport* rep) const {
  const int64_t total = ComputeCost(g).macs;
  const int64_t target = static_cast<int64_t>(std::ceil(c_.ratio * static_cast<double>(total)));
  const int64_t remaining = target - fixed_saved;
  WH_ASSIGN_OR_RETURN(AccuracyProbe probe, AccuracyProbe::Make(g, *ctx.calibration, ctx.num_threads));
  const double base = probe.baseline();
  std::vector<RankCurve> curves;
  if (remaining > 0) {
    // Sensitivity: each layer alone at a few candidate ranks, the rest of the model intact.
    int64_t total_evals = 0, done = 0;
    std::vector<std::vector<int64_t>> cands;
    for (Work* w : eligible) {
      cands.push_back(PickCandidates(w->allowed, c_.candidates));
      total_evals += static_cast<int64_t>(cands.back().size());
    }
    for (size_t i = 0; i < eligible.size(); ++i) {
      Work& w = *eligible[i];
      for (int64_t r : cands[i]) {
        ctx.Progress("svd: sensitivity of " + w.layer.name, done++, total_evals);
        Graph cand = g;
        Matrix a, b;
        SplitFactors(w.svd, r, &a, &b);
        ApplyLowRank(cand, w.layer, a, b);
        WH_RETURN_IF_ERROR(cand.Compact());
        WH_ASSIGN_OR_RETURN(double acc, probe.Measure(cand));
        const double comp = 1.0 - static_cast<double>(w.layer.MacsAfter(r)) / static_cast<double>(w.layer.macs_before);
        w.sensitivity.push_back({r, comp, acc});
      }
      RankCurve c;
      c.macs_full = w.layer.macs_before;
      c.ranks = w.allowed;
      for (int64_t r : w.allowed) c.macs.push_back(w.layer.MacsAfter(r));
      c.loss = InterpolateLoss(w.allowed, w.sensitivity, base, w.layer.full_rank());
      curves.push_back(std::move(c));
    }
    ctx.Progress("svd: sensitivity", total_evals, total_evals);
  }
  RankAllocation alloc = AllocateRanks(curves, remaining);
  int64_t saved = fixed_saved + alloc.macs_saved;
  for (size_t i = 0; i < eligible.size(); ++i) {
    Work& w = *eligible[i];
    w.rank = alloc.rank.empty() ? 0 : alloc.rank[i];
    if (w.rank > 0) {
      w.note = " (energy " + Fmt("%.3f", EnergyKept(w.svd, w.rank)) + (w.svd.complete ? "" : ", estimated") +
               (w.whitened ? ", whitened" : "") + ")";
      TruncateSvd(&w.svd, w.rank);
    } else {
      w.svd = SvdResult();
      w.skip_reason = "the ratio allocation kept this layer whole (the target was met by less sensitive layers)";
    }
  }
  auto pct = [&](int64_t x) { return Fmt("%.1f %%", 100.0 * static_cast<double>(x) / static_cast<double>(std::max<int64_t>(total, 1))); };
  rep->notes.push_back("ratio=" + Fmt("%g", c_.ratio) + ": target " + std::to_string(target) + " of " +
                       std::to_string(total) + " MACs removed (" + pct(target) + "), achieved " +
                       std::to_string(saved) + " (" + pct(saved) + ")" +
                       (saved >= target ? "" : " — target not reachable: every eligible layer is at its lowest rank"));
  // The combined result on the calibration data (losses were assumed to add; this checks it).
  if (saved > fixed_saved) {
    Graph combined = g;
    for (Work* w : eligible) {
      if (w->rank == 0) continue;
      Matrix a, b;
      SplitFactors(w->svd, w->rank, &a, &b);
      ApplyLowRank(combined, w->layer, a, b);
    }
    WH_RETURN_IF_ERROR(combined.Compact());
    WH_ASSIGN_OR_RETURN(double acc, probe.Measure(combined));
    rep->notes.push_back("calibration accuracy " + Fmt("%.4f", base) + " -> " + Fmt("%.4f", acc) +
                         " with the allocated ranks (predicted loss " + Fmt("%.4f", alloc.predicted_loss) + ", on " +
                         std::to_string(ctx.calibration->size()) + " samples)");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<Pass>> MakeSvdPass(PassOptions options) {
  WH_ASSIGN_OR_RETURN(SvdConfig c, ParseConfig(options));
  return std::unique_ptr<Pass>(std::make_unique<SvdPass>(std::move(c)));
}

const char* SvdPassHelp() {
  return "--svd OPTIONS  low-rank factorization of Gemm/MatMul with a constant weight (W ~ U*V as two ops, bias on "
         "the second) and of group-1 Conv. Options (comma-separated key=value):\n"
         "  rank=N | energy=E | ratio=R   how ranks are chosen (one of them; default energy=0.95):\n"
         "      rank=N     the same rank N for every layer;\n"
         "      energy=E   the smallest rank keeping fraction E (0<E<=1) of the squared singular values;\n"
         "      ratio=R    remove fraction R (0<R<1) of the whole model's MACs (per sample), ranks allocated\n"
         "                 greedily by measured accuracy on --calibration-data (required): each layer alone\n"
         "                 is evaluated at a few candidate ranks, losses are assumed to add, and rank is taken\n"
         "                 where accuracy suffers least per MAC saved;\n"
         "  mode=channel|spatial   Conv factorization (default channel): channel = kxk conv with r filters then\n"
         "                 1x1 conv; spatial = kx1 conv then 1xk conv (2-D kernels only);\n"
         "  round=8        ranks rounded up to a multiple of this (round=1: off), never past the full rank;\n"
         "  algo=auto|full|randomized   SVD algorithm (default auto: randomized top-k for matrices with\n"
         "                 min(m,n) >= 512 when the needed rank is <= a quarter of it, full otherwise);\n"
         "  candidates=8   ratio=: candidate ranks measured per layer (between round and the break-even rank);\n"
         "  whiten=0|1     data-aware SVD (default 1 when --calibration-data is given): factorize W times the\n"
         "                 Cholesky factor of the layer's input second moments, so the truncation minimizes the\n"
         "                 layer's output error on the data rather than its weight error (Gemm/MatMul and\n"
         "                 channel-mode Conv; spatial mode stays plain); energy= then counts whitened values;\n"
         "  exclude=NAME,...           layers (node names) left alone;\n"
         "  layer=NAME:rank=N|energy=E|skip=1[:mode=channel|spatial]   per-layer overrides.\n"
         "A layer is left alone (reported with the reason) when the factorization at its rank would not reduce\n"
         "MACs, its weight is not a constant float32 initializer, its shapes are unknown, it is a grouped conv,\n"
         "or it is already a factor made by --svd (names '<node>/svd_u', '<node>/svd_v').";
}

}  // namespace whittle
