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

// A graph input or output that carries a block's heads: a decoder's past_key_values.* input or
// present.* output (the KV cache). Its declared dim `axis` holds per_unit entries per unit.
struct HeadIo {
  int value = -1;
  int axis = -1;
  int64_t per_unit = 1;
};

// The units of a block are what pruning removes whole. In multi-head attention a unit is one head.
// With grouped-query attention (a key/value head shared by `rep` query heads, repeated by
// Unsqueeze/Expand/Reshape as Hugging Face's repeat_kv writes it) a unit is one key/value head
// with its query heads: a projection's columns are then [F, units, heads per unit * head_dim].
struct HeadBlock {
  int64_t heads = 0;                // units
  std::vector<int> producers;       // projection nodes (Gemm/MatMul) whose columns are [F, units, unit width]
  std::map<int, int64_t> outer;     // producer node -> F (3 for fused Q/K/V, 1 otherwise)
  std::map<int, int64_t> head_dim;  // producer node -> columns per unit (heads per unit * head_dim)
  std::map<int, int64_t> unit_heads;  // producer node -> heads per unit (1 in multi-head attention)
  std::vector<int> splits;          // Reshape nodes that split a projection into heads
  std::vector<int> merges;          // Reshape nodes that merge [heads, head_dim] back
  std::vector<HeadIo> io;           // cache inputs/outputs whose declared head dim follows the units
  std::string why_not;              // non-empty: the heads cannot be removed (and why)
};

// Blocks found in a graph whose shapes have been inferred. Producers of a block are not checked
// here for being prunable producers (the channel analysis does that). Where inference left a
// dim unknown, the dim one sample showed (Value::observed, set by the pipeline) stands in, so
// that exports which compute their head reshapes' targets from Shape (Hugging Face's
// view(*input_shape, -1, head_dim)) are found too: the leading entries of such a target must be
// read from a Shape at the same axis (or be 0), which RewriteHeadReshape's 0s then copy.
// A decoder's attention is followed too: a Shape may read a head tensor (its values follow the
// pruned shapes), rotary embeddings slice and concatenate head_dim, the cache Concat joins a
// past_key_values input (whose other readers may only be Shape) along the sequence, and repeat_kv
// (Unsqueeze, Expand whose head entry is 1 or read from the heads' Shape, Reshape whose head entry
// is that Shape read times the repeat count) turns key/value heads into query heads.
std::vector<HeadBlock> FindHeadBlocks(const Graph& g);

// Dim `axis` of value `id`: as inferred when known, else as observed on one sample, else -1.
int64_t KnownDimValue(const Graph& g, int id, int axis);

}  // namespace whittle::prune
