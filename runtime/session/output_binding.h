// A Session run's outputs: handed to the caller as new tensors (Run: copied to the host, or left
// on the device for OutputsOn::kWhereComputed, never sharing a constant's or an input's buffer), or
// written into the caller's own tensors (RunInto). Internal to runtime/session/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/tensor.h"
#include "runtime/session/arena_pool.h"
#include "whittle/session.h"

namespace whittle {

// Session::RunInto: the run's outputs into the caller's tensors, once all are checked (as many,
// each of its output's dtype and dims; else an error naming the first that is not). A device
// output goes queued into a page-locked tensor (*queued = true: wait before reading it), otherwise
// it is copied now.
Status WriteOutputsInto(const Graph& g, const std::vector<const Tensor*>& produced, std::vector<Tensor>& into,
                        bool* queued);

// Session::Run: the graph outputs in slots as results. A device output stays there for
// kWhereComputed (its buffer joins arena.lent) or is copied to the host (waiting for the device's
// queued work); a host output that shares a constant's or an input's buffer is cloned.
Status CollectOutputs(const Graph& g, const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& slots,
                      OutputsOn outputs_on, RunArena& arena, std::vector<Tensor>* results);

}  // namespace whittle
