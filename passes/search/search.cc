#include "passes/search/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>

#include "passes/cost.h"
#include "passes/search/optimizer.h"
#include "passes/search/sensitivity.h"
#include "runtime/evaluate.h"
#include "whittle/session.h"

namespace whittle::search {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string Eta(double seconds) {
  if (!(seconds >= 0) || seconds > 1e6) return "";
  const int s = static_cast<int>(seconds + 0.5);
  return "ETA " + (s >= 60 ? std::to_string(s / 60) + "m" + std::to_string(s % 60) + "s" : std::to_string(s) + "s");
}

// The CPU model, for latency figures that are only reused on the machine that measured them.
std::string CpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 1);
  return "unknown cpu";
}

// Median batch latency (ms) of g at `batch`.
StatusOr<double> Latency(const Graph& g, int64_t batch, int threads, const Dataset* samples, double seconds) {
  SessionOptions so;
  so.num_threads = threads;
  WH_ASSIGN_OR_RETURN(auto session, Session::FromGraph(g, so));
  BenchOptions bo;
  bo.batches = {batch};
  bo.warmup = 3;
  bo.min_iterations = 15;
  bo.min_seconds = seconds;
  WH_ASSIGN_OR_RETURN(std::vector<BenchResult> r, Benchmark(*session, bo, samples));
  return r.at(0).p50_ms;
}

struct Measured {
  int64_t bytes = 0, macs = 0;
  double latency_ms = -1;
};

// The search's state shared by its steps.
class Search {
 public:
  Search(const Graph& original, const SearchOptions& o, SearchObserver& obs)
      : original_(original), o_(o), obs_(obs) {}

  StatusOr<SearchResult> Run();

 private:
  Status Prepare();
  Status MeasureSensitivities();
  StatusOr<Sensitivity> MeasureOne(size_t layer, size_t choice);
  void MarkNoOp(size_t layer, size_t choice);
  double Cost(const Sensitivity& s) const;
  double Loss(const Sensitivity& s) const;
  StatusOr<Measured> Figures(const Graph& g);
  // Builds, (fine-tunes,) and evaluates a configuration; returns its index in report_.points.
  StatusOr<size_t> Evaluate(const Config& c, const std::string& how, double predicted);
  double PointCost(const SearchPointReport& p) const;
  Status Repair();
  // Size and MAC targets: the configuration's real figure, from the model built with cheap
  // settings (a few calibration samples, one k-means iteration: the sizes do not depend on them).
  StatusOr<double> RealCost(const Config& c);
  // Layers interact (pruning a layer's units shrinks its consumers, whose own savings the sums
  // count as if it had not): single-layer changes that lower the real figure while the predicted
  // loss stays within the budget, best first, until none is left or the build budget is spent.
  StatusOr<Config> Refine(Config c, double budget);
  void MarkPareto();

  const Graph& original_;
  const SearchOptions& o_;
  SearchObserver& obs_;
  SearchSpace space_;
  PassContext ctx_;
  std::optional<Scorer> calib_, eval_;
  std::optional<SensitivityCache> cache_;
  std::vector<std::vector<Sensitivity>> sens_;  // per layer, per choice (0: identity)
  std::vector<std::vector<Option>> options_;
  Measured base_;
  double base_latency_ = -1;
  SearchReport report_;
  std::map<Config, size_t> evaluated_;
  std::map<size_t, Config> configs_;
  std::map<size_t, Graph> graphs_;  // the best feasible one so far, by point index
  std::optional<size_t> best_;
  Dataset few_;  // the first calibration samples, for RealCost's builds
  std::shared_ptr<CalibrationCache> few_ranges_ = std::make_shared<CalibrationCache>();
  std::map<Config, double> real_cost_;
};

StatusOr<double> Search::RealCost(const Config& c) {
  if (auto it = real_cost_.find(c); it != real_cost_.end()) return it->second;
  PassContext cheap = ctx_;
  cheap.progress = nullptr;
  cheap.calibration = &few_;
  cheap.calibration_cache = few_ranges_;
  BaseSpecs base = o_.base;
  base["cluster"] = base["cluster"].empty() ? "iterations=1" : base["cluster"] + ",iterations=1";
  WH_ASSIGN_OR_RETURN(Graph g, ApplyConfig(original_, space_, c, base, cheap));
  const GraphCost gc = ComputeCost(g);
  const double v = static_cast<double>(o_.target == Target::kMacs ? gc.macs : gc.param_bytes);
  real_cost_[c] = v;
  return v;
}

