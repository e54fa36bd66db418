// Channel-dependency analysis for the pruning pass (read-only; the apply step lives in
// prune_apply.h). It finds the producers whose output units can be removed (Gemm/MatMul output
// columns, Conv output channels), follows each producer's output through channel-preserving ops
// to the consumers that must lose the matching input rows, and couples producers whose channels
// meet in an elementwise op (residual Add) into one group. A group whose channels reach anything
// the pass cannot rewire (a graph output, Reshape, grouped conv, an unknown op) carries the reason.
// Multi-head attention blocks (attention_heads.h) are groups whose units are whole heads: their
// Q/K/V projections are the producers, the output projection the consumer.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle::prune {

// A run of positions along a tensor's channel axis: `channels` units of `group` (-1: units no
// prunable group owns, always kept), each unit owning `block` consecutive positions (Flatten
// turns a channel into H*W columns; a depthwise multiplier m turns it into m channels).
struct Segment {
  int group = -1;
  int64_t channels = 0;
  int64_t block = 1;
};

// How a tensor's channel axis is made of groups' units.
struct ChannelMap {
  int axis = 1;
  std::vector<Segment> segs;
  int64_t positions() const;
  bool SameLayout(const ChannelMap& o) const;  // same segment sizes and blocks (groups may differ)
};

// A node whose constants must be sliced to follow the channels of an annotated value.
enum class EditKind {
  kConsumerRows,  // Gemm/MatMul input rows of B, Conv (group 1) input channels of W; value = data input
  kBatchNorm,     // scale/B/mean/var (inputs 1..4); value = output
  kInstanceNorm,  // scale/B (inputs 1..2); value = output
  kDepthwise,     // depthwise Conv filters and bias follow its output; value = output
  kConstOperand,  // constant operand of an elementwise op, sliced along `axis`; value = output
  kHeadReshape,   // Reshape splitting (value = its input) or merging (value = its output) attention
                  // heads: its shape input is rewritten for the kept heads
  kChannelReshape,  // Reshape [.., C, 1..] -> [.., C, 1..]: shape entry `axis` becomes the kept
                    // count; value = its input
};

struct Edit {
  EditKind kind;
  int node = -1;
  int input = 0;  // kConsumerRows: the data input; kConstOperand: the constant's input index
  int value = -1;
  int axis = 0;  // kConstOperand: axis of the constant to slice; kChannelReshape: the shape entry
};

// A node whose output units start a group.
struct Producer {
  int node = -1;
  int group = -1;  // group id at creation; resolve with Root()
  int64_t width = 0;
  int value = -1;  // its output value
  int axis = 1;    // channel axis of that value
  // > 0: the units are attention heads (attention_heads.h) of head_dim positions each; the output
  // columns are laid out [F, heads, head_dim] (F = 3 for a fused Q/K/V projection).
  int64_t head_dim = 0;
  int64_t unit_heads = 1;  // heads per unit: > 1 for the query heads of a grouped-query unit
};

// A graph input or output carrying attention heads (a KV cache: HeadIo in attention_heads.h):
// its declared dim `axis` becomes per_unit * the kept units of `group`.
struct HeadIoEdit {
  int value = -1;
  int axis = -1;
  int64_t per_unit = 1;
  int group = -1;
};

struct ChannelAnalysis {
  std::vector<std::optional<ChannelMap>> maps;  // per value id
  std::vector<HeadIoEdit> head_io;
  std::vector<Producer> producers;               // in topological order
  std::vector<Edit> edits;                       // in topological order
  // Gemm/MatMul/Conv nodes that are not producers -> why their outputs are not pruned.
  std::map<int, std::string> not_producer;

  int Root(int group) const;
  // Unique reasons why the group (any member of the union) cannot be pruned; empty = prunable.
  std::vector<std::string> Reasons(int root) const;
  // Producers (indices into producers) whose group has this root, in topological order.
  std::vector<int> ProducersOf(int root) const;
  // Distinct roots of all groups, in order of their first producer.
  std::vector<int> Roots() const;

  // Internal state of the union-find, filled by Analyze().
  std::vector<int> parent;
  std::vector<std::vector<std::string>> reasons;  // by group id (not root)
};

// Runs the analysis on a graph whose shapes have been inferred. Errors only for graphs that are
// not well-formed (cycles); anything the pass cannot follow becomes a reason on the group.
StatusOr<ChannelAnalysis> Analyze(const Graph& g);

// Positions along the map's axis that survive when each group root keeps the units marked in
// keep[root] (roots absent from keep keep everything). Ascending.
std::vector<int64_t> KeptPositions(const ChannelAnalysis& a, const ChannelMap& m,
                                   const std::map<int, std::vector<bool>>& keep);

}  // namespace whittle::prune
