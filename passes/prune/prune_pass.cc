// The --prune pass: options, the per-group choice of kept units, and the report. The analysis is in
// channel_groups.h, the criteria in prune_scores.h and the rewrite in prune_apply.h.
#include "passes/prune/prune_pass.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <set>

#include "lib/ops/op_def.h"
#include "passes/cost.h"
#include "passes/layer_selection.h"
#include "passes/prune/channel_groups.h"
#include "passes/prune/prune_apply.h"
#include "passes/prune/prune_reconstruct.h"
#include "passes/prune/prune_scores.h"

namespace whittle {
namespace {

using prune::ChannelAnalysis;
using prune::EditKind;
using prune::Producer;

struct LayerOverride {
  std::optional<double> ratio;
  std::optional<int64_t> keep;
  std::optional<int64_t> round;
};

struct PruneConfig {
  double ratio = 0.3;
  std::optional<double> heads;  // ratio for attention-head groups (default: ratio)
  std::string criterion = "l1";
  int64_t round = 8;
  LayerSelection select;  // exclude= and the layer= names
  int compensate = -1;  // -1: on exactly when calibration data is given
  std::map<std::string, LayerOverride> layers;
  std::string spec;
};

// Kept units for a group of `width`: explicit keep wins; otherwise width*(1-ratio) rounded to the
// nearest multiple of `round` (ties up), never below one rounding step, never above width.
int64_t KeptCount(int64_t width, double ratio, std::optional<int64_t> keep, int64_t round) {
  if (keep) return std::min(*keep, width);
  if (ratio <= 0) return width;
  const double target = static_cast<double>(width) * (1.0 - ratio);
  int64_t k = round * static_cast<int64_t>(std::floor(target / static_cast<double>(round) + 0.5));
  if (k < round) k = round;
  return std::max<int64_t>(1, std::min(k, width));
}

// Shapes of computed values are re-derived from the declared inputs (as CheckPassOutput does,
// without compacting, so node indices stay valid for the report).
Status Reinfer(Graph& g) {
  std::set<int> inputs(g.inputs().begin(), g.inputs().end());
  for (size_t i = 0; i < g.values().size(); ++i) {
    Value& v = g.values()[i];
    if (!inputs.count(static_cast<int>(i)) && !v.initializer && v.producer >= 0) v.shape.reset();
  }
  return InferShapes(g);
}

std::string Pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %%", 100.0 * x);
  return buf;
}

std::string JoinNames(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
  return s;
}

// What the pass decided for one group root.
struct GroupChoice {
  std::vector<int> producers;  // indices into analysis.producers
  int64_t width = 0, kept = 0;
  std::string skip_reason;     // non-empty: left alone
  std::vector<double> score;
};

class PrunePass : public Pass {
 public:
  explicit PrunePass(PruneConfig cfg) : cfg_(std::move(cfg)) {}
  std::string name() const override { return "prune"; }