StatusOr<Config> Search::Refine(Config c, double budget) {
  // Storage forms alone barely interact in size; structural changes (prune, svd) do.
  if (o_.target == Target::kLatency || (!o_.families.count("prune") && !o_.families.count("svd"))) return c;
  double loss = 0;
  for (size_t i = 0; i < c.size(); ++i) loss += options_[i][static_cast<size_t>(c[i])].loss;
  WH_ASSIGN_OR_RETURN(double cur, RealCost(c));
  int builds = 0;
  const int max_builds = 400;
  for (int round = 0; round < 8 && builds < max_builds; ++round) {
    double best_gain = 0;
    size_t bi = 0, bj = 0;
    for (size_t i = 0; i < c.size() && builds < max_builds; ++i)
      for (size_t j = 0; j < options_[i].size() && builds < max_builds; ++j) {
        if (static_cast<int>(j) == c[i] || (j > 0 && !sens_[i][j].valid)) continue;
        const double nl = loss - options_[i][static_cast<size_t>(c[i])].loss + options_[i][j].loss;
        if (nl > budget + 1e-9) continue;
        Config t = c;
        t[i] = static_cast<int>(j);
        if (!real_cost_.count(t)) ++builds;
        obs_.Progress("[search] refining with real sizes", builds, max_builds, "");
        WH_ASSIGN_OR_RETURN(double rc, RealCost(t));
        // Ties in the figure go to the smaller predicted loss.
        const double gain = (cur - rc) + (rc == cur ? 1e-9 * (options_[i][static_cast<size_t>(c[i])].loss - options_[i][j].loss) : 0);
        if (gain > best_gain) best_gain = gain, bi = i, bj = j;
      }
    if (best_gain <= 0) break;
    loss += options_[bi][bj].loss - options_[bi][static_cast<size_t>(c[bi])].loss;
    c[bi] = static_cast<int>(bj);
    WH_ASSIGN_OR_RETURN(cur, RealCost(c));
  }
  obs_.Clear();
  return c;
}

// A structural change the passes declined (pruning the logits layer, a rank that saves nothing)
// leaves the same model as the storage form alone: it is not a choice of its own.
void Search::MarkNoOp(size_t i, size_t j) {
  const Choice& c = space_.choices[i][j];
  Sensitivity& s = sens_[i][j];
  if (!s.valid || (c.prune == 0 && c.svd == 0)) return;
  for (size_t k = 0; k < j; ++k) {
    const Choice& alone = space_.choices[i][k];
    if (alone.prune != 0 || alone.svd != 0 || alone.storage != c.storage) continue;
    const Sensitivity& a = sens_[i][k];
    if ((k == 0 || a.valid) && a.bytes == s.bytes && a.macs == s.macs) {
      s.valid = false;
      s.why = "the passes left the layer's size as " + alone.Key() + " alone gives";
    }
    return;
  }
}

double Search::Cost(const Sensitivity& s) const {
  switch (o_.target) {
    case Target::kSize: return s.bytes;
    case Target::kMacs: return s.macs;
    case Target::kLatency: return std::isnan(s.latency_ms) ? 0 : s.latency_ms;
  }
  return 0;
}

// The predicted drop of a choice: its measured drop on the calibration data (never negative),
// plus a quarter of the predictions it flipped when the score is accuracy against labels, so
// that choices which change many predictions without moving the accuracy on few samples are not
// taken as free.
double Search::Loss(const Sensitivity& s) const {
  double loss = std::max(0.0, s.drop);
  if (calib_->kind() == MetricKind::kTop1) loss += 0.25 * std::max(0.0, s.flips);
  return loss;
}

StatusOr<Measured> Search::Figures(const Graph& g) {
  const GraphCost c = ComputeCost(g);
  Measured m;
  m.bytes = c.param_bytes;
  m.macs = c.macs;
  if (o_.target == Target::kLatency) {
    WH_ASSIGN_OR_RETURN(m.latency_ms, Latency(g, o_.latency_batch, o_.threads, o_.calibration, 0.3));
  }
  return m;
}

