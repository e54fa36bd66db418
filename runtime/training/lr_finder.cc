#include "runtime/training/lr_finder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <utility>

#include "lib/ir/domain.h"
#include "lib/ir/format.h"

namespace whittle::training {
namespace {

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool IsSvdFactorName(const std::string& name) {
  // The names --svd gives its factors (passes/svd/low_rank_layer.cc).
  return name.find("/svd_u") != std::string::npos || name.find("/svd_v") != std::string::npos;
}

// The kind a node's reading of a weight in `slot` makes it.
std::string KindOfUse(const Graph& g, const Node& n, size_t slot) {
  if (n.domain == kWhittleDomain && n.op_type == "CodebookMatMul" && slot == 1) return "codebook";
  if (n.domain == kWhittleDomain && n.op_type == "BlockCirculantMatMul" && slot == 1) return "circulant";
  if (n.domain.empty() && (n.op_type == "MatMul" || n.op_type == "Gemm") && slot <= 1) {
    // The two halves of a factorized layer: the first is '<node>/svd_u', the second keeps the
    // node's name and reads the first's output '<node>/svd_u_out'.
    if (EndsWith(n.name, "/svd_u")) return "low-rank";
    for (int i : n.inputs)
      if (i >= 0 && EndsWith(g.value(i).name, "/svd_u_out")) return "low-rank";
  }
  return "";
}

}  // namespace

std::vector<std::string> ParamKinds(const Graph& student, const std::vector<std::string>& params,
                                    const std::vector<QuantizedParam>& quantized,
                                    const std::vector<BinaryParam>& binary) {
  std::map<std::string, std::string> stored_of;
  for (const QuantizedParam& q : quantized) stored_of[q.latent] = q.stored;
  std::vector<std::string> kinds;
  for (const std::string& p : params) {
    bool is_binary = false;
    for (const BinaryParam& b : binary) is_binary = is_binary || p == b.latent || p == b.alpha;
    if (is_binary) {
      kinds.push_back("binary");
      continue;
    }
    const auto q = stored_of.find(p);
    const std::string name = q == stored_of.end() ? p : q->second;
    const int v = student.FindValue(name);
    std::string kind;
    // The readers of the weight, and through a DequantizeLinear those of its float values.
    std::vector<int> values{v};
    for (size_t i = 0; i < values.size() && kind.empty(); ++i) {
      if (values[i] < 0) continue;
      for (const Node& n : student.nodes())
        for (size_t s = 0; s < n.inputs.size(); ++s) {
          if (n.inputs[s] != values[i]) continue;
          if (n.domain.empty() && n.op_type == "DequantizeLinear" && s == 0 && !n.outputs.empty()) {
            values.push_back(n.outputs[0]);
            continue;
          }
          const std::string k = KindOfUse(student, n, s);
          if (!k.empty() && (k != "low-rank" || kind.empty())) kind = k;
        }
    }
    const bool matrix = v >= 0 && student.value(v).initializer && student.value(v).initializer->rank() >= 2;
    if (kind.empty() && matrix && IsSvdFactorName(name)) kind = "low-rank";
    if (kind == "low-rank" && !matrix) kind.clear();  // a factor's bias trains as any bias
    kinds.push_back(kind.empty() ? "dense" : kind);
  }
  return kinds;
}

namespace {

// The loss of each batch at the trainer's current state, nothing trained (every param frozen):
// the baseline the sweeps are measured against.
StatusOr<std::vector<double>> BaselineLosses(Trainer& t, const Dataset& train, const LrFinderOptions& o,
                                             const std::vector<std::vector<int64_t>>& batches) {
  t.set_lr_scales(std::vector<float>(t.params().size(), 0.f));
  std::vector<double> base;
  for (int i = 0; i < o.steps; ++i) {
    WH_ASSIGN_OR_RETURN(StepResult r, t.StepRows(train, batches[static_cast<size_t>(i) % batches.size()], 0.f));
    if (!r.finite) return InvalidArgument("lr=auto: the student's loss is not finite before any step");
    base.push_back(r.loss);
  }
  return base;
}

// One group's sweep from the trainer's current state (restored by the caller). Each batch's loss
// is measured against the same batch's loss before training (base): the batches' own spread
// (one batch is simply harder than another) would otherwise swamp the small early gains and put
// the lowest point anywhere on the flat start of the curve.
StatusOr<GroupRate> Sweep(Trainer& t, const Dataset& train, const LrFinderOptions& o,
                          const std::vector<std::vector<int64_t>>& batches, const std::vector<double>& base) {
  GroupRate g;
  double level = 0;  // the mean baseline loss: the curve is level + the smoothed difference
  for (double b : base) level += b / static_cast<double>(base.size());
  const double ratio = std::pow(static_cast<double>(o.max_lr) / o.min_lr, 1.0 / std::max(1, o.steps - 1));
  double ema = 0, best = HUGE_VAL;
  double prev_lr = 0;  // a step's loss is that of the weights the previous step's rate made
  for (int i = 0; i < o.steps; ++i) {
    const double lr = o.min_lr * std::pow(ratio, i);
    WH_ASSIGN_OR_RETURN(StepResult r, t.StepRows(train, batches[static_cast<size_t>(i) % batches.size()],
                                                 t.StepRate(static_cast<float>(lr))));
    g.steps = i + 1;
    if (!r.finite) break;
    ema = o.beta * ema + (1 - o.beta) * (r.loss - base[static_cast<size_t>(i)]);
    const double smoothed = level + ema / (1 - std::pow(o.beta, i + 1));
    if (i == 0) g.start_loss = level;
    if (i > 0 && smoothed < best) {
      best = smoothed;
      g.lr_at_min = static_cast<float>(prev_lr);
    }
    if (i > 0 && smoothed > o.stop_factor * best) break;
    prev_lr = lr;
  }
  if (!(best < HUGE_VAL)) g.lr_at_min = o.min_lr;  // diverged at once
  g.min_loss = std::isfinite(best) ? best : g.start_loss;
  // A tenth of the rate at the lowest smoothed loss (fastai's "lr_min" suggestion) rather than the
  // point of steepest descent: the slope of a 100-step curve of noisy batch losses is itself
  // noise, while the lowest point is stable, and a tenth of it sits safely below the rates where
  // the loss starts to climb (which the moving average shows a few steps late).
  g.lr = std::clamp(g.lr_at_min / 10.f, o.min_lr, o.max_lr);
  return g;
}

}  // namespace

StatusOr<LrFinderResult> FindLearningRates(Trainer& t, const Dataset& train, const LrFinderOptions& o) {
  if (!(o.min_lr > 0 && o.max_lr > o.min_lr && o.steps >= 2))
    return InvalidArgument("lr=auto: the range test needs 0 < min_lr < max_lr and at least 2 steps");
  if (train.size() < 1) return InvalidArgument("lr=auto: the training data is empty");
  const TrainOptions& opts = t.options();
  // The batches: the same ones for every group (so the groups' curves compare), drawn from a
  // seeded shuffle as an epoch would, the same on every rank.
  std::vector<int64_t> order(static_cast<size_t>(train.size()));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(opts.seed * 1000003ULL + 0x5EED);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t b0 = 0; b0 < train.size() && static_cast<int>(batches.size()) < o.steps; b0 += opts.batch)
    batches.emplace_back(order.begin() + b0, order.begin() + std::min(train.size(), b0 + opts.batch));
  const std::vector<std::string>& kinds = t.param_kinds();
  std::vector<std::string> groups;
  for (const char* k : {"dense", "low-rank", "codebook", "circulant", "binary"})
    if (std::find(kinds.begin(), kinds.end(), k) != kinds.end()) groups.push_back(k);
  const Trainer::State start = t.Snapshot();
  const std::vector<float> scales_before = t.lr_scales();
  LrFinderResult res;
  StatusOr<std::vector<double>> base = BaselineLosses(t, train, o, batches);
  t.Restore(start);
  if (!base.ok()) {
    t.set_lr_scales(scales_before);
    return base.status();
  }
  for (const std::string& kind : groups) {
    std::vector<float> scales(kinds.size(), 0.f);
    int count = 0;
    for (size_t k = 0; k < kinds.size(); ++k)
      if (kinds[k] == kind) scales[k] = 1.f, ++count;
    t.set_lr_scales(scales);
    StatusOr<GroupRate> g = Sweep(t, train, o, batches, *base);
    t.Restore(start);
    if (!g.ok()) {
      t.set_lr_scales(scales_before);
      return g.status().WithContext("lr=auto: the range test of the " + kind + " params");
    }
    g->kind = kind;
    g->params = count;
    res.groups.push_back(*g);
  }
  for (const GroupRate& g : res.groups) res.lr = std::max(res.lr, g.lr);
  std::vector<float> scales(kinds.size(), 1.f);
  for (size_t k = 0; k < kinds.size(); ++k)
    for (const GroupRate& g : res.groups)
      if (g.kind == kinds[k]) scales[k] = g.lr / res.lr;
  t.set_lr(res.lr);
  t.set_lr_scales(scales);
  return res;
}

std::string LrFinderLine(const LrFinderResult& r, bool per_batch_256) {
  std::string s = "lr=auto (range test";
  s += per_batch_256 ? ", rates for batch 256):" : "):";
  for (size_t i = 0; i < r.groups.size(); ++i) {
    const GroupRate& g = r.groups[i];
    s += std::string(i ? "," : "") + " " + g.kind + " " + Fmt("%.3g", g.lr) + " (" + std::to_string(g.params) +
         " param" + (g.params == 1 ? "" : "s") + "; loss " + Fmt("%.3g", g.start_loss) + " -> lowest " +
         Fmt("%.3g", g.min_loss) + " at " + Fmt("%.3g", g.lr_at_min) + ")";
  }
  return s;
}

}  // namespace whittle::training