  StatusOr<PassReport> Run(Graph& g, const PassContext& ctx) override {
    PassReport rep;
    rep.pass = "prune";
    rep.config = cfg_.spec;
    WH_RETURN_IF_ERROR(Reinfer(g).WithContext("--prune: input graph"));
    WH_RETURN_IF_ERROR(cfg_.select.Check(g, {"Gemm", "MatMul", "Conv"}));
    const bool data_criterion =
        cfg_.criterion == "activation" || cfg_.criterion == "reconstruction" || cfg_.criterion == "wanda";
    const bool need_calib = data_criterion || cfg_.compensate == 1;
    if (need_calib && !ctx.calibration)
      return InvalidArgument(std::string("--prune: ") +
                             (data_criterion ? "criterion=" + cfg_.criterion : std::string("compensate=1")) +
                             " needs calibration samples: pass --calibration-data SPEC");
    const bool compensate = cfg_.compensate == 1 || (cfg_.compensate < 0 && ctx.calibration);

    WH_ASSIGN_OR_RETURN(ChannelAnalysis a, prune::Analyze(g));
    WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
    const size_t original_nodes = g.nodes().size();
    std::vector<int64_t> macs_before(original_nodes), params_before(original_nodes);
    for (size_t i = 0; i < original_nodes; ++i) {
      macs_before[i] = NodeMacs(g, g.nodes()[i]);
      params_before[i] = NodeParams(g, g.nodes()[i]);
    }

    std::map<int, GroupChoice> groups;
    for (int root : a.Roots()) groups[root] = Choose(g, a, root, &rep);

    // Calibration statistics of every value a pruned group's consumers read.
    std::map<int, int> value_axes;
    for (const prune::Edit& e : a.edits) {
      if (e.kind != EditKind::kConsumerRows) continue;
      const prune::ChannelMap& m = *a.maps[static_cast<size_t>(e.value)];
      for (const prune::Segment& s : m.segs)
        if (s.group >= 0 && groups.at(a.Root(s.group)).skip_reason.empty()) value_axes[e.value] = m.axis;
    }
    std::map<int, prune::ValueStats> stats;
    if ((cfg_.criterion == "activation" || cfg_.criterion == "wanda" || compensate) && ctx.calibration) {
      auto st = prune::CollectStats(g, value_axes, *ctx.calibration, ctx);
      if (!st.ok()) return st.status().WithContext("--prune: running the calibration data '" + ctx.calibration->description + "'");
      stats = std::move(st).value();
    }

    prune::PrunePlan plan;
    const bool reconstruct = cfg_.criterion == "reconstruction";
    std::map<int, InputGram> grams;
    prune::ReconstructionSetup setup;
    if (reconstruct) {
      setup = prune::FindReconstructableConsumers(g, a);
      auto gr = CollectInputGrams(g, setup.consumers, *ctx.calibration, ctx, "prune: reconstruction statistics");
      if (!gr.ok()) return gr.status().WithContext("--prune: running the calibration data '" + ctx.calibration->description + "'");
      grams = std::move(gr).value();
    }
    int fallback_groups = 0;
    for (auto& [root, gc] : groups) {
      if (!gc.skip_reason.empty()) continue;
      if (reconstruct) {
        bool voted = false;
        for (const prune::Edit& e : a.edits)
          if (e.kind == EditKind::kConsumerRows && grams.count(e.node))
            for (const prune::Segment& sg : a.maps[static_cast<size_t>(e.value)]->segs)
              voted |= sg.group >= 0 && a.Root(sg.group) == root;
        if (voted) {
          plan.keep[root] = prune::SelectByReconstruction(g, a, root, gc.width, gc.kept, grams);
          continue;
        }
        ++fallback_groups;  // no consumer to re-fit: weight norms decide
      }
      gc.score = Scores(g, a, root, gc, stats);
      std::vector<int64_t> idx(static_cast<size_t>(gc.width));
      std::iota(idx.begin(), idx.end(), 0);
      // The scores by name: C++17 lambdas may not capture a structured binding (clang < 16 refuses).
      const std::vector<double>& score = gc.score;
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t x, int64_t y) {
        return score[static_cast<size_t>(x)] > score[static_cast<size_t>(y)];
      });
      std::vector<bool> keep(static_cast<size_t>(gc.width), false);
      for (int64_t i = 0; i < gc.kept; ++i) keep[static_cast<size_t>(idx[static_cast<size_t>(i)])] = true;
      plan.keep[root] = std::move(keep);
    }
    std::set<int> refit_values;  // consumed values whose readers were re-fitted (their bias absorbs the mean)
    if (reconstruct) {
      WH_ASSIGN_OR_RETURN(std::vector<int> refit,
                          prune::RefitConsumers(g, a, plan.keep, setup.consumers, *ctx.calibration, ctx));
      for (int ni : refit) refit_values.insert(g.nodes()[static_cast<size_t>(ni)].inputs[0]);
      rep.notes.push_back("reconstruction: " + std::to_string(refit.size()) + " consumer(s) re-fitted by least squares on " +
                          std::to_string(ctx.calibration->size()) + " calibration samples" +
                          (fallback_groups ? "; " + std::to_string(fallback_groups) +
                                                 " group(s) without a re-fittable consumer chosen by l1"
                                           : std::string()));
    }
    if (compensate)
      for (const auto& [id, vs] : stats)
        if (!refit_values.count(id)) plan.value_means[id] = vs.mean;