Status Search::Prepare() {
  if (!o_.calibration || o_.calibration->size() == 0)
    return InvalidArgument("--target needs --calibration-data (each layer's choices are measured on it)");
  if (!o_.eval || o_.eval->size() == 0) return InvalidArgument("--target needs --eval-data (the budget is measured on it)");
  if (!(o_.max_drop >= 0)) return InvalidArgument("--max-drop must be >= 0 percentage points");
  WH_ASSIGN_OR_RETURN(space_, MakeSearchSpace(original_, o_.families));
  few_ = *o_.calibration;
  const int64_t n = std::min<int64_t>(16, few_.size());
  few_.inputs = SliceBatch(few_.inputs, 0, n);
  for (auto& [name, t] : few_.named) t = SliceBatch(t, 0, n);
  if (few_.has_labels()) few_.labels = SliceBatch(few_.labels, 0, n);
  ctx_.calibration = o_.calibration;
  ctx_.num_threads = o_.threads;
  ctx_.seed = o_.seed;
  ctx_.calibration_cache = std::make_shared<CalibrationCache>();
  const Metric eval_metric = o_.metric.value_or(o_.eval->has_labels() ? MetricKind::kTop1 : MetricKind::kAgreement);
  const MetricKind eval_kind = eval_metric.kind;
  // Calibration data without labels is scored by agreement when the budget is top-1 accuracy.
  // The calibration scores only rank choices (the knapsack's budget adapts to the eval data's
  // measured drops), so they take the finest signal: per position rather than per sequence, and
  // agreement when the calibration data has no labels.
  const MetricKind calib_kind =
      (eval_kind == MetricKind::kTop1 && !o_.calibration->has_labels()) || eval_kind == MetricKind::kSequence ||
              eval_kind == MetricKind::kCtc
          ? MetricKind::kAgreement
          : eval_kind;
  obs_.Progress("[search] scoring the original model", 0, 0, "");
  auto e = Scorer::Make(original_, *o_.eval, eval_metric, o_.threads);
  if (!e.ok()) return e.status().WithContext("--eval-data");
  eval_ = std::move(e).value();
  auto c = Scorer::Make(original_, *o_.calibration, calib_kind, o_.threads);
  if (!c.ok()) return c.status().WithContext("--calibration-data");
  calib_ = std::move(c).value();
  report_.target = TargetName(o_.target);
  report_.metric = eval_metric.Name();
  report_.max_drop = o_.max_drop;
  report_.baseline = eval_->baseline();
  report_.cache_path = o_.cache_path;
  report_.latency_batch = o_.target == Target::kLatency ? o_.latency_batch : 0;
  report_.notes = space_.notes;
  WH_ASSIGN_OR_RETURN(base_, Figures(original_));
  base_latency_ = base_.latency_ms;
  std::string note;
  const std::string tag = CpuModel() + "|threads " + std::to_string(o_.threads) + "|batch " +
                          std::to_string(o_.latency_batch);
  // The space's revision too: what a choice builds may change between versions (v2: int8w by GPTQ).
  const std::string fingerprint = o_.fingerprint + " calibration metric " + MetricName(calib_->kind()) +
                                  " space " + kSearchSpaceRevision;
  WH_ASSIGN_OR_RETURN(SensitivityCache cache, SensitivityCache::Open(o_.cache_path, fingerprint, tag, &note));
  cache_ = std::move(cache);
  if (!note.empty()) report_.notes.push_back(note);
  obs_.Clear();
  return Status::Ok();
}

StatusOr<Sensitivity> Search::MeasureOne(size_t layer, size_t choice) {
  Config c(space_.layers.size(), 0);
  c[layer] = static_cast<int>(choice);
  Sensitivity s;
  PassContext quiet = ctx_;
  quiet.progress = nullptr;
  auto g = ApplyConfig(original_, space_, c, o_.base, quiet);
  if (!g.ok()) {
    s.valid = false;
    s.why = g.status().message();
    return s;
  }
  WH_ASSIGN_OR_RETURN(Score sc, calib_->Measure(*g));
  s.drop = calib_->baseline() - sc.value;
  s.flips = sc.flips;
  WH_ASSIGN_OR_RETURN(Measured m, Figures(*g));
  s.bytes = static_cast<double>(m.bytes - base_.bytes);
  s.macs = static_cast<double>(m.macs - base_.macs);
  if (o_.target == Target::kLatency) s.latency_ms = m.latency_ms - base_latency_;
  return s;
}

