// The plan cache of a Session: what shape inference decided for one input signature (ShapePlan),
// kept per signature (PlanCache) so that a later run with the same input dtypes and dims reuses
// every step's output dims instead of inferring them again. Internal to runtime/session/.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/tensor.h"

namespace whittle {

inline constexpr size_t kMaxPlans = 16;               // input signatures remembered per session
inline constexpr size_t kMaxPlannedReadBytes = 4096;  // larger shape-deciding values: no plan is kept

// What shape inference decided for one input signature (dtype and dims of every graph input):
// per step the output dtypes and dims, and the inputs whose *values* the inference read (Reshape's
// shape, Slice's starts, NonZero's data...) with those values. A later run with the same signature
// reuses the dims step by step as long as each step's read values are still equal; the first
// difference sends the rest of that run back to full inference. Output shapes are a function of
// input shapes and the values read, so a reused plan is exact.
struct ShapePlan {
  struct StepPlan {
    std::vector<DType> odt;
    std::vector<Dims> odims;
    std::vector<std::pair<int, Tensor>> reads;  // (input position, value at planning)
  };
  std::vector<StepPlan> steps;
};

// The key of a run's input signature: the dtype and dims of every graph input as bound in slots
// (an absent one: "-").
std::string PlanKey(const Graph& g, const std::vector<Tensor>& slots);

// At most kMaxPlans plans, one per signature; thread-safe.
class PlanCache {
 public:
  // The plan kept for key (null: none), and in *room whether a new one would be kept.
  std::shared_ptr<const ShapePlan> Find(const std::string& key, bool* room) const;
  // Keeps plan for key while there is room (a plan already kept for key stays).
  void Keep(const std::string& key, std::unique_ptr<ShapePlan> plan) const;

 private:
  mutable std::mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const ShapePlan>> plans_;  // key: input dtypes and dims
};

}  // namespace whittle