    WH_ASSIGN_OR_RETURN(std::vector<std::string> notes, prune::ApplyPrune(g, a, plan));
    Status s = Reinfer(g);
    if (!s.ok()) return Internal("--prune produced a graph that does not infer (a bug in the pass): " + s.message());
    Report(g, a, groups, plan, order, macs_before, params_before, original_nodes, &rep);
    for (auto& n : notes) rep.notes.push_back(std::move(n));
    Summarize(g, groups, compensate, macs_before, &rep);
    return rep;
  }

 private:
  GroupChoice Choose(const Graph& g, const ChannelAnalysis& a, int root, PassReport* rep) const {
    GroupChoice gc;
    gc.producers = a.ProducersOf(root);
    gc.width = a.producers[static_cast<size_t>(gc.producers[0])].width;
    std::vector<std::string> reasons = a.Reasons(root);
    std::vector<std::string> excluded;
    std::optional<double> ratio;
    std::optional<int64_t> keep, round;
    int overrides = 0;
    for (int pi : gc.producers) {
      const std::string& nm = g.nodes()[static_cast<size_t>(a.producers[static_cast<size_t>(pi)].node)].name;
      if (cfg_.select.excluded(nm)) excluded.push_back(nm);
      auto it = cfg_.layers.find(nm);
      if (it == cfg_.layers.end()) continue;
      ++overrides;
      // Several overrides in one coupled group: the smallest ratio, largest keep, finest round.
      if (it->second.ratio) ratio = std::min(ratio.value_or(1.0), *it->second.ratio);
      if (it->second.keep) keep = std::max(keep.value_or(0), *it->second.keep);
      if (it->second.round) round = std::min(round.value_or(INT64_MAX), *it->second.round);
    }
    if (overrides > 1)
      rep->notes.push_back("coupled group of " + std::to_string(gc.producers.size()) +
                           " producers has several layer= overrides; the most conservative was used");
    // Heads are coarse units: they take heads= (default ratio) and are not rounded (round=1).
    const bool heads = a.producers[static_cast<size_t>(gc.producers[0])].head_dim > 0;
    const double base_ratio = heads ? cfg_.heads.value_or(cfg_.ratio) : cfg_.ratio;
    const int64_t base_round = heads ? 1 : cfg_.round;
    gc.kept = KeptCount(gc.width, ratio.value_or(base_ratio), keep, round.value_or(base_round));
    if (!reasons.empty()) {
      gc.skip_reason = reasons[0];
      for (size_t i = 1; i < reasons.size() && i < 3; ++i) gc.skip_reason += "; " + reasons[i];
      if (reasons.size() > 3) gc.skip_reason += "; (" + std::to_string(reasons.size() - 3) + " more)";
    } else if (!excluded.empty()) {
      gc.skip_reason = "excluded (exclude=" + excluded[0] + ")";
    } else if (gc.kept >= gc.width) {
      gc.skip_reason = "nothing to remove: ratio " + std::to_string(ratio.value_or(base_ratio)).substr(0, 5) +
                       " of " + std::to_string(gc.width) + (heads ? " heads" : " units") +
                       " rounds to keeping all (round=" + std::to_string(round.value_or(base_round)) + ")";
    }
    return gc;
  }

  std::vector<double> Scores(const Graph& g, const ChannelAnalysis& a, int root, const GroupChoice& gc,
                             const std::map<int, prune::ValueStats>& stats) const {
    std::vector<double> score(static_cast<size_t>(gc.width), 0.0);
    if (cfg_.criterion == "wanda" || cfg_.criterion == "group") {
      // wanda: |W|·||x|| over the unit's outgoing rows; group: |W| of the whole coupled group
      // (every producer's incoming columns and every consumer's rows, LLM-Pruner's group
      // magnitude). Either falls back to l1 for a group no consumer scores.
      score = prune::ConsumerRowScores(g, a, root, gc.width, cfg_.criterion == "wanda" ? &stats : nullptr);
      double total = 0;
      for (double v : score) total += v;
      if (cfg_.criterion == "wanda" && total > 0) return score;
      for (int pi : gc.producers) {
        std::vector<double> w = prune::WeightScores(g, a.producers[static_cast<size_t>(pi)], false);
        for (size_t i = 0; i < w.size(); ++i) score[i] += w[i];
      }
      return score;
    }
    if (cfg_.criterion != "activation") {
      for (int pi : gc.producers) {
        std::vector<double> s = prune::WeightScores(g, a.producers[static_cast<size_t>(pi)], cfg_.criterion == "l2");
        for (size_t i = 0; i < s.size(); ++i) score[i] += s[i];
      }
      return score;
    }
    // Mean |activation| of each unit over every value its consumers read (a unit owning a
    // block of positions takes the block's mean).
    for (const auto& [id, vs] : stats) {
      const prune::ChannelMap& m = *a.maps[static_cast<size_t>(id)];
      int64_t offset = 0;
      for (const prune::Segment& s : m.segs) {
        if (s.group >= 0 && a.Root(s.group) == root)
          for (int64_t c = 0; c < s.channels; ++c) {
            double sum = 0;
            for (int64_t b = 0; b < s.block; ++b) sum += vs.mean_abs[static_cast<size_t>(offset + c * s.block + b)];
            score[static_cast<size_t>(c)] += sum / static_cast<double>(s.block);
          }
        offset += s.channels * s.block;
      }
    }
    return score;
  }

  void Report(const Graph& g, const ChannelAnalysis& a, const std::map<int, GroupChoice>& groups,
              const prune::PrunePlan& plan, const std::vector<int>& order, const std::vector<int64_t>& macs_before,
              const std::vector<int64_t>& params_before, size_t original_nodes, PassReport* rep) const {
    std::vector<int64_t> macs_after(original_nodes), params_after(original_nodes);
    for (size_t i = 0; i < original_nodes; ++i) {
      macs_after[i] = NodeMacs(g, g.nodes()[i]);
      params_after[i] = NodeParams(g, g.nodes()[i]);
    }
    // Nodes the rewrite added (a MatMul's compensation Add) count with the node they follow.
    for (size_t i = original_nodes; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      int p = n.inputs.empty() || n.inputs[0] < 0 ? -1 : g.value(n.inputs[0]).producer;
      if (p >= 0 && static_cast<size_t>(p) < original_nodes) params_after[static_cast<size_t>(p)] += NodeParams(g, n);
    }
    auto kept_of = [&](int value) {
      const prune::ChannelMap& m = *a.maps[static_cast<size_t>(value)];
      return std::make_pair(m.positions(), static_cast<int64_t>(prune::KeptPositions(a, m, plan.keep).size()));
    };
    std::map<int, int> producer_of_node;  // node -> index into a.producers
    for (size_t i = 0; i < a.producers.size(); ++i) producer_of_node[a.producers[i].node] = static_cast<int>(i);
    // Constants pruned along (BN, elementwise operands) count with their group's first producer.
    std::map<int, std::pair<int64_t, int64_t>> along;  // producer node -> params (before, after)
    std::map<int, std::string> detail;                 // node -> what its inputs / depthwise lost
    std::map<int, int> depthwise;                      // depthwise node -> group's first producer node
    std::set<int> counted;
    for (const prune::Edit& e : a.edits) {
      auto [before, after] = kept_of(e.value);
      if (e.kind == EditKind::kConsumerRows) {
        if (after < before)
          detail[e.node] = "inputs " + std::to_string(before) + " -> " + std::to_string(after) + " (pruned upstream)";
        continue;
      }
      int owner = -1;
      for (const prune::Segment& s : a.maps[static_cast<size_t>(e.value)]->segs)
        if (s.group >= 0 && owner < 0) owner = a.producers[static_cast<size_t>(groups.at(a.Root(s.group)).producers[0])].node;
      if (owner < 0) continue;
      if (e.kind == EditKind::kDepthwise) {
        depthwise[e.node] = owner;
        detail[e.node] = "depthwise, follows '" + g.nodes()[static_cast<size_t>(owner)].name + "': kept " +
                         std::to_string(after) + " of " + std::to_string(before) + " channels";
        continue;
      }
      if (!counted.insert(e.node).second) continue;
      auto& pa = along[owner];
      pa.first += params_before[static_cast<size_t>(e.node)];
      pa.second += params_after[static_cast<size_t>(e.node)];
    }
    for (int ni : order) {
      const Node& n = g.nodes()[static_cast<size_t>(ni)];
      if (n.op_type != "Gemm" && n.op_type != "MatMul" && n.op_type != "Conv") continue;
      LayerReport lr;
      lr.node = n.name;
      lr.op_type = n.op_type;
      const size_t i = static_cast<size_t>(ni);
      lr.macs_before = macs_before[i];
      lr.macs_after = macs_after[i];
      lr.params_before = params_before[i] + (along.count(ni) ? along[ni].first : 0);
      lr.params_after = params_after[i] + (along.count(ni) ? along[ni].second : 0);
      auto pit = producer_of_node.find(ni);
      const Producer* prod = pit != producer_of_node.end() ? &a.producers[static_cast<size_t>(pit->second)] : nullptr;
      const std::string unit = n.op_type == "Conv"                 ? "channels"
                               : prod && prod->unit_heads > 1      ? "key/value groups of " +
                                                                    std::to_string(prod->unit_heads) + " query heads"
                               : prod && prod->head_dim > 0        ? "attention heads"
                                                                   : "units";
      if (pit != producer_of_node.end()) {
        const GroupChoice& gc = groups.at(a.Root(a.producers[static_cast<size_t>(pit->second)].group));
        lr.full_setting = gc.width;
        lr.setting = gc.skip_reason.empty() ? gc.kept : gc.width;
        if (gc.skip_reason.empty()) {
          lr.action = "prune";
          lr.detail = "kept " + std::to_string(gc.kept) + " of " + std::to_string(gc.width) + " " + unit;
        } else {
          lr.action = "skipped";
          lr.reason = gc.skip_reason;
        }
        if (gc.producers.size() > 1) {
          std::vector<std::string> others;
          for (int q : gc.producers)
            if (q != pit->second) others.push_back(g.nodes()[static_cast<size_t>(a.producers[static_cast<size_t>(q)].node)].name);
          lr.detail += std::string(lr.detail.empty() ? "" : " ") + "(coupled with " + JoinNames(others) + ")";
        }
      } else if (depthwise.count(ni)) {
        lr.action = "prune";
      } else {
        lr.action = "skipped";
        auto it = a.not_producer.find(ni);
        lr.reason = it != a.not_producer.end() ? it->second : "not prunable";
      }
      if (detail.count(ni)) lr.detail += std::string(lr.detail.empty() ? "" : "; ") + detail[ni];
      rep->layers.push_back(std::move(lr));
    }
  }

  void Summarize(const Graph& g, const std::map<int, GroupChoice>& groups, bool compensate,
                 const std::vector<int64_t>& macs_before, PassReport* rep) const {
    int64_t units = 0, removed = 0;
    int pruned_groups = 0;
    for (const auto& [root, gc] : groups) {
      if (!gc.skip_reason.empty()) continue;
      units += gc.width;
      removed += gc.width - gc.kept;
      ++pruned_groups;
    }
    int64_t mb = 0, ma = 0;
    // Saturated sums: NodeMacs saturates at INT64_MAX on hostile dims.
    auto add = [](int64_t& acc, int64_t v) {
      if (__builtin_add_overflow(acc, v, &acc)) acc = INT64_MAX;
    };
    for (int64_t m : macs_before) add(mb, m);
    for (const Node& n : g.nodes()) add(ma, NodeMacs(g, n));
    const size_t skipped = groups.size() - static_cast<size_t>(pruned_groups);
    rep->notes.insert(rep->notes.begin(),
                      "removed " + std::to_string(removed) + " of " + std::to_string(units) + " units (" +
                          Pct(units ? static_cast<double>(removed) / static_cast<double>(units) : 0) + ") in " +
                          std::to_string(pruned_groups) + " pruned group(s), " + std::to_string(skipped) +
                          " skipped; criterion " + cfg_.criterion + ", round=" + std::to_string(cfg_.round) +
                          " (nearest), bias compensation " + (compensate ? "on" : "off") + "; MACs " +
                          std::to_string(mb) + " -> " + std::to_string(ma) +
                          (mb ? " (-" + Pct(1.0 - static_cast<double>(ma) / static_cast<double>(mb)) + ")" : ""));
  }

  PruneConfig cfg_;
};

}  // namespace