Status Search::MeasureSensitivities() {
  const auto t0 = Clock::now();
  size_t total = 0;
  for (const auto& ch : space_.choices) total += ch.size() - 1;
  sens_.assign(space_.layers.size(), {});
  size_t done = 0, measured = 0;
  double measured_seconds = 0;
  for (size_t i = 0; i < space_.layers.size(); ++i) {
    sens_[i].resize(space_.choices[i].size());
    for (size_t j = 1; j < space_.choices[i].size(); ++j, ++done) {
      const std::string key = space_.layers[i].node + "|" + space_.choices[i][j].Key();
      const Sensitivity* hit = cache_->Find(key);
      if (hit && (o_.target != Target::kLatency || !hit->valid || !std::isnan(hit->latency_ms))) {
        sens_[i][j] = *hit;
        ++report_.cached;
        continue;
      }
      const double per = measured ? measured_seconds / static_cast<double>(measured) : -1;
      obs_.Progress("[search] sensitivity", static_cast<int64_t>(done), static_cast<int64_t>(total),
                    space_.layers[i].node + " " + space_.choices[i][j].Key() +
                        (per >= 0 ? " " + Eta(per * static_cast<double>(total - done)) : ""));
      const auto t1 = Clock::now();
      WH_ASSIGN_OR_RETURN(sens_[i][j], MeasureOne(i, j));
      MarkNoOp(i, j);
      measured_seconds += Since(t1);
      ++measured;
      ++report_.measured;
      cache_->Put(key, sens_[i][j]);
      if (measured % 16 == 0) WH_RETURN_IF_ERROR(cache_->Save());
    }
  }
  if (measured) WH_RETURN_IF_ERROR(cache_->Save());
  obs_.Clear();
  report_.sensitivity_seconds = Since(t0);
  obs_.Line("[search] sensitivity: " + std::to_string(total) + " choices over " + std::to_string(space_.layers.size()) +
            " layers (" + std::to_string(report_.measured) + " measured, " + std::to_string(report_.cached) +
            " from the cache) in " + Fmt("%.1f", report_.sensitivity_seconds) + " s");
  options_.assign(space_.layers.size(), {});
  for (size_t i = 0; i < space_.layers.size(); ++i)
    for (size_t j = 0; j < sens_[i].size(); ++j) {
      const Sensitivity& s = sens_[i][j];
      // A refused choice costs "nothing saved", so the optimizer never takes it.
      options_[i].push_back(j == 0 || !s.valid ? Option{0, 0} : Option{Cost(s), Loss(s)});
    }
  return Status::Ok();
}

double Search::PointCost(const SearchPointReport& p) const {
  switch (o_.target) {
    case Target::kSize: return static_cast<double>(p.param_bytes);
    case Target::kMacs: return static_cast<double>(p.macs);
    case Target::kLatency: return p.latency_ms;
  }
  return 0;
}

StatusOr<size_t> Search::Evaluate(const Config& c, const std::string& how, double predicted) {
  if (auto it = evaluated_.find(c); it != evaluated_.end()) return it->second;
  const size_t index = report_.points.size();
  const std::string tag = "[search] configuration " + std::to_string(index + 1);
  obs_.Progress(tag + ": building", 0, 0, "");
  WH_ASSIGN_OR_RETURN(Graph g, ApplyConfig(original_, space_, c, o_.base, ctx_));
  SearchPointReport p;
  p.how = how;
  p.config = DescribeConfig(space_, c);
  p.predicted_drop = predicted;
  const std::string key = p.config;
  if (o_.recover && p.config != DescribeConfig(space_, Config(c.size(), 0))) {
    obs_.Clear();
    obs_.Line(tag + ": fine-tuning " + p.config);
    // A form the trainer cannot train yet (blocked int4/int8 weights) is evaluated as it is,
    // and the report says so; the search goes on with the other candidates.
    StatusOr<Graph> tuned = o_.recover(g, key);
    if (tuned.ok()) {
      g = std::move(tuned).value();
      p.finetuned = true;
    } else {
      const std::string why = tag + ": not fine-tuned (" + tuned.status().message() + "); evaluated as compressed";
      obs_.Line(why);
      report_.notes.push_back(why);
    }
  }
  obs_.Progress(tag + ": evaluating", 0, 0, "");
  WH_ASSIGN_OR_RETURN(Score sc, eval_->Measure(g));
  p.drop = eval_->baseline() - sc.value;
  WH_ASSIGN_OR_RETURN(Measured m, Figures(g));
  p.param_bytes = m.bytes;
  p.macs = m.macs;
  p.latency_ms = m.latency_ms;
  p.within_budget = p.drop <= o_.max_drop + 1e-9;
  obs_.Clear();
  std::string line = tag + ": drop " + Fmt("%.2f", p.drop) + " pp (predicted " + Fmt("%.2f", predicted) + "), ";
  if (o_.target == Target::kLatency)
    line += Fmt("%.3f", p.latency_ms) + " ms (" + Fmt("%.2f", base_latency_ / std::max(1e-9, p.latency_ms)) + "x faster)";
  else if (o_.target == Target::kMacs)
    line += std::to_string(p.macs) + " MACs (" + Fmt("%.2f", double(base_.macs) / std::max<int64_t>(1, p.macs)) + "x fewer)";
  else
    line += std::to_string(p.param_bytes) + " bytes (" +
            Fmt("%.2f", double(base_.bytes) / std::max<int64_t>(1, p.param_bytes)) + "x smaller)";
  line += p.within_budget ? ": within budget" : ": over budget";
  if (p.within_budget && (!best_ || PointCost(p) < PointCost(report_.points[*best_]))) {
    if (best_) graphs_.erase(*best_);
    best_ = index;
    graphs_[index] = std::move(g);
    line += " (best so far)";
  }
  obs_.Line(line);
  report_.points.push_back(p);
  evaluated_[c] = index;
  configs_[index] = c;
  return index;
}

