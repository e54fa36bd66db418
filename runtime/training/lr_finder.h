// The learning-rate range test of lr=auto (Leslie Smith's, as fastai's lr_find): from the
// student's current state, steps at a rate growing exponentially, the smoothed loss recorded
// until it climbs far above its lowest; the rate picked is a tenth of the rate at that lowest.
// Compressed forms train at different rates (a codebook entry's gradient sums those of every
// weight that shares it), so the test runs once per group of params (ParamKinds), the other
// groups frozen, and each group gets its own rate (Trainer::set_lr_scales). The trainer's params,
// optimizer and model state are restored after each group.
#pragma once

#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "runtime/training/autodiff.h"
#include "runtime/training/trainer.h"

namespace whittle::training {

// Per param (params' order) the compressed form it trains: "codebook" (a CodebookMatMul's
// codebook), "circulant" (a BlockCirculantMatMul's block vectors), "binary" (a binarized layer's
// latent weight or alpha), "low-rank" (a factor --svd made: '<node>/svd_u', '<node>/svd_v', or
// the weight of the node after its '/svd_u' half), or "dense" (every other weight, bias and
// normalization param). Quantized params are named by their latent; their stored weight decides.
std::vector<std::string> ParamKinds(const Graph& student, const std::vector<std::string>& params,
                                    const std::vector<QuantizedParam>& quantized,
                                    const std::vector<BinaryParam>& binary);

struct LrFinderOptions {
  // The sweep, in TrainOptions::lr's units (for batch 256 when scale_lr); the rate picked is
  // clamped to it.
  float min_lr = 1e-5f, max_lr = 1.f;
  int steps = 100;           // per group, at most
  double stop_factor = 4.0;  // stop once the smoothed loss exceeds this times its lowest
  double beta = 0.9;         // the loss's moving-average weight of the past (bias-corrected)
};

struct GroupRate {
  std::string kind;     // as ParamKinds
  int params = 0;
  float lr = 0;         // the rate picked (TrainOptions::lr's units)
  float lr_at_min = 0;  // where the smoothed loss was lowest
  double start_loss = 0, min_loss = 0;  // smoothed
  int steps = 0;        // steps run (fewer than LrFinderOptions::steps: the loss climbed)
};

struct LrFinderResult {
  std::vector<GroupRate> groups;
  float lr = 0;  // the trainer's rate now: the largest group's; the others as lr_scales()
};

// Runs the test on batches of train (TrainOptions::batch rows, drawn with TrainOptions::seed; with
// data parallelism every rank calls it), then sets t's rate and per-param scales.
StatusOr<LrFinderResult> FindLearningRates(Trainer& t, const Dataset& train,
                                           const LrFinderOptions& o = LrFinderOptions());

// "lr=auto (range test, for batch 256): codebook 0.0012 (5 params), dense 0.031 (3 params)".
std::string LrFinderLine(const LrFinderResult& r, bool per_batch_256);

}  // namespace whittle::training
