// Session::RunWithCaches and CheckCacheBindings: key/value caches grown in place. A bound cache
// input is fed as a KvCache::ShapeView (dims [1, heads, length, dim] over the cache's buffer), so
// every consumer must read either its dims alone (Shape, Size) or the cache itself through
// KernelContext::caches (a kernel's InPlaceCacheInputs); ResolveCaches makes sure of that before
// any run, as it does that the paired output is that kernel's, feeds nothing, and is never
// materialized (the executor hands the kernel no tensor for it).
#include <algorithm>
#include <map>

#include "runtime/session/session_impl.h"

namespace whittle {

Status Session::Impl::ResolveCaches(const std::vector<std::pair<std::string, std::string>>& pairs,
                                    std::vector<std::pair<int, int>>* ids) const {
  const Graph& g = graph_;
  ids->clear();
  std::map<int, size_t> pair_of_input, pair_of_output;  // value id -> index in pairs
  for (const auto& [in_name, out_name] : pairs) {
    const int vin = g.FindValue(in_name), vout = g.FindValue(out_name);
    if (vin < 0 || std::find(g.inputs().begin(), g.inputs().end(), vin) == g.inputs().end())
      return InvalidArgument("cache '" + in_name + "' is not an input of the model");
    if (vout < 0 || std::find(g.outputs().begin(), g.outputs().end(), vout) == g.outputs().end())
      return InvalidArgument("cache output '" + out_name + "' is not an output of the model");
    if (!pair_of_input.emplace(vin, ids->size()).second || !pair_of_output.emplace(vout, ids->size()).second)
      return InvalidArgument("cache '" + in_name + "' or '" + out_name + "' is bound twice");
    ids->emplace_back(vin, vout);
  }
  // One pass over the steps for every pair (RunWithCaches checks before each decode step).
  std::vector<int> appenders(pairs.size(), 0);
  for (const auto& step : steps_) {
    const Node& n = *step->node;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (auto o = pair_of_output.find(n.inputs[k]); o != pair_of_output.end())
        return Unimplemented("cache output '" + pairs[o->second].second + "' is read by " + n.DebugName() +
                             ", so it cannot stay in the cache");
      auto p = pair_of_input.find(n.inputs[k]);
      if (p == pair_of_input.end() || ReadsDimsOnly(n)) continue;
      const auto& [in_name, out_name] = pairs[p->second];
      const int o = step->kernel && step->alias < 0 && InputBit(step->kernel->InPlaceCacheInputs(), k)
                        ? step->kernel->InPlaceCacheOutput(static_cast<int>(k))
                        : -1;
      if (o < 0 || static_cast<size_t>(o) >= n.outputs.size() ||
          n.outputs[static_cast<size_t>(o)] != (*ids)[p->second].second || step->device != DeviceType::kCpu)
        return Unimplemented("cache '" + in_name + "' is read as a dense tensor by " + n.DebugName() +
                             ", not appended to in place into '" + out_name + "'");
      ++appenders[p->second];
    }
  }
  for (size_t i = 0; i < pairs.size(); ++i)
    if (appenders[i] != 1)
      return Unimplemented("cache '" + pairs[i].first + "' has " + std::to_string(appenders[i]) +
                           " nodes appending to it in place; growing it in place needs exactly one");
  return Status::Ok();
}

StatusOr<std::vector<Tensor>> Session::Impl::RunWithCachesImpl(const std::map<std::string, Tensor>& inputs,
                                                               const std::vector<CacheBinding>& caches,
                                                               RunStats* stats) const {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const CacheBinding& c : caches) {
    if (!c.cache) return InvalidArgument("RunWithCaches: cache '" + c.input + "' has no KvCache");
    if (c.cache->heads() < 1 || c.cache->dim() < 1)
      return InvalidArgument("RunWithCaches: cache '" + c.input + "' must have heads and dim >= 1");
    if (inputs.count(c.input)) return InvalidArgument("RunWithCaches: cache '" + c.input + "' is bound and fed both");
    pairs.emplace_back(c.input, c.output);
  }
  std::vector<std::pair<int, int>> ids;
  WH_RETURN_IF_ERROR(ResolveCaches(pairs, &ids));
  BoundCaches bound;
  std::map<std::string, Tensor> feed = inputs;
  for (size_t i = 0; i < caches.size(); ++i) {
    bound.inputs[ids[i].first] = caches[i].cache;
    bound.outputs[ids[i].second] = caches[i].cache;
    feed[caches[i].input] = caches[i].cache->ShapeView();
  }
  return RunImpl(feed, stats, OutputsOn::kHost, nullptr, &bound);
}

}  // namespace whittle