// The cheapest configuration that missed the budget, its riskiest layer (largest predicted loss
// per unit of cost saved) stepped down to its next less lossy choice that still saves (or left
// alone), one layer at a time, each step evaluated for real.
Status Search::Repair() {
  std::optional<size_t> miss;
  for (size_t k = 0; k < report_.points.size(); ++k) {
    const SearchPointReport& p = report_.points[k];
    if (p.within_budget) continue;
    if (best_ && PointCost(p) >= PointCost(report_.points[*best_])) continue;
    if (!miss || PointCost(p) < PointCost(report_.points[*miss])) miss = k;
  }
  if (!miss) return Status::Ok();
  Config c = configs_[*miss];
  while (static_cast<int>(report_.points.size()) < o_.max_evals) {
    int worst = -1;
    double worst_ratio = -1;
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] == 0) continue;
      const Option& op = options_[i][static_cast<size_t>(c[i])];
      const double ratio = op.loss / std::max(1e-12, -op.cost);
      if (ratio > worst_ratio) worst_ratio = ratio, worst = static_cast<int>(i);
    }
    if (worst < 0) return Status::Ok();
    const size_t w = static_cast<size_t>(worst);
    const Option cur = options_[w][static_cast<size_t>(c[w])];
    int step = 0;  // the choice saving most among those with less predicted loss
    for (size_t j = 1; j < options_[w].size(); ++j) {
      const Option& o = options_[w][j];
      if (o.cost < 0 && o.loss < cur.loss && o.cost < options_[w][static_cast<size_t>(step)].cost)
        step = static_cast<int>(j);
    }
    c[w] = step;
    double predicted = 0;
    for (size_t i = 0; i < c.size(); ++i) predicted += options_[i][static_cast<size_t>(c[i])].loss;
    const std::string how = "repair: " + space_.layers[w].node + " " +
                            (step == 0 ? std::string("left alone") : "to " + space_.choices[w][static_cast<size_t>(step)].Key());
    WH_ASSIGN_OR_RETURN(size_t k, Evaluate(c, how, predicted));
    const SearchPointReport& p = report_.points[k];
    if (p.within_budget || (best_ && PointCost(p) >= PointCost(report_.points[*best_]))) return Status::Ok();
  }
  return Status::Ok();
}

void Search::MarkPareto() {
  for (SearchPointReport& p : report_.points) {
    p.pareto = true;
    for (const SearchPointReport& q : report_.points) {
      const bool no_worse = PointCost(q) <= PointCost(p) && q.drop <= p.drop;
      const bool better = PointCost(q) < PointCost(p) || q.drop < p.drop;
      if (&q != &p && no_worse && better) {
        p.pareto = false;
        break;
      }
    }
  }
}

