#include "runtime/session/plan_cache.h"

namespace whittle {
namespace {

void AppendSignature(std::string* key, const Tensor* t) {
  if (!t) { *key += "-;"; return; }
  *key += std::to_string(static_cast<int>(t->dtype()));
  for (int64_t d : t->dims()) *key += "," + std::to_string(d);
  *key += ";";
}

}  // namespace

std::string PlanKey(const Graph& g, const std::vector<Tensor>& slots) {
  std::string key;
  for (int id : g.inputs()) {
    const Tensor& t = slots[static_cast<size_t>(id)];
    AppendSignature(&key, t.defined() ? &t : nullptr);
  }
  return key;
}

std::shared_ptr<const ShapePlan> PlanCache::Find(const std::string& key, bool* room) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plans_.find(key);
  *room = plans_.size() < kMaxPlans;
  return it != plans_.end() ? it->second : nullptr;
}

void PlanCache::Keep(const std::string& key, std::unique_ptr<ShapePlan> plan) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (plans_.size() < kMaxPlans) plans_.emplace(key, std::move(plan));
}

}  // namespace whittle
