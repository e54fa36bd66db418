// The CPU runtime's blocked channel layout (ONNX Runtime's NCHWc idea, on oneDNN's kernels, in
// the layout they prefer: nChw16c/nChw8c for its direct kernels, NHWC for its brgemm ones): the
// float 2-D convolutions (group 1, constant weights, output channels a multiple of the block),
// the pools after them and the Relu/Add between them run on [N, C/b, H, W, b] tensors
// (lib/ops/nchwc.cc), so activations are reordered once where the region starts and once where
// a plain op reads them, instead of to and from oneDNN's layout around every convolution.
//   Conv      -> NchwcConv (its input blocked, or kept NCHW where oneDNN's first-layer kernels
//                read that directly: <= 3 channels for nChw{8,16}c, 1 for NHWC (or <= 3 when
//                the output has 8 or 16 channels, which is nChw8c / nChw16c too); its fused
//                residual blocked too); an ai.whittle BinaryConv with float activations likewise,
//                its bits decoded into the float weight sign * alpha (in the runtime's graph only)
//   MaxPool / AveragePool (2-D, one output) / GlobalMaxPool / GlobalAveragePool on a blocked
//                input -> NchwcPool
//   Relu, and Add of two same-shape tensors, on blocked inputs -> the same op on the blocked data
// Convs on a 1x1 image stay NCHW (matrix-vector products), and so do convs that would be the only
// conv of their region (two reorders and a lost per-geometry path choice for nothing; a trial
// conversion finds the regions). A plain value another op (or the graph's output) still reads is
// recomputed from the blocked
// one by a FromNchwc node under its old name; a plain input of a converted node goes through one
// ToNchwc. block is the channel block, 8 or 16, or 0 for NHWC (NchwcBlock(backend),
// kernels/nchwc.h).
#pragma once

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

Status ConvertToNchwc(Graph& g, int block, int* converted);

}  // namespace whittle
