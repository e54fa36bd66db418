// Attention heads for the pruning pass: finds the multi-head attention blocks whose heads can be
// removed whole. A block starts at one or more projections (Gemm/MatMul with a constant weight,
// optionally + a constant bias) whose output a Reshape splits into [..., heads, head_dim] (fused
// Q/K/V: [..., 3, heads, head_dim]); the head axis is then followed through the ops attention is
// written with (Transpose, Split/Squeeze/Gather/Unsqueeze on other axes, scalar Mul/Div, a mask
// Add that broadcasts over heads, Softmax, batched MatMul between two head tensors) to the Reshape
// that merges [heads, head_dim] back into one axis, which feeds the output projection. Every op on
// the way keeps head h's data in head h, so removing a head = removing its columns from every
// projection, its rows from the output projection, and one from the reshapes' head counts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "lib/ir/graph.h"

namespace whittle::prune {

struct HeadBlock {
  int64_t heads = 0;
  std::vector<int> producers;       // projection nodes (Gemm/MatMul) whose columns are [F, heads, head_dim]
  std::map<int, int64_t> outer;     // producer node -> F (3 for fused Q/K/V, 1 otherwise)
  std::map<int, int64_t> head_dim;  // producer node -> head_dim of its split
  std::vector<int> splits;          // Reshape nodes that split a projection into heads
  std::vector<int> merges;          // Reshape nodes that merge [heads, head_dim] back
  std::string why_not;              // non-empty: the heads cannot be removed (and why)
};

// Blocks found in a graph whose shapes have been inferred. Producers of a block are not checked
// here for being prunable producers (the channel analysis does that). Where inference left a
// dim unknown, the dim one sample showed (Value::observed, set by the pipeline) stands in, so
// that exports which compute their head reshapes' targets from Shape (Hugging Face's
// view(*input_shape, -1, head_dim)) are found too: the leading entries of such a target must be
// read from a Shape at the same axis (or be 0), which RewriteHeadReshape's 0s then copy.
std::vector<HeadBlock> FindHeadBlocks(const Graph& g);

// Dim `axis` of value `id`: as inferred when known, else as observed on one sample, else -1.
int64_t KnownDimValue(const Graph& g, int id, int axis);

}  // namespace whittle::prune
