#include "passes/svd/rank_allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/ir/status.h"

namespace whittle {
namespace {

// Position in a curve: -1 = left alone, else an index into ranks.
int64_t MacsAt(const RankCurve& c, int pos) { return pos < 0 ? c.macs_full : c.macs[static_cast<size_t>(pos)]; }
double LossAt(const RankCurve& c, int pos) { return pos < 0 ? 0.0 : c.loss[static_cast<size_t>(pos)]; }

// Positions above `p` (higher rank), ending with "left alone".
int Above(const RankCurve& c, int p, int step) {
  const int j = (p < 0 ? static_cast<int>(c.ranks.size()) : p) + step;
  return j >= static_cast<int>(c.ranks.size()) ? -1 : j;
}
int NumAbove(const RankCurve& c, int p) { return p < 0 ? 0 : static_cast<int>(c.ranks.size()) - p; }

// Greedy descent: from each layer's current position, any lower rank is a move; take the one
// with the least loss per MAC saved (ties: the bigger saving).
void Descend(const std::vector<RankCurve>& layers, int64_t target, std::vector<int>& pos, int64_t& saved) {
  while (saved < target) {
    int best_layer = -1, best_pos = -1;
    double best_score = std::numeric_limits<double>::infinity();
    int64_t best_gain = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
      const RankCurve& c = layers[i];
      const int top = pos[i] < 0 ? static_cast<int>(c.ranks.size()) : pos[i];
      for (int j = 0; j < top; ++j) {
        const int64_t gain = MacsAt(c, pos[i]) - c.macs[static_cast<size_t>(j)];
        if (gain <= 0) continue;
        const double score = (c.loss[static_cast<size_t>(j)] - LossAt(c, pos[i])) / static_cast<double>(gain);
        if (score < best_score - 1e-15 || (score <= best_score + 1e-15 && gain > best_gain)) {
          best_score = score;
          best_gain = gain;
          best_layer = static_cast<int>(i);
          best_pos = j;
        }
      }
    }
    if (best_layer < 0) return;  // every layer is at its lowest rank
    saved += best_gain;
    pos[static_cast<size_t>(best_layer)] = best_pos;
  }
}

// Give back: a greedy step may overshoot. Raise ranks (less saving, never more loss: curves
// are non-increasing) while the target still holds; best loss reduction first, and among
// equals (often no predicted loss at all: then rank is free accuracy) the most MACs restored.
bool GiveBack(const std::vector<RankCurve>& layers, int64_t target, std::vector<int>& pos, int64_t& saved) {
  bool changed = false;
  while (true) {
    int best_layer = -1, best_pos = -1;
    double best_drop = 0;
    int64_t best_cost = 0;
    for (size_t i = 0; i < layers.size(); ++i) {
      const RankCurve& c = layers[i];
      for (int step = 1; step <= NumAbove(c, pos[i]); ++step) {
        const int t = Above(c, pos[i], step);
        const int64_t cost = MacsAt(c, t) - MacsAt(c, pos[i]);
        if (saved - cost < target) continue;
        const double drop = LossAt(c, pos[i]) - LossAt(c, t);
        if (best_layer < 0 || drop > best_drop + 1e-12 || (drop >= best_drop - 1e-12 && cost > best_cost)) {
          best_drop = drop;
          best_cost = cost;
          best_layer = static_cast<int>(i);
          best_pos = t;
        }
      }
    }
    if (best_layer < 0) return changed;
    saved -= best_cost;
    pos[static_cast<size_t>(best_layer)] = best_pos;
    changed = true;
  }
}

// Swap: raise one layer and lower another to make up the MACs, when that lowers the predicted
// loss (the greedy cannot undo a step that later turned out to be too big).
bool Swap(const std::vector<RankCurve>& layers, int64_t target, std::vector<int>& pos, int64_t& saved) {
  double best_gain = 1e-12;
  int bi = -1, bt = -1, bk = -1, bq = -1;
  for (size_t i = 0; i < layers.size(); ++i) {
    const RankCurve& c = layers[i];
    for (int step = 1; step <= NumAbove(c, pos[i]); ++step) {
      const int t = Above(c, pos[i], step);
      const double drop = LossAt(c, pos[i]) - LossAt(c, t);
      if (drop <= best_gain) continue;
      const int64_t need = target - (saved - (MacsAt(c, t) - MacsAt(c, pos[i])));
      for (size_t k = 0; k < layers.size(); ++k) {
        if (k == i) continue;
        const RankCurve& d = layers[k];
        const int top = pos[k] < 0 ? static_cast<int>(d.ranks.size()) : pos[k];
        // The highest lower position that recovers `need` MACs (the least loss: curves are
        // non-increasing); macs rise with the index, so binary search.
        int lo = 0, hi = top;  // answer in [lo, hi); hi = none
        const int64_t cur = MacsAt(d, pos[k]);
        while (lo < hi) {
          const int mid = (lo + hi) / 2;
          if (cur - d.macs[static_cast<size_t>(mid)] >= need) lo = mid + 1; else hi = mid;
        }
        const int q = lo - 1;
        if (q < 0 || cur - d.macs[static_cast<size_t>(q)] < need) continue;
        const double gain = drop - (d.loss[static_cast<size_t>(q)] - LossAt(d, pos[k]));
        if (gain > best_gain) {
          best_gain = gain;
          bi = static_cast<int>(i), bt = t, bk = static_cast<int>(k), bq = q;
        }
      }
    }
  }
  if (bi < 0) return false;
  saved -= MacsAt(layers[static_cast<size_t>(bi)], bt) - MacsAt(layers[static_cast<size_t>(bi)], pos[static_cast<size_t>(bi)]);
  saved += MacsAt(layers[static_cast<size_t>(bk)], pos[static_cast<size_t>(bk)]) - layers[static_cast<size_t>(bk)].macs[static_cast<size_t>(bq)];
  pos[static_cast<size_t>(bi)] = bt;
  pos[static_cast<size_t>(bk)] = bq;
  return true;
}

}  // namespace

