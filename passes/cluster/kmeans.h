// One-dimensional k-means for weight sharing (Han et al., "Deep Compression"): k-means++ seeding
// (seeded, so the same weights and seed give the same codebook) and Lloyd iterations done on the
// sorted values — in 1-D each cluster is a contiguous run of them, so an iteration is k binary
// searches over the sorted array plus prefix sums, not a pass over every value per centroid.
#pragma once

#include <cstdint>
#include <vector>

namespace whittle {

struct KMeans1D {
  std::vector<float> centroids;  // ascending; fewer than k when the values have fewer distinct ones
  std::vector<uint8_t> assign;   // per value, the index of its nearest centroid
  double sse = 0;                // sum of squared distances to the assigned centroids
  int iterations = 0;
};

// k in [1, 256]; n >= 1 values.
KMeans1D RunKMeans1D(const float* values, int64_t n, int k, uint64_t seed, int max_iterations = 100);

}  // namespace whittle