StatusOr<std::unique_ptr<Pass>> MakePrunePass(PassOptions options) {
  PruneConfig cfg;
  cfg.spec = options.spec();
  WH_ASSIGN_OR_RETURN(cfg.ratio, options.GetDouble("ratio", 0.3, 0.0, 1.0));
  if (cfg.ratio >= 1.0) return InvalidArgument("--prune: ratio=1 would remove every unit; expected 0 <= ratio < 1");
  if (options.Has("heads")) {
    WH_ASSIGN_OR_RETURN(double h, options.GetDouble("heads", 0, 0.0, 1.0));
    if (h >= 1.0) return InvalidArgument("--prune: heads=1 would remove every attention head; expected 0 <= heads < 1");
    cfg.heads = h;
  }
  WH_ASSIGN_OR_RETURN(cfg.criterion,
                      options.GetChoice("criterion", "l1", {"l1", "l2", "activation", "reconstruction", "group", "wanda"}));
  WH_ASSIGN_OR_RETURN(cfg.round, options.GetInt("round", 8, 1, 1 << 20));
  WH_ASSIGN_OR_RETURN(cfg.select, LayerSelection::Parse(options));
  if (options.Has("compensate")) {
    WH_ASSIGN_OR_RETURN(int64_t c, options.GetInt("compensate", 0, 0, 1));
    cfg.compensate = static_cast<int>(c);
  }
  for (auto& [name, lo] : options.layers()) {
    LayerOverride o;
    if (lo.Has("ratio") && lo.Has("keep"))
      return InvalidArgument("--prune layer=" + name + ": give ratio or keep, not both");
    if (lo.Has("ratio")) {
      WH_ASSIGN_OR_RETURN(double r, lo.GetDouble("ratio", 0, 0.0, 1.0));
      if (r >= 1.0) return InvalidArgument("--prune layer=" + name + ": ratio=1 would remove every unit; expected 0 <= ratio < 1");
      o.ratio = r;
    }
    if (lo.Has("keep")) {
      WH_ASSIGN_OR_RETURN(int64_t k, lo.GetInt("keep", 0, 1, INT64_MAX));
      o.keep = k;
    }
    if (lo.Has("round")) {
      WH_ASSIGN_OR_RETURN(int64_t r, lo.GetInt("round", 8, 1, 1 << 20));
      o.round = r;
    }
    cfg.layers[name] = o;
  }
  WH_RETURN_IF_ERROR(options.Finish());
  return std::unique_ptr<Pass>(std::make_unique<PrunePass>(std::move(cfg)));
}

