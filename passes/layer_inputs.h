// What passes that fit layers to calibration data need to know about a layer's input: its
// features (Gemm/MatMul: the input's last dim; 2-D Conv: im2col patches, channel × kernel tap)
// and their second moments over the data, gathered in one pass (Conv positions sampled). The SVD
// pass whitens with them; the pruning pass selects channels and re-fits consumers with them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "passes/pass.h"

namespace whittle {

// Second moments of one layer's input features plus a trailing constant-1 feature.
struct InputGram {
  int node = -1;
  int64_t features = 0;      // without the constant feature
  int64_t kernel = 1;        // Conv: taps per input channel (features = channels × kernel)
  // (features + 1)², row-major; shared by the Gemm/MatMul layers that read the same value (a
  // decoder's q/k/v projections, gate and up).
  std::shared_ptr<const std::vector<double>> shared;
  int64_t rows = 0;  // feature vectors accumulated

  const std::vector<double>& gram() const { return *shared; }
};

// Whether layer `node` has features this module can gather (Gemm with transA=0, MatMul, 2-D Conv
// with group 1 and explicit or VALID pads, each with a constant 2-D/4-D float32 weight); else why.
bool LayerInputSupported(const Graph& g, int node, std::string* why);

// Features per position along the layer's input channel axis (Conv: kh·kw; else 1).
int64_t FeaturesPerPosition(const Graph& g, const Node& n);

// One pass over data (fed to the graph's single input): the Gram matrix of each layer's input
// features (Conv: up to `positions_per_image` output positions per image, chosen with ctx.seed).
StatusOr<std::map<int, InputGram>> CollectInputGrams(const Graph& g, const std::vector<int>& nodes,
                                                     const Dataset& data, const PassContext& ctx,
                                                     const std::string& stage, int64_t positions_per_image = 64);

// The same in groups of layers whose matrices take at most budget_bytes together (a 1.1B decoder's
// are ~8 GB in doubles): one pass over the data per group, fn called with each group's grams
// before the next is gathered. The passes run on g as it was when called, whatever fn changes.
Status ForEachInputGrams(const Graph& g, const std::vector<int>& nodes, const Dataset& data,
                         const PassContext& ctx, const std::string& stage, int64_t budget_bytes,
                         const std::function<Status(std::map<int, InputGram>&)>& fn,
                         int64_t positions_per_image = 64);

// A budget for ForEachInputGrams: ctx.statistics_budget_bytes when set, else a quarter of the
// model's weight bytes, at least 512 MiB (one group for any model below 2 GB).
int64_t GramBudgetBytes(const Graph& g, const PassContext& ctx);

}  // namespace whittle
