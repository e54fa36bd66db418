// Datasets named by the spec strings every CLI accepts (--eval-data, --calibration-data, ...):
//   fashion-mnist:train|test      the Debian package dataset-fashion-mnist (IDX, gzipped);
//                                 WHITTLE_FASHION_MNIST_DIR overrides its directory
//   idx:IMAGES:LABELS             any IDX image/label pair (raw or gzipped)
//   npy:INPUTS.npy[:LABELS.npy]   NumPy arrays
//   npz:DATA.npz                  a NumPy archive (np.savez / np.savez_compressed) with one array
//                                 per model input, named as the input (ids=..., mask=...), and
//                                 optionally one named `labels`: data for models with several
//                                 inputs (a transformer's token ids and attention mask)
//   calls:DATA.npz[:IN=OUT,...]   a sequence of calls of a model that is not one batch of samples
//                                 (state inputs, 0-d inputs, inputs of different leading sizes):
//                                 one array per model input, named as the input, whose first axis
//                                 counts the calls; call c feeds each input its array's [c], as
//                                 it is. IN=OUT: from the second call on, input IN takes the
//                                 previous call's output OUT (a recurrent state) when the model
//                                 runs the calls in order (evaluation, agreement); calibration
//                                 feeds the stored values. Optional `labels` [calls, ...]
// Inputs come back with N first: uint8 is taken as 8-bit pixels and scaled to float32 [0,1]
// (IDX images: rank-3 images as N×1×H×W), float64 becomes float32, float32 and the other integer
// types and bool are kept as stored (models with integer inputs: token ids, bytes, masks).
// Labels, when present, int64 [N] (or [N, T...]: a class per position) and >= 0. Every failure is a Status naming the spec and file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

struct Dataset {
  Tensor inputs;       // [N, ...]: float32, or an integer/bool type as stored; npz: the first array
  // npz: every input array with its name, in the archive's order, each [N, ...] with the same N
  // (`inputs` is the first); empty for the single-array specs.
  std::vector<std::pair<std::string, Tensor>> named;
  Tensor labels;       // int64 [N] ([N, T]: per position), or undefined when the spec names no labels
  // calls: each array's first axis counts calls, and call c's value for an input is its array's [c]
  // (no batch: one call per run). feedback: (input, output) pairs, the input taking the previous
  // call's output from the second call on when calls run in order.
  bool calls = false;
  std::vector<std::pair<std::string, std::string>> feedback;
  std::string description;  // one line for logs, e.g. "fashion-mnist:test: 100 samples of float32 [1,28,28], labels 0..9"

  int64_t size() const { return inputs.defined() ? inputs.dim(0) : 0; }
  bool has_labels() const { return labels.defined(); }
  // The data for the model input called `name`, the model's `index`-th input: the array of that
  // name in a named data set (or its only array, for the first input), else `inputs` for the first
  // input. Null when the data has none for it.
  const Tensor* ForInput(const std::string& name, size_t index) const;
  // calls: input `name`'s value in call c (its array's [c]); null when the data has none for it.
  StatusOr<Tensor> CallInput(const std::string& name, int64_t c) const;
  // "ids, mask" (named) or "one unnamed array": what the data offers, for error messages.
  std::string ArrayNames() const;
};

// The one-line list of accepted spec forms, used in error messages and CLI help.
const char* DatasetSpecHelp();

// Loads the dataset named by spec; limit >= 0 keeps only the first `limit` samples.
StatusOr<Dataset> LoadDataset(const std::string& spec, int64_t limit = -1);

// Builds a Dataset from raw arrays with the same conversions and checks as the npy: form
// (inputs to float32, uint8 scaled; labels to int64, count and sign checked).
StatusOr<Dataset> MakeDataset(const Tensor& inputs, const Tensor& labels, const std::string& name,
                              int64_t limit = -1);

// A loaded data set as a tool's argument must be: its load error, or none when it has no labels
// and they are needed (accuracy) or no samples, named after the argument (`what`: "--eval-data",
// "calibration") and its spec.
StatusOr<Dataset> CheckDataArgument(StatusOr<Dataset> loaded, const std::string& what, const std::string& spec,
                                    bool need_labels);

// Rows [begin, end) of t along dim 0, copied into a new tensor. Bounds are the caller's
// invariant (WH_CHECK): 0 <= begin <= end <= t.dim(0), rank >= 1.
Tensor SliceBatch(const Tensor& t, int64_t begin, int64_t end);

}  // namespace whittle
