// A Session run's inputs: the names the caller fed checked against the model's, each fed tensor
// checked (present, dtype, dims against the model's symbolic shape) and bound to its value slot,
// and whether a tensor's bytes are the caller's. Internal to runtime/session/.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/tensor.h"
#include "whittle/session.h"

namespace whittle {

// An error naming the first fed input the model does not have.
Status CheckInputNames(const std::map<std::string, Tensor>& inputs, const std::vector<IoInfo>& model_inputs);

// slots and moved: one empty tensor per value, the initializers in slots, then every graph input
// from inputs, checked; the first bad or missing input is the error (the slots before it bound).
Status BindInputs(const Graph& g, const std::map<std::string, Tensor>& inputs, std::vector<Tensor>& slots,
                  std::vector<Tensor>& moved);

// Whether t's bytes are a caller's input (or share its buffer: a Reshape of it), which the
// caller holds unchanged until Run returns, and Run synchronizes with the device before that:
// a page-locked one is uploaded with no staging copy (Session::NewHostTensor).
bool CallerHeld(const std::map<std::string, Tensor>& inputs, const Tensor& t);

}  // namespace whittle