StatusOr<SearchResult> Search::Run() {
  const auto t0 = Clock::now();
  WH_RETURN_IF_ERROR(Prepare());
  WH_RETURN_IF_ERROR(MeasureSensitivities());
  // The knapsack's budget moves by the measured drops: up while candidates stay within the budget,
  // down (a back-off) when one misses, by bisection between the two.
  double budget = o_.max_drop * (o_.recover ? o_.recovery : 1.0);
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  const int rounds = std::max(1, o_.max_evals - 2);  // two kept for the repair
  int stale = 0;  // budgets in a row that gave a configuration evaluated before
  for (int round = 0; round < rounds && stale < 24;) {
    Solution sol = Solve(options_, budget);
    WH_ASSIGN_OR_RETURN(Config refined, Refine(sol.pick, budget));
    std::string how = "knapsack, budget " + Fmt("%.3g", budget) + " pp";
    if (refined != sol.pick) {
      how += ", refined";
      sol.pick = refined;
      sol.loss = 0;
      for (size_t i = 0; i < refined.size(); ++i) sol.loss += options_[i][static_cast<size_t>(refined[i])].loss;
    }
    // Every choice the knapsack could take is taken: a larger budget changes nothing.
    bool all = true;
    for (size_t i = 0; i < options_.size() && all; ++i)
      for (size_t j = 1; j < options_[i].size(); ++j)
        if (options_[i][j].cost < options_[i][static_cast<size_t>(sol.pick[i])].cost) all = false;
    const bool seen = evaluated_.count(sol.pick) != 0;
    // A budget that gives a configuration measured before costs no evaluation: the budget moves
    // on by that measurement until it gives a new one.
    stale = seen ? stale + 1 : 0;
    if (!seen) ++round;
    WH_ASSIGN_OR_RETURN(size_t k, Evaluate(sol.pick, how, sol.loss));
    const SearchPointReport& p = report_.points[k];
    const double drop = std::max(p.drop, 0.0);
    double next;
    if (p.within_budget) {
      lo = std::max(lo, budget);
      if (all) break;
      next = budget * (seen ? 2.0 : std::clamp(o_.max_drop / std::max(drop, 0.05 * o_.max_drop + 1e-9), 1.25, 2.5));
    } else {
      hi = std::min(hi, budget);
      next = budget * (seen ? 0.5 : std::clamp(o_.max_drop / std::max(drop, 1e-9), 0.25, 0.8));
    }
    if (next >= hi || next <= lo) next = std::isinf(hi) ? 2 * std::max(lo, budget) : (lo > 0 ? std::sqrt(lo * hi) : hi / 2);
    if (!std::isinf(hi) && lo > 0 && hi / lo < 1.1) break;
    if (!std::isinf(hi) && hi < 1e-6) break;
    budget = next;
  }
  WH_RETURN_IF_ERROR(Repair());
  MarkPareto();
  SearchResult r;
  if (!best_) {
    report_.notes.push_back("no configuration stayed within --max-drop " + Fmt("%.2f", o_.max_drop) +
                            " pp: the model is written uncompressed");
    r.graph = original_;
    r.key = DescribeConfig(space_, Config(space_.layers.size(), 0));
  } else {
    report_.points[*best_].chosen = true;
    r.graph = std::move(graphs_[*best_]);
    r.key = report_.points[*best_].config;
    // The chosen configuration's pass reports, built once more (the passes are deterministic).
    PassContext quiet = ctx_;
    quiet.progress = nullptr;
    WH_RETURN_IF_ERROR(ApplyConfig(original_, space_, configs_[*best_], o_.base, quiet, &r.passes).status());
  }
  const Config chosen = best_ ? configs_[*best_] : Config(space_.layers.size(), 0);
  for (size_t i = 0; i < space_.layers.size(); ++i) {
    SearchLayerReport l;
    l.node = space_.layers[i].node;
    l.op_type = space_.layers[i].op_type;
    l.choice = space_.choices[i][static_cast<size_t>(chosen[i])].Key();
    l.predicted_drop = options_[i][static_cast<size_t>(chosen[i])].loss;
    l.cost = options_[i][static_cast<size_t>(chosen[i])].cost;
    l.options = static_cast<int>(space_.choices[i].size());
    report_.layers.push_back(l);
  }
  report_.seconds = Since(t0);
  r.report = report_;
  return r;
}

}  // namespace

StatusOr<Target> ParseTarget(const std::string& name) {
  if (name == "size") return Target::kSize;
  if (name == "latency") return Target::kLatency;
  if (name == "macs") return Target::kMacs;
  return InvalidArgument("--target: unknown target '" + name + "' (size, latency or macs)");
}

const char* TargetName(Target t) {
  switch (t) {
    case Target::kSize: return "size";
    case Target::kLatency: return "latency";
    case Target::kMacs: return "macs";
  }
  return "?";
}

StatusOr<SearchResult> RunSearch(const Graph& original, const SearchOptions& options, SearchObserver* observer) {
  SearchObserver quiet;
  Search s(original, options, observer ? *observer : quiet);
  return s.Run();
}

}  // namespace whittle::search
