// Evaluation and benchmarking on top of Session, shared by run-model, compress-model and
// services: top-1 accuracy over a dataset in batches, and a latency/throughput benchmark with
// warm-up and percentiles. Data reaches every model input: a single-array data set feeds a model
// with one input, a named one (npz:) each input by name. The first output is taken as logits.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/data/dataset.h"
#include "whittle/session.h"

namespace whittle {

struct EvalResult {
  double accuracy = 0;  // fraction in [0, 1]: correct / predictions
  int64_t samples = 0;
  int64_t predictions = 0;  // samples × positions (= samples for a [batch, classes] output)
  int64_t correct = 0;
  double seconds = 0;
};

// Progress callback: (samples done, total).
using ProgressFn = std::function<void(int64_t, int64_t)>;

// t (a batch of data for input `in`) in the input's element type: as it is when the types agree,
// else integer data converted to int32/int64/float32 (values that do not fit are an error); any
// other mismatch is an error naming both types.
StatusOr<Tensor> ConformToInput(const Tensor& t, const IoInfo& in);

// Samples [begin, end) of data for every one of `inputs` (a session's or a graph's), each
// conformed (ConformToInput): a named data set (npz:) feeds each input the array of its name, a
// single array feeds the first input. A decoder's (a model with a past_key_values.* or past.*
// input) inputs the data lacks are made from the token
// ids [N, T] (input_ids, else the first rank-2 integer array): attention_mask ones [N, P+T],
// position_ids P..P+T-1, and past_key_values.* / past.* empty float32 [N, heads, 0, head_dim]
// from the input's declared dims (P: the given past's length, 0 when none is given). Any other
// input the data has nothing for is an error naming it and what the data holds. A fixed-batch
// model's (FixedBatch) last, partial batch has its samples repeated to the model's batch: read the
// first end - begin rows of its outputs.
StatusOr<std::map<std::string, Tensor>> BatchFeeds(const Dataset& data, const std::vector<IoInfo>& inputs,
                                                   int64_t begin, int64_t end);

// The batch size a model's inputs fix (every input of rank >= 1 whose dim 0 is known agrees on it,
// e.g. a detector exported at batch 1), or 0 when the batch is free.
int64_t FixedBatch(const std::vector<IoInfo>& inputs);
// The batch a loop over data runs: `want`; 1 for calls: data (Dataset::calls, one call per run);
// the model's own where its inputs fix one (FixedBatch), so a fixed-batch model is calibrated and
// evaluated one batch at its size.
inline int64_t DataBatch(const Dataset& data, int64_t want, const std::vector<IoInfo>* inputs = nullptr) {
  if (data.calls) return 1;
  const int64_t fixed = inputs ? FixedBatch(*inputs) : 0;
  return fixed > 0 ? fixed : want;
}

// Top-1 class of the first output's rows for every sample of data (N along dim 0), run in batches
// of batch_size. The first output is float32 [batch, classes] (predictions int64 [N]) or, for a
// sequence model, [batch, positions..., classes] with the class axis last (predictions int64
// [N, positions...], one per position; every batch must have the same positions). Ties go to the
// lowest class; a one-wide class axis is a probability, decided as > 0.5. calls: data runs its calls
// in order, one per run, the feedback inputs taking the previous call's outputs (predictions
// [calls, positions...]). The one top-1 evaluation: EvaluateTop1 and the passes' AccuracyProbe use it.
StatusOr<Tensor> PredictTop1(const Session& session, const Dataset& data, int64_t batch_size = 256,
                             const ProgressFn& progress = nullptr);
// The same for a model with one input, fed `inputs`.
StatusOr<Tensor> PredictTop1(const Session& session, const Tensor& inputs, int64_t batch_size = 256,
                             const ProgressFn& progress = nullptr);

// Accuracy of PredictTop1 against the data's labels (int64 [N], or [N, positions...] for a
// sequence output: top-1 per position).
// How close two models' outputs are on the same data (a compressed model and its original): every
// float32 output the two share by name and dims (a pruned decoder's KV cache is left out), all
// values of all samples as one vector: the cosine of
// the two vectors and the largest |a - b|. `values` counts the elements compared (0: none, e.g.
// calls: data, which runs call by call with state fed back, is not compared here).
struct OutputAgreement {
  double cosine = -1;
  double max_abs = -1;
  int64_t values = 0;
};
StatusOr<OutputAgreement> CompareOutputs(const Session& a, const Session& b, const Dataset& data,
                                         int64_t batch_size = 256);

StatusOr<EvalResult> EvaluateTop1(const Session& session, const Dataset& data, int64_t batch_size = 256,
                                  const ProgressFn& progress = nullptr);
StatusOr<EvalResult> EvaluateTop1(const Session& session, const Tensor& inputs, const Tensor& labels,
                                  int64_t batch_size = 256, const ProgressFn& progress = nullptr);

// Top-1 predictions (PredictTop1) against labels or a reference model's predictions: the same
// sample count and as many entries per sample (an [N] prediction of a [N, 1] label counts).
// Accuracy or agreement is the share of equal entries, over every position.
StatusOr<EvalResult> CompareTop1(const Tensor& pred, const Tensor& labels);

struct BenchOptions {
  std::vector<int64_t> batches = {1, 64};
  int warmup = 10;
  int min_iterations = 20;
  double min_seconds = 1.0;
  // Per-node times from extra runs after each batch size's timed ones (up to 200; a profiled run
  // synchronises the device after every node, so the latencies never include profiling).
  bool profile = false;
  // Feed the input from Session::NewHostTensor (page-locked on a device), as a caller that refills
  // one input buffer run after run; false: ordinary (pageable) host memory.
  bool page_locked_input = false;
  // Take the outputs into tensors from Session::NewHostTensor with Session::RunInto (page-locked
  // on a device: written there directly, behind one wait), as a caller with bound outputs.
  bool page_locked_output = false;
  // Dims of inputs with free non-batch dims (input name -> dims; dim 0 is each batch size).
  std::map<std::string, Dims> input_shapes;
};

struct BenchResult {
  int64_t batch = 0;
  int iterations = 0;
  double p50_ms = 0, p90_ms = 0, p99_ms = 0, mean_ms = 0;
  double throughput = 0;  // samples per second (batch / median latency)
  // A device session's: the device memory held at its highest during this batch size's runs (the
  // process's, through Buffer: weights, arenas, graphs; DeviceMemoryInUse), and what was held
  // before them (after load, and what earlier batch sizes left in the arenas). -1 on the CPU.
  int64_t device_peak_bytes = -1, device_before_bytes = -1;
};

struct ProfileEntry {
  std::string name;     // node name or op type
  std::string op_type;
  double total_ms = 0;  // summed over profiled runs
  double share = 0;     // fraction of all node time
  int64_t calls = 0;
  std::string device = "cpu";  // per node: where it ran ("cuda"; "cpu" for a CPU fallback)
};

struct ProfileResult {
  std::vector<ProfileEntry> by_op_type;  // sorted by time, descending
  std::vector<ProfileEntry> by_node;
  int runs = 0;
};

// Feeds for every model input with batch size `batch`: rows of the input's array in
// `sample_source` when it has one (cycled, converted by ConformToInput), else a deterministic
// pattern (float inputs) or zeros (integer and bool: a valid id for any embedding table). The
// batch replaces dim 0; other dims come from the model, else from `shapes` (input name -> dims,
// e.g. a sequence length; its dim 0 is ignored), else from the data; a free dim none of them
// gives is an error naming the input, the dim and its symbol.
StatusOr<std::map<std::string, Tensor>> MakeBatchFeeds(const Session& session, int64_t batch,
                                                       const Dataset* sample_source = nullptr,
                                                       const std::map<std::string, Dims>& shapes = {});

StatusOr<std::vector<BenchResult>> Benchmark(const Session& session, const BenchOptions& opts,
                                             const Dataset* sample_source = nullptr,
                                             ProfileResult* profile = nullptr);

// Percentile (0..100) of values by nearest rank on a sorted copy.
double Percentile(std::vector<double> values, double p);

}  // namespace whittle
