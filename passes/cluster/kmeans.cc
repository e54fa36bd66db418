#include "passes/cluster/kmeans.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace whittle {

KMeans1D RunKMeans1D(const float* values, int64_t n, int k, uint64_t seed, int max_iterations) {
  KMeans1D r;
  std::vector<double> v(values, values + n);
  std::sort(v.begin(), v.end());
  std::vector<double> uniq;
  for (double x : v)
    if (uniq.empty() || x != uniq.back()) uniq.push_back(x);
  std::vector<double> c;
  if (static_cast<int64_t>(uniq.size()) <= k) {
    c = uniq;  // exact: every distinct value is its own centroid
  } else {
    // k-means++: the first centroid uniformly, each next one with probability proportional to
    // the squared distance to the nearest centroid chosen so far.
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    c.push_back(v[static_cast<size_t>(rng() % static_cast<uint64_t>(n))]);
    std::vector<double> d2(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) d2[static_cast<size_t>(i)] = (v[static_cast<size_t>(i)] - c[0]) * (v[static_cast<size_t>(i)] - c[0]);
    while (static_cast<int>(c.size()) < k) {
      const double total = std::accumulate(d2.begin(), d2.end(), 0.0);
      if (!(total > 0)) break;
      double t = unit(rng) * total;
      int64_t pick = n - 1;
      for (int64_t i = 0; i < n; ++i) {
        t -= d2[static_cast<size_t>(i)];
        if (t <= 0) {
          pick = i;
          break;
        }
      }
      const double nc = v[static_cast<size_t>(pick)];
      c.push_back(nc);
      for (int64_t i = 0; i < n; ++i) d2[static_cast<size_t>(i)] = std::min(d2[static_cast<size_t>(i)], (v[static_cast<size_t>(i)] - nc) * (v[static_cast<size_t>(i)] - nc));
    }
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    // Lloyd on the sorted values: cluster j is the run between the midpoints around c[j].
    std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);
    for (int64_t i = 0; i < n; ++i) prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + v[static_cast<size_t>(i)];
    std::vector<int64_t> bounds, prev;
    for (r.iterations = 0; r.iterations < max_iterations; ++r.iterations) {
      bounds.assign(c.size() + 1, 0);
      bounds.back() = n;
      for (size_t j = 1; j < c.size(); ++j)
        bounds[j] = std::lower_bound(v.begin(), v.end(), 0.5 * (c[j - 1] + c[j])) - v.begin();
      if (bounds == prev) break;
      prev = bounds;
      for (size_t j = 0; j < c.size(); ++j) {
        const int64_t lo = bounds[j], hi = bounds[j + 1];
        if (hi > lo) c[j] = (prefix[static_cast<size_t>(hi)] - prefix[static_cast<size_t>(lo)]) / static_cast<double>(hi - lo);
      }
      std::sort(c.begin(), c.end());  // an empty cluster's centroid stays; order is kept anyway
    }
  }
  r.centroids.assign(c.begin(), c.end());
  // Assign each value (in its original order) to the nearest float centroid.
  r.assign.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float x = values[i];
    const auto it = std::lower_bound(r.centroids.begin(), r.centroids.end(), x);
    size_t j = static_cast<size_t>(it - r.centroids.begin());
    if (j == r.centroids.size() || (j > 0 && x - r.centroids[j - 1] <= r.centroids[j] - x)) j = j == 0 ? 0 : j - 1;
    r.assign[static_cast<size_t>(i)] = static_cast<uint8_t>(j);
    const double e = static_cast<double>(x) - r.centroids[j];
    r.sse += e * e;
  }
  return r;
}

}  // namespace whittle
