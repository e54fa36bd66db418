// Block-circulant pass (`--circulant block=B`, CirCNN): the weight W [N, K] of every Gemm/MatMul
// with a constant 2-D weight is replaced by its least-squares block-circulant fit (B x B blocks,
// one length-B vector each, padding to multiples of B; lib/ir/circulant_format.h has the
// convention) and the node becomes ai.whittle BlockCirculantMatMul (lib/ops/circulant.cc), which
// Whittle's runtime computes with FFTs. Storage N*K -> ceil(N/B)*ceil(K/B)*B. LowerCirculant turns
// those nodes back into standard ONNX (the dense weight expanded, MatMul + Add). A 1x1 Conv
// (stride 1, no padding, one group) is rewritten too, between NCHW<->NHWC Transposes.
#pragma once

#include <memory>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

StatusOr<std::unique_ptr<Pass>> MakeCirculantPass(PassOptions options);
const char* CirculantPassHelp();

// Replaces every ai.whittle BlockCirculantMatMul of g (with constant block vectors) by a MatMul
// against the expanded dense weight [K, N] (+ Add of the bias). Returns how many it lowered.
StatusOr<int> LowerCirculant(Graph& g);
// The same with ONNX's DFT op (opset 17; the model's default-domain opset is raised to 17 when
// every op it has is unchanged in between, else an error names the op): the FFT form, N*K/B
// stored values instead of the dense N*K (passes/circulant/lower_dft.cc).
StatusOr<int> LowerCirculantDft(Graph& g);

}  // namespace whittle
