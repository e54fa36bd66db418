#include "passes/pipeline_args.h"

#include <utility>

namespace whittle {

StatusOr<std::vector<PipelineStep>> ParsePipelineSteps(const std::vector<PassArg>& args) {
  std::vector<PipelineStep> steps;
  for (const PassArg& a : args) {
    auto parsed = PassOptions::Parse(a.pass, a.spec);
    if (!parsed.ok()) return parsed.status();
    if (!steps.empty() && steps.back().pass == a.pass) {
      if (Status s = steps.back().options.Merge(*parsed); !s.ok()) return s;
    } else {
      steps.push_back({a.pass, std::move(parsed).value()});
    }
  }
  return steps;
}

StatusOr<search::SearchOptions> MakeSearchOptions(const SearchArgs& args, const std::vector<PipelineStep>& steps) {
  if (args.max_drop < 0) return InvalidArgument("--target needs --max-drop PP (the accuracy drop allowed, in percentage points)");
  search::SearchOptions so;
  auto target = search::ParseTarget(args.target);
  if (!target.ok()) return target.status();
  so.target = *target;
  so.max_drop = args.max_drop;
  if (!args.metric.empty()) {
    auto m = search::ParseMetric(args.metric);
    if (!m.ok()) return m.status();
    so.metric = *m;
  }
  std::string families = args.passes;
  for (const PipelineStep& s : steps) {
    so.base[s.pass] = s.options.spec();
    if (args.passes.empty()) families += (families.empty() ? "" : ",") + s.pass;
  }
  if (families.empty()) families = "int8,int4,svd,prune,cluster";
  auto fams = search::ParseFamilies(families);
  if (!fams.ok()) return fams.status();
  so.families = *fams;
  for (const auto& [pass, spec] : so.base)
    if (!so.families.count(pass)) return InvalidArgument("--" + pass + " is given but --passes " + args.passes + " leaves it out");
  if (Status st = CheckPipelineSteps(steps); !st.ok()) return st;
  so.cache_path = args.sensitivity_cache;
  so.max_evals = args.max_evals;
  so.latency_batch = args.latency_batch;
  if (args.stop_after >= 0) return InvalidArgument("--stop-after runs fixed passes; it does not apply to --target");
  return so;
}

}  // namespace whittle