const char* PrunePassHelp() {
  return "--prune KEY=VALUE,...  remove hidden units: Gemm/MatMul output columns and Conv output channels,\n"
         "    with the matching rows/channels of every consumer (Gemm, MatMul, Conv, Flatten blocks), the\n"
         "    BatchNormalization entries, depthwise convs and elementwise constants in between. Producers\n"
         "    coupled by Add/Sum/Mul (residuals) are pruned with one mask; Concat inputs keep their own.\n"
         "    Multi-head attention loses whole heads: the heads' Q/K/V projection columns, the output\n"
         "    projection's rows and the head counts of the head Reshapes (fused or separate Q/K/V).\n"
         "    Grouped-query attention (decoders) loses whole key/value groups, a key/value head with its\n"
         "    query heads, and the KV cache inputs/outputs (past_key_values.*, present.*) shrink with them.\n"
         "    Groups reaching a graph output, any other Reshape/Transpose, a grouped conv or an unknown op\n"
         "    are skipped with the reason (so the last layer is never pruned).\n"
         "  ratio=R        fraction of each group's current units to remove, 0 <= R < 1 (default 0.3).\n"
         "                 Relative to the width the model has now: running the pass twice prunes twice;\n"
         "                 ratio=0 and layer=NAME:keep=N are idempotent. Nothing is stored in the model.\n"
         "  heads=R        fraction of each attention block's heads to remove, 0 <= R < 1 (default: ratio);\n"
         "                 heads are never rounded (round= applies to units and channels).\n"
         "  criterion=C    l1 | l2: norm of a unit's incoming weights, times the scale of a BatchNormalization\n"
         "                 right after it; activation: mean |output| on --calibration-data; reconstruction:\n"
         "                 units whose removal changes the consumers' outputs least on --calibration-data,\n"
         "                 then the consumers' weights and biases re-fitted by least squares (ThiNet-style);\n"
         "                 group: |weights| of the whole coupled group, the producers' columns and the\n"
         "                 consumers' rows (LLM-Pruner's group magnitude: a SwiGLU MLP's gate, up and down);\n"
         "                 wanda: |W|·||x|| of the unit's outgoing rows on --calibration-data (Wanda /\n"
         "                 LLM-Pruner first-order estimate of what removing the unit takes away).\n"
         "                 Default l1.\n"
         "  round=N        kept counts are rounded to the nearest multiple of N (ties up), never to 0\n"
         "                 (at least N) and never above the original; round=1 turns it off (default 8).\n"
         "  compensate=0|1 add the removed units' mean output (on the calibration data) times the consumer\n"
         "                 weights to the consumer's bias (default 1 when --calibration-data is given).\n"
         "  exclude=NAME,...        producer node names to leave alone.\n"
         "  layer=NAME:ratio=R      per-layer ratio; layer=NAME:keep=N keeps exactly N units;\n"
         "  layer=NAME:round=N      per-layer rounding. Unknown names are errors.";
}

}  // namespace whittle