RankAllocation AllocateRanks(const std::vector<RankCurve>& layers, int64_t macs_to_remove) {
  for (const RankCurve& c : layers) WH_CHECK(c.ranks.size() == c.macs.size() && c.ranks.size() == c.loss.size());
  std::vector<int> pos(layers.size(), -1);
  int64_t saved = 0;
  Descend(layers, macs_to_remove, pos, saved);
  if (saved >= macs_to_remove) {
    // Local improvement of the greedy result; each swap strictly lowers the predicted loss and
    // each give-back strictly lowers the saving, so this ends; the cap bounds the work.
    GiveBack(layers, macs_to_remove, pos, saved);
    for (int it = 0; it < 1000 && Swap(layers, macs_to_remove, pos, saved); ++it)
      GiveBack(layers, macs_to_remove, pos, saved);
  }
  RankAllocation a;
  a.rank.assign(layers.size(), 0);
  for (size_t i = 0; i < layers.size(); ++i) {
    if (pos[i] >= 0) a.rank[i] = layers[i].ranks[static_cast<size_t>(pos[i])];
    a.predicted_loss += LossAt(layers[i], pos[i]);
  }
  a.macs_saved = saved;
  a.target_met = saved >= macs_to_remove;
  return a;
}

std::vector<double> InterpolateLoss(const std::vector<int64_t>& ranks, const std::vector<SensitivityPoint>& points,
                                    double baseline, int64_t full_rank) {
  std::vector<std::pair<int64_t, double>> pts;  // (rank, loss), ascending rank
  for (const SensitivityPoint& p : points) pts.push_back({p.setting, baseline - p.accuracy});
  pts.push_back({full_rank, 0.0});
  std::sort(pts.begin(), pts.end());
  std::vector<double> loss(ranks.size(), 0.0);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int64_t r = ranks[i];
    if (r <= pts.front().first) {
      loss[i] = pts.front().second;
      continue;
    }
    if (r >= pts.back().first) {
      loss[i] = pts.back().second;
      continue;
    }
    size_t hi = 1;
    while (pts[hi].first < r) ++hi;
    const auto& [r0, l0] = pts[hi - 1];
    const auto& [r1, l1] = pts[hi];
    const double t = r1 == r0 ? 1.0 : static_cast<double>(r - r0) / static_cast<double>(r1 - r0);
    loss[i] = l0 + t * (l1 - l0);
  }
  // Non-increasing in rank: a lower rank never predicts less loss than a higher one.
  double floor = 0.0;
  for (size_t i = ranks.size(); i-- > 0;) {
    floor = std::max(floor, loss[i]);
    loss[i] = floor;
  }
  return loss;
}

std::vector<int64_t> PickCandidates(const std::vector<int64_t>& allowed, int64_t count) {
  if (count <= 0 || allowed.empty()) return {};
  const int64_t n = static_cast<int64_t>(allowed.size());
  if (n <= count) return allowed;
  if (count == 1) return {allowed.back()};
  // Geometric spacing: a trained layer's accuracy changes fastest at low rank, where the
  // high-compression choices are; evenly spaced candidates would leave e.g. nothing between
  // rank 8 and 32 of a 784x256 layer and make the interpolated loss there far too pessimistic.
  const double lo = std::log(static_cast<double>(std::max<int64_t>(allowed.front(), 1)));
  const double hi = std::log(static_cast<double>(std::max<int64_t>(allowed.back(), 1)));
  std::vector<int64_t> out;
  int64_t prev = -1;
  for (int64_t i = 0; i < count; ++i) {
    const double t = lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(count - 1);
    int64_t idx = 0;
    double best = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = std::fabs(std::log(static_cast<double>(std::max<int64_t>(allowed[static_cast<size_t>(j)], 1))) - t);
      if (j == 0 || d < best) best = d, idx = j;
    }
    idx = std::max(idx, prev + 1);               // distinct, ascending
    idx = std::min(idx, n - (count - i));        // room for the ones still to pick
    out.push_back(allowed[static_cast<size_t>(idx)]);
    prev = idx;
  }
  return out;
}

}  // namespace whittle
