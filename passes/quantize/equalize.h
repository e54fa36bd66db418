// Cross-layer equalization (Nagel et al., "Data-Free Quantization Through Weight Equalization and
// Bias Correction") for --int8 equalize=1: in a chain layer1 -> [Relu | MaxPool]* -> layer2 whose
// middle commutes with a positive per-channel scale (relu(x/s) = relu(x)/s for s > 0), output channel i of layer1 is divided
// by s_i and input channel i of layer2 multiplied by it, with s_i = sqrt(r1_i / r2_i) (r: the
// channel's largest |weight| in each layer), so both layers' per-channel ranges become equal. The
// float model computes the same function; per-tensor and depthwise quantization lose far less.
#pragma once

#include <string>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle::quant {

// Equalizes every such chain in g (layer1: Conv of any group, Gemm or MatMul with constant float
// weights and optional 1-D bias; layer2: Conv with group 1, Gemm or MatMul; the middle value read
// only by the chain). Returns one description per equalized pair ("conv1 -> conv2").
std::vector<std::string> EqualizeChains(Graph& g);

}  // namespace whittle::quant
