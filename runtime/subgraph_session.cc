#include "runtime/subgraph_session.h"

#include <mutex>

#include "kernels/subgraph_runner.h"
#include "lib/ir/graph.h"
#include "whittle/session.h"

namespace whittle {
namespace {

class SessionRunner : public SubgraphRunner {
 public:
  SessionRunner(std::unique_ptr<Session> s, const Graph& g) : s_(std::move(s)) {
    for (int i : g.inputs()) {
      const Value& v = g.value(i);
      names_.push_back(v.name);
      ranks_.push_back(v.shape ? static_cast<int>(v.shape->size()) : -1);
    }
    for (int o : g.outputs()) {
      const Value& v = g.value(o);
      out_dtypes_.push_back(v.dtype);
      std::vector<int64_t> d;
      if (v.shape)
        for (const Dim& x : *v.shape) d.push_back(x.known() ? x.value : 0);
      out_dims_.push_back(d);
    }
  }

  StatusOr<std::vector<Tensor>> Run(const std::vector<const Tensor*>& inputs) const override {
    if (inputs.size() != names_.size())
      return Internal("subgraph takes " + std::to_string(names_.size()) + " inputs, got " + std::to_string(inputs.size()));
    std::map<std::string, Tensor> feed;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k]) return InvalidArgument("subgraph input '" + names_[k] + "' is missing");
      const Tensor& t = *inputs[k];
      // A scalar where the subgraph declares one element of rank 1 (an iteration number or cond
      // declared [1]), and the other way round: the same value.
      if (t.numel() == 1 && ranks_[k] >= 0 && ranks_[k] <= 1 && t.rank() != ranks_[k] && t.rank() <= 1)
        feed.emplace(names_[k], t.Reshaped(ranks_[k] == 0 ? Dims{} : Dims{1}));
      else
        feed.emplace(names_[k], t);
    }
    return s_->Run(feed);
  }
  DType OutputDType(size_t k) const override { return out_dtypes_[k]; }
  std::vector<int64_t> OutputDimsOrEmpty(size_t k) const override { return out_dims_[k]; }

 private:
  std::unique_ptr<Session> s_;
  std::vector<std::string> names_;
  std::vector<int> ranks_;
  std::vector<DType> out_dtypes_;
  std::vector<std::vector<int64_t>> out_dims_;
};

StatusOr<std::unique_ptr<SubgraphRunner>> MakeSessionRunner(const Graph& g, const KernelInit& init) {
  SessionOptions opts;
  opts.backend = init.backend == Backend::kCuda ? Backend::kCpu : init.backend;
  opts.num_threads = init.num_threads > 0 ? init.num_threads : 1;
  WH_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, Session::FromGraph(g, opts));
  return std::unique_ptr<SubgraphRunner>(new SessionRunner(std::move(s), g));
}

}  // namespace

void InstallSubgraphSessions() {
  static std::once_flag once;
  std::call_once(once, [] { SetSubgraphRunnerFactory(MakeSessionRunner); });
}

}  // namespace whittle
