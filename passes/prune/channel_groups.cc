#include "passes/prune/channel_groups.h"

#include <algorithm>
#include <set>

#include "lib/ir/pads.h"
#include "passes/prune/attention_heads.h"

namespace whittle::prune {
namespace {

const std::set<std::string>& UnitWiseOps() {
  // One input, one output, the same element count, no mixing across positions.
  static const std::set<std::string> ops = {
      "Relu",     "LeakyRelu", "Sigmoid",  "Tanh",   "Clip",     "HardSwish", "HardSigmoid", "Elu",
      "Selu",     "Celu",      "Softplus", "Softsign", "ThresholdedRelu", "Shrink", "Abs", "Neg",
      "Exp",      "Log",       "Sqrt",     "Erf",    "Reciprocal", "Identity", "Dropout", "Gelu",
      "Mish"};
  return ops;
}

const std::set<std::string>& PoolOps() {
  static const std::set<std::string> ops = {"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
                                            "GlobalMaxPool", "GlobalLpPool"};
  return ops;
}

const std::set<std::string>& ReduceOps() {
  // Each output element reduces positions of one channel when the channel axis is not reduced.
  static const std::set<std::string> ops = {"ReduceMean", "ReduceMax",  "ReduceMin",       "ReduceSum",
                                            "ReduceProd", "ReduceL1",   "ReduceL2",        "ReduceLogSum",
                                            "ReduceLogSumExp", "ReduceSumSquare"};
  return ops;
}

const std::set<std::string>& ElementwiseOps() {
  // Broadcasting n-ary ops: removing a channel from every operand removes it from the output.
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Sum", "Mean",
                                            "Max", "Min", "PRelu", "Pow"};
  return ops;
}

class Analyzer {
 public:
  explicit Analyzer(const Graph& g) : g_(g) {
    a_.maps.resize(g.values().size());
  }

  StatusOr<ChannelAnalysis> Run() {
    WH_ASSIGN_OR_RETURN(std::vector<int> order, g_.TopologicalOrder());
    FindHeads();
    for (int ni : order) {
      Visit(ni);
      StartGroup(ni);
      auto m = merge_of_.find(ni);
      if (m != merge_of_.end()) StartMerge(ni, m->second);
    }
    for (int out : g_.outputs())
      if (a_.maps[static_cast<size_t>(out)])
        Mark(*a_.maps[static_cast<size_t>(out)],
             "reaches graph output '" + g_.value(out).name + "' (its units are the model's outputs)");
    for (size_t b = 0; b < heads_.size(); ++b)
      if (heads_[b].why_not.empty() && head_gid_[b] >= 0)
        for (const HeadIo& io : heads_[b].io) a_.head_io.push_back(HeadIoEdit{io.value, io.axis, io.per_unit, head_gid_[b]});
    return std::move(a_);
  }

 private:
  const Tensor* Const(int id) const {
    if (id < 0) return nullptr;
    const Value& v = g_.value(id);
    return v.initializer ? &*v.initializer : nullptr;
  }
  int Rank(int id) const {
    if (id < 0) return -1;
    const Value& v = g_.value(id);
    if (v.initializer) return v.initializer->rank();
    return v.shape ? static_cast<int>(v.shape->size()) : -1;
  }
  int64_t DimAt(int id, int axis) const {
    const Value& v = g_.value(id);
    if (v.initializer) return v.initializer->dim(axis);
    if (!v.shape || axis < 0 || axis >= static_cast<int>(v.shape->size())) return -1;
    return (*v.shape)[static_cast<size_t>(axis)].value;
  }
  bool Used(int id) const { return id >= 0 && (!g_.Consumers(id).empty() || g_.IsGraphOutput(id)); }
  std::optional<ChannelMap>& Map(int id) { return a_.maps[static_cast<size_t>(id)]; }

  int NewGroup() {
    a_.parent.push_back(static_cast<int>(a_.parent.size()));
    a_.reasons.emplace_back();
    return static_cast<int>(a_.parent.size()) - 1;
  }
  void Union(int x, int y) {
    x = a_.Root(x);
    y = a_.Root(y);
    if (x != y) a_.parent[static_cast<size_t>(std::max(x, y))] = std::min(x, y);
  }
  void Mark(const ChannelMap& m, const std::string& why) {
    for (const Segment& s : m.segs)
      if (s.group >= 0) MarkGroup(s.group, why);
  }
  void MarkGroup(int gid, const std::string& why) { a_.reasons[static_cast<size_t>(gid)].push_back(why); }
  void SetOut(const Node& n, const ChannelMap& m) { a_.maps[static_cast<size_t>(n.outputs[0])] = m; }
  void AddEdit(EditKind k, int node, int input, int value, int axis = 0) {
    a_.edits.push_back(Edit{k, node, input, value, axis});
  }

  // Why the node's outputs cannot start a group ("" when they can); *width and *axis on success.
  std::string ProducerCheck(const Node& n, int64_t* width, int* axis) const {
    const std::string& op = n.op_type;
    if (n.outputs.empty() || n.outputs[0] < 0) return "has no output";
    const Tensor* w = n.inputs.size() > 1 ? Const(n.inputs[1]) : nullptr;
    if (!w) return "its weight is not a constant initializer";
    if (w->dtype() != DType::kFloat32) return "its weight is " + std::string(DTypeName(w->dtype())) + ", not float32";
    int bias_in = op == "MatMul" ? -1 : 2;
    if (bias_in > 0 && static_cast<int>(n.inputs.size()) > bias_in && n.inputs[static_cast<size_t>(bias_in)] >= 0) {
      const Tensor* b = Const(n.inputs[static_cast<size_t>(bias_in)]);
      if (!b) return "its bias is not a constant initializer";
      if (b->dtype() != DType::kFloat32) return "its bias is not float32";
    }
    int out_rank = Rank(n.outputs[0]);
    if (op == "Gemm") {
      if (w->rank() != 2 || out_rank != 2) return "weight or output is not 2-D";
      *width = n.attrs.GetInt("transB", 0) ? w->dim(0) : w->dim(1);
      *axis = 1;
      if (n.inputs.size() > 2 && n.inputs[2] >= 0) {
        const Tensor* c = Const(n.inputs[2]);
        if (c->rank() > 0 && c->dims().back() != 1 && c->dims().back() != *width) return "bias C does not broadcast";
      }
      return "";
    }
    if (op == "MatMul") {
      if (w->rank() != 2) return "weight is not 2-D";
      if (out_rank < 1) return "output rank unknown";
      *width = w->dim(1);
      *axis = out_rank - 1;
      return "";
    }
    // Conv
    if (w->rank() < 3 || out_rank < 3) return "weight or output rank unknown";
    int64_t group = n.attrs.GetInt("group", 1);
    if (group != 1) {
      if (w->dim(1) == 1)
        return "depthwise conv (group=" + std::to_string(group) + "): its channels follow its input";
      return "grouped conv (group=" + std::to_string(group) + "): its channels are tied to its input groups";
    }
    if (n.inputs.size() > 2 && n.inputs[2] >= 0 && Const(n.inputs[2])->numel() != w->dim(0)) return "bias size mismatch";
    *width = w->dim(0);
    *axis = 1;
    return "";
  }

  // Attention blocks whose heads can go: their projections become head producers, their split and
  // merge Reshapes get their shapes rewritten. A block that cannot be pruned leaves its projections
  // to the usual analysis, with the block's reason at the split Reshape.
  void FindHeads() {
    for (HeadBlock& b : FindHeadBlocks(g_)) {
      for (int p : b.producers) {
        int64_t width = 0;
        int axis = 1;
        std::string why = ProducerCheck(g_.nodes()[static_cast<size_t>(p)], &width, &axis);
        if (!why.empty() && b.why_not.empty()) b.why_not = g_.nodes()[static_cast<size_t>(p)].DebugName() + ": " + why;
      }
      const int id = static_cast<int>(heads_.size());
      for (int s : b.splits) split_of_[s] = id;
      if (b.why_not.empty()) {
        for (int p : b.producers) head_producer_[p] = id;
        for (int m : b.merges) merge_of_[m] = id;
      }
      heads_.push_back(std::move(b));
      head_gid_.push_back(-1);
    }
  }

  void StartGroup(int ni) {
    const Node& n = g_.nodes()[static_cast<size_t>(ni)];
    if (!n.domain.empty() && n.domain != "ai.onnx") return;
    if (n.op_type != "Gemm" && n.op_type != "MatMul" && n.op_type != "Conv") return;
    int64_t width = 0;
    int axis = 1;
    std::string why = ProducerCheck(n, &width, &axis);
    if (!why.empty()) {
      a_.not_producer[ni] = why;
      return;
    }
    int gid = NewGroup();
    ChannelMap m;
    m.axis = axis;
    auto hp = head_producer_.find(ni);
    if (hp == head_producer_.end()) {
      a_.producers.push_back(Producer{ni, gid, width, n.outputs[0], axis});
      m.segs.push_back(Segment{gid, width, 1});
      return SetOut(n, m);
    }
    const HeadBlock& b = heads_[static_cast<size_t>(hp->second)];
    const int64_t hd = b.head_dim.at(ni);
    a_.producers.push_back(Producer{ni, gid, b.heads, n.outputs[0], axis, hd, b.unit_heads.at(ni)});
    for (int64_t f = 0; f < b.outer.at(ni); ++f) m.segs.push_back(Segment{gid, b.heads, hd});
    int& block_gid = head_gid_[static_cast<size_t>(hp->second)];
    if (block_gid < 0) block_gid = gid;
    Union(block_gid, gid);
    SetOut(n, m);
  }

  // The merged heads [..., heads * head_dim] are the output projection's input rows.
  void StartMerge(int ni, int block) {
    const Node& n = g_.nodes()[static_cast<size_t>(ni)];
    const int gid = head_gid_[static_cast<size_t>(block)];
    const int rank = Rank(n.outputs[0]);
    if (gid < 0 || rank < 1) return;
    const HeadBlock& b = heads_[static_cast<size_t>(block)];
    ChannelMap m;
    m.axis = rank - 1;
    m.segs.push_back(Segment{gid, b.heads, KnownDimValue(g_, n.outputs[0], rank - 1) / b.heads});
    SetOut(n, m);
    AddEdit(EditKind::kHeadReshape, ni, 1, n.outputs[0]);
  }

  // Extra outputs (Dropout mask, MaxPool indices, BN training stats) would still carry the old
  // channel count or positions.
  bool ExtraOutputsUsed(const Node& n) const {
    for (size_t i = 1; i < n.outputs.size(); ++i)
      if (Used(n.outputs[i])) return true;
    return false;
  }

  void Visit(int ni) {
    const Node& n = g_.nodes()[static_cast<size_t>(ni)];
    std::vector<int> ann;  // input slots with annotated values
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.inputs[i] >= 0 && Map(n.inputs[i])) ann.push_back(static_cast<int>(i));
    if (ann.empty()) return;
    const std::string& op = n.op_type;
    const std::string who = "feeds " + n.DebugName();
    auto fail = [&](const std::string& why) {
      for (int i : ann) Mark(*Map(n.inputs[static_cast<size_t>(i)]), who + ": " + why);
    };
    const ChannelMap& m0 = *Map(n.inputs[static_cast<size_t>(ann[0])]);
    if (!n.domain.empty() && n.domain != "ai.onnx") return fail("an op the pass cannot follow");
    if (n.outputs.empty() || n.outputs[0] < 0) return fail("no output");
    const bool only_data = ann.size() == 1 && ann[0] == 0;

    auto split = split_of_.find(ni);
    if (split != split_of_.end()) {
      const HeadBlock& b = heads_[static_cast<size_t>(split->second)];
      if (!b.why_not.empty()) return fail("attention heads cannot be removed: " + b.why_not);
      if (!only_data) return fail("reads the channels as a shape");
      for (const Segment& s : m0.segs)
        if (s.group < 0 || a_.Root(s.group) != a_.Root(head_gid_[static_cast<size_t>(split->second)]))
          return fail("splits channels of other layers into heads");
      return AddEdit(EditKind::kHeadReshape, ni, 1, n.inputs[0]);
    }

    if (op == "Gemm" || op == "MatMul") {
      if (!only_data) return fail("reads the channels as a weight or bias");
      const Tensor* b = n.inputs.size() > 1 ? Const(n.inputs[1]) : nullptr;
      if (!b || b->rank() != 2) return fail("its weight is not a constant 2-D initializer");
      if (op == "Gemm" && n.attrs.GetInt("transA", 0)) return fail("reads them transposed (transA=1)");
      int rank = Rank(n.inputs[0]);
      if (rank < 1 || m0.axis != rank - 1) return fail("contracts a different axis than the channels");
      return AddEdit(EditKind::kConsumerRows, ni, 0, n.inputs[0]);
    }
    if (op == "Conv") {
      if (!only_data) return fail("reads the channels as a weight or bias");
      const Tensor* w = n.inputs.size() > 1 ? Const(n.inputs[1]) : nullptr;
      if (!w || w->rank() < 3) return fail("its weight is not a constant initializer");
      if (m0.axis != 1) return fail("channels are not on axis 1");
      if (n.inputs.size() > 2 && n.inputs[2] >= 0 && !Const(n.inputs[2])) return fail("its bias is not a constant");
      int64_t group = n.attrs.GetInt("group", 1);
      if (group == 1) return AddEdit(EditKind::kConsumerRows, ni, 0, n.inputs[0]);
      if (w->dim(1) == 1 && group == m0.positions() && w->dim(0) % group == 0) {
        // Depthwise: output channel c*mult+j reads only input channel c, so it follows the input.
        if (w->dtype() != DType::kFloat32) return fail("depthwise weight is not float32");
        int64_t mult = w->dim(0) / group;
        ChannelMap out = m0;
        for (Segment& s : out.segs) s.block *= mult;
        SetOut(n, out);
        return AddEdit(EditKind::kDepthwise, ni, 1, n.outputs[0]);
      }
      return fail("grouped conv (group=" + std::to_string(group) + ") mixes channels within groups");
    }
    if (UnitWiseOps().count(op)) {
      if (!only_data) return fail("reads the channels as a parameter");
      if (ExtraOutputsUsed(n)) return fail("its second output is used");
      return SetOut(n, m0);
    }
    if (PoolOps().count(op)) {
      if (!only_data || m0.axis != 1) return fail("channels are not on axis 1");
      if (ExtraOutputsUsed(n)) return fail("its indices output is used");
      return SetOut(n, m0);
    }
    if (op == "BatchNormalization" || op == "InstanceNormalization") {
      int nparams = op == "BatchNormalization" ? 4 : 2;
      if (!only_data || m0.axis != 1) return fail("channels are not on axis 1");
      if (ExtraOutputsUsed(n)) return fail("its training outputs are used");
      for (int i = 1; i <= nparams; ++i) {
        const Tensor* p = static_cast<int>(n.inputs.size()) > i ? Const(n.inputs[static_cast<size_t>(i)]) : nullptr;
        if (!p || p->rank() != 1 || p->dim(0) != m0.positions()) return fail("its parameters are not constant per-channel vectors");
      }
      SetOut(n, m0);
      return AddEdit(op == "BatchNormalization" ? EditKind::kBatchNorm : EditKind::kInstanceNorm, ni, 0, n.outputs[0]);
    }
    if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
      int rank = Rank(n.inputs[0]);
      int64_t axis = n.attrs.GetInt("axis", g_.OpsetFor("") >= 13 ? -1 : 1);
      if (axis < 0) axis += rank;
      // Before opset 13 these ops flatten from `axis` on, so any axis <= channel axis mixes them.
      bool mixes = g_.OpsetFor("") >= 13 ? axis == m0.axis : axis <= m0.axis;
      if (!only_data || rank < 0 || mixes) return fail("normalizes across the channels");
      return SetOut(n, m0);
    }
    if (op == "Flatten") {
      int rank = Rank(n.inputs[0]);
      int64_t axis = n.attrs.GetInt("axis", 1);
      if (axis < 0) axis += rank;
      if (rank < 0 || axis != m0.axis) return fail("flattens the channels together with another axis");
      int64_t inner = 1;
      for (int d = m0.axis + 1; d < rank; ++d) {
        int64_t v = DimAt(n.inputs[0], d);
        if (v < 0) return fail("dims after the channel axis are not static");
        inner *= v;
      }
      ChannelMap out = m0;
      out.axis = 1;
      for (Segment& s : out.segs) s.block *= inner;
      return SetOut(n, out);
    }
    if (ReduceOps().count(op) || op == "Squeeze" || op == "Unsqueeze") {
      if (!only_data) return fail("reads the channels as axes");
      return VisitAxesOp(n, m0, fail);
    }
    if (op == "Shape") {
      // Reading only the dims before the channels (the batch, for a computed flatten target)
      // does not see the pruning.
      if (!ShapeReadsLeadingDims(n, m0.axis)) return fail("its shape is read beyond the axes before the channels");
      return;
    }
    if (op == "Reshape") {
      if (!only_data) return fail("reads the channels as a shape");
      return VisitReshape(ni, n, m0, fail);
    }
    if (op == "Pad") {
      // Padding other axes (Keras' ZeroPadding2D before a strided conv) keeps the channels.
      if (!only_data) return fail("reads the channels as pads");
      const int rank = Rank(n.inputs[0]);
      std::vector<int64_t> pads;
      if (!ConstantPads(g_, n, &pads)) return fail("its pads are computed");
      if (rank < 0 || static_cast<int>(pads.size()) != 2 * rank) return fail("its pads do not match the rank");
      if (pads[static_cast<size_t>(m0.axis)] != 0 || pads[static_cast<size_t>(rank + m0.axis)] != 0)
        return fail("pads the channels");
      return SetOut(n, m0);
    }
    if (op == "Concat") return VisitConcat(n, ann, fail);
    if (ElementwiseOps().count(op)) return VisitElementwise(ni, n, ann, fail);
    return fail("an op the pass cannot follow (" + op + ")");
  }

  // The int64 values of a constant 1-D (or scalar) input, or false.
  bool ConstInts(int id, std::vector<int64_t>* v) const {
    const Tensor* t = id >= 0 ? Const(id) : nullptr;
    if (!t || t->dtype() != DType::kInt64 || t->rank() > 1) return false;
    v->assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
    return true;
  }

  // The axes a Reduce*, Squeeze or Unsqueeze node names (attribute, or a constant second input
  // from the opset that moved it there); false when they are computed.
  bool AxesOf(const Node& n, std::vector<int64_t>* axes, bool* given) const {
    *given = true;
    if (n.attrs.Has("axes")) {
      *axes = n.attrs.GetInts("axes");
      return true;
    }
    if (n.inputs.size() > 1 && n.inputs[1] >= 0) return ConstInts(n.inputs[1], axes);
    axes->clear();
    *given = false;
    return true;
  }

  // Reduce* over axes other than the channels' (torch.onnx's dynamo exporter writes adaptive
  // average pooling as ReduceMean over [-1, -2]), Squeeze and Unsqueeze of other axes: the channels
  // pass through, on an axis that moves by the axes removed or inserted before it.
  template <class Fail>
  void VisitAxesOp(const Node& n, const ChannelMap& m0, const Fail& fail) {
    const std::string& op = n.op_type;
    const int in_rank = Rank(n.inputs[0]), out_rank = Rank(n.outputs[0]);
    if (in_rank < 0 || out_rank < 0) return fail("rank unknown");
    std::vector<int64_t> axes;
    bool given = false;
    if (!AxesOf(n, &axes, &given)) return fail("its axes are computed");
    if (ExtraOutputsUsed(n)) return fail("has more than one output");
    const int norm_rank = op == "Unsqueeze" ? out_rank : in_rank;
    for (int64_t& a : axes) {
      if (a < 0) a += norm_rank;
      if (a < 0 || a >= norm_rank) return fail("an axis is out of range");
    }
    ChannelMap out = m0;
    if (op == "Unsqueeze") {
      // Output axis j is an input axis unless inserted; the channel axis is the m0.axis-th of those.
      int seen = 0;
      for (int j = 0; j < out_rank; ++j) {
        if (std::find(axes.begin(), axes.end(), j) != axes.end()) continue;
        if (seen++ == m0.axis) {
          out.axis = j;
          break;
        }
      }
      return SetOut(n, out);
    }
    if (!given) {
      if (op == "Squeeze") {  // every size-1 axis
        for (int d = 0; d < in_rank; ++d) {
          const int64_t v = DimAt(n.inputs[0], d);
          if (v < 0) return fail("squeezes axes of unknown size");
          if (v == 1) axes.push_back(d);
        }
      } else if (n.attrs.GetInt("noop_with_empty_axes", 0)) {
        return SetOut(n, out);
      } else {
        return fail("reduces across the channels");  // every axis
      }
    }
    if (std::find(axes.begin(), axes.end(), m0.axis) != axes.end())
      return fail(op == "Squeeze" ? "squeezes the channel axis" : "reduces across the channels");
    if (op == "Squeeze" || !n.attrs.GetInt("keepdims", 1))
      out.axis = m0.axis - static_cast<int>(std::count_if(axes.begin(), axes.end(), [&](int64_t a) { return a < m0.axis; }));
    SetOut(n, out);
  }

  // A Reshape that only drops or adds size-1 axes after the channels, [N, C, 1, 1] -> [N, C] as the
  // exporters flatten a pooled feature map: the same leading dims, the channel count, then ones. Its
  // constant shape gets the kept count.
  template <class Fail>
  void VisitReshape(int ni, const Node& n, const ChannelMap& m0, const Fail& fail) {
    const Tensor* shape = n.inputs.size() > 1 ? Const(n.inputs[1]) : nullptr;
    if (!shape && n.inputs.size() > 1 && n.inputs[1] >= 0) return VisitComputedFlatten(n, m0, fail);
    if (!shape || shape->dtype() != DType::kInt64 || shape->rank() != 1) return fail("its shape is computed");
    const int in_rank = Rank(n.inputs[0]);
    const int k = m0.axis;
    if (in_rank < 0 || static_cast<int>(shape->numel()) <= k) return fail("reshapes the channels");
    for (int d = k + 1; d < in_rank; ++d)
      if (DimAt(n.inputs[0], d) != 1) return fail("reshapes the channels with the axes after them");
    const int64_t* s = shape->data<int64_t>();
    const bool allowzero = n.attrs.GetInt("allowzero", 0) != 0;
    if (s[k] != m0.positions()) return fail("reshapes the channels");
    for (int64_t d = k + 1; d < shape->numel(); ++d)
      if (s[d] != 1) return fail("reshapes the channels with the axes after them");
    // The leading entries keep the input's leading dims: copied (0), the one inferred (-1), or equal.
    int inferred = 0;
    for (int d = 0; d < k; ++d) {
      if (s[d] == -1) {
        ++inferred;
      } else if (s[d] == 0 && !allowzero) {
      } else if (s[d] != DimAt(n.inputs[0], d)) {
        return fail("reshapes the axes before the channels");
      }
    }
    if (inferred > 1) return fail("reshapes the axes before the channels");
    ChannelMap out = m0;
    SetOut(n, out);
    AddEdit(EditKind::kChannelReshape, ni, 1, n.inputs[0], k);
  }

  // Whether every reader of Shape node n's output takes dims before `axis` only: Gather of
  // constant indices, or Slice of a constant range (step 1), within [0, axis).
  bool ShapeReadsLeadingDims(const Node& n, int axis) const {
    if (n.attrs.Has("start") || n.attrs.Has("end") || n.outputs.empty() || n.outputs[0] < 0) return false;
    const int sv = n.outputs[0];
    if (g_.IsGraphOutput(sv)) return false;
    const int rank = Rank(n.inputs[0]);
    for (int ci : g_.Consumers(sv)) {
      const Node& c = g_.nodes()[static_cast<size_t>(ci)];
      if (!c.domain.empty() || c.inputs.empty() || c.inputs[0] != sv) return false;
      std::vector<int64_t> idx;
      if (c.op_type == "Gather") {
        if (c.inputs.size() < 2 || !ConstInts(c.inputs[1], &idx)) return false;
        for (int64_t& i : idx) {
          if (i < 0) i += rank;
          if (i < 0 || i >= axis) return false;
        }
        continue;
      }
      if (c.op_type != "Slice") return false;
      std::vector<int64_t> starts, ends, steps;
      if (c.inputs.size() < 3 || !ConstInts(c.inputs[1], &starts) || !ConstInts(c.inputs[2], &ends) ||
          starts.size() != 1 || ends.size() != 1)
        return false;
      if (c.inputs.size() > 4 && c.inputs[4] >= 0 && (!ConstInts(c.inputs[4], &steps) || steps != std::vector<int64_t>{1}))
        return false;
      int64_t b = starts[0] < 0 ? starts[0] + rank : starts[0];
      int64_t e = ends[0] < 0 ? ends[0] + rank : std::min<int64_t>(ends[0], rank);
      if (b < 0 || e > axis || b > e) return false;
    }
    return true;
  }

  // Whether value v is computed from Shape(x)'s leading dims alone: Gather/Slice of that Shape,
  // through Unsqueeze, Squeeze or Cast.
  bool FromLeadingDimsOf(int v, int x, int axis) const {
    for (int hops = 0; hops < 8; ++hops) {
      const Value& val = g_.value(v);
      if (val.producer < 0) return false;
      const Node& p = g_.nodes()[static_cast<size_t>(val.producer)];
      if (!p.domain.empty() || p.inputs.empty() || p.inputs[0] < 0) return false;
      if (p.op_type == "Shape") return p.inputs[0] == x && ShapeReadsLeadingDims(p, axis);
      if (p.op_type != "Gather" && p.op_type != "Slice" && p.op_type != "Unsqueeze" && p.op_type != "Squeeze" &&
          p.op_type != "Cast")
        return false;
      v = p.inputs[0];
    }
    return false;
  }

  // Reshape(x, Concat(leading dims of Shape(x), [-1])): PyTorch's x.view(x.size(0), -1) and
  // Paddle2ONNX's flatten. Like Flatten at the channel axis: each channel's positions become a
  // block of columns, and the computed target follows the pruned tensor by itself.
  template <class Fail>
  void VisitComputedFlatten(const Node& n, const ChannelMap& m0, const Fail& fail) {
    const int x = n.inputs[0], t = n.inputs[1];
    const int k = m0.axis, in_rank = Rank(x);
    const Value& tv = g_.value(t);
    const Node* cat = tv.producer >= 0 ? &g_.nodes()[static_cast<size_t>(tv.producer)] : nullptr;
    if (!cat || cat->op_type != "Concat" || !cat->domain.empty() || cat->inputs.size() < 2 || in_rank < 0 ||
        Rank(n.outputs[0]) != k + 1)
      return fail("its shape is computed");
    std::vector<int64_t> last;
    if (!ConstInts(cat->inputs.back(), &last) || last != std::vector<int64_t>{-1}) return fail("its shape is computed");
    for (size_t i = 0; i + 1 < cat->inputs.size(); ++i)
      if (!FromLeadingDimsOf(cat->inputs[i], x, k)) return fail("its shape is computed");
    int64_t inner = 1;
    for (int d = k + 1; d < in_rank; ++d) {
      const int64_t v = DimAt(x, d);
      if (v < 0) return fail("dims after the channel axis are not static");
      inner *= v;
    }
    ChannelMap out = m0;
    for (Segment& sg : out.segs) sg.block *= inner;
    SetOut(n, out);
  }

  template <class Fail>
  void VisitConcat(const Node& n, const std::vector<int>& ann, const Fail& fail) {
    int rank = Rank(n.outputs[0]);
    int64_t axis = n.attrs.GetInt("axis", 0);
    if (axis < 0) axis += rank;
    const ChannelMap& m0 = *Map(n.inputs[static_cast<size_t>(ann[0])]);
    for (int i : ann)
      if (Map(n.inputs[static_cast<size_t>(i)])->axis != m0.axis) return fail("channel axes differ between inputs");
    if (axis != m0.axis) {
      // Concatenating along another axis couples the inputs' channels like an elementwise op.
      if (ann.size() != n.inputs.size()) return fail("concatenated with tensors that are not pruned along");
      return JoinSameLayout(n, ann, fail);
    }
    ChannelMap out;
    out.axis = m0.axis;
    for (int id : n.inputs) {
      if (Map(id)) {
        for (const Segment& s : Map(id)->segs) out.segs.push_back(s);
      } else {
        int64_t d = DimAt(id, static_cast<int>(axis));
        if (d < 0) return fail("another input's channel count is unknown");
        out.segs.push_back(Segment{-1, d, 1});
      }
    }
    SetOut(n, out);
  }

  template <class Fail>
  void JoinSameLayout(const Node& n, const std::vector<int>& ann, const Fail& fail) {
    ChannelMap out = *Map(n.inputs[static_cast<size_t>(ann[0])]);
    for (size_t k = 1; k < ann.size(); ++k)
      if (!Map(n.inputs[static_cast<size_t>(ann[k])])->SameLayout(out)) return fail("inputs' channel layouts differ");
    for (size_t k = 1; k < ann.size(); ++k) {
      const ChannelMap& o = *Map(n.inputs[static_cast<size_t>(ann[k])]);
      for (size_t s = 0; s < out.segs.size(); ++s) {
        int a = out.segs[s].group, b = o.segs[s].group;
        if (a >= 0 && b >= 0) {
          Union(a, b);
        } else if (a >= 0 || b >= 0) {
          MarkGroup(std::max(a, b), "feeds " + n.DebugName() + ": combined with channels that cannot be pruned");
          out.segs[s].group = -1;
        }
      }
    }
    SetOut(n, out);
  }

  template <class Fail>
  void VisitElementwise(int ni, const Node& n, const std::vector<int>& ann, const Fail& fail) {
    int out_rank = Rank(n.outputs[0]);
    if (out_rank < 0) return fail("output rank unknown");
    const ChannelMap& m0 = *Map(n.inputs[static_cast<size_t>(ann[0])]);
    int out_axis = m0.axis + out_rank - Rank(n.inputs[static_cast<size_t>(ann[0])]);
    for (int i : ann) {
      int id = n.inputs[static_cast<size_t>(i)];
      if (Map(id)->axis + out_rank - Rank(id) != out_axis) return fail("inputs carry channels on different axes");
    }
    std::vector<std::pair<int, int>> const_slices;  // (input, axis)
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      int id = n.inputs[i];
      if (id < 0 || Map(id)) continue;
      int r = Rank(id);
      if (r < 0) return fail("another input's rank is unknown");
      int ax = out_axis - (out_rank - r);
      if (ax < 0) continue;  // broadcast over the channel axis
      int64_t d = DimAt(id, ax);
      if (d == 1) continue;
      if (Const(id) && d == m0.positions()) {
        const_slices.emplace_back(static_cast<int>(i), ax);
        continue;
      }
      return fail("combined with '" + g_.value(id).name + "', which is not pruned along");
    }
    JoinSameLayout(n, ann, fail);
    if (!Map(n.outputs[0])) return;
    // The output's channel axis is the broadcast axis; record it for KeptPositions.
    Map(n.outputs[0])->axis = out_axis;
    for (auto [input, ax] : const_slices) AddEdit(EditKind::kConstOperand, ni, input, n.outputs[0], ax);
  }

  const Graph& g_;
  ChannelAnalysis a_;
  std::vector<HeadBlock> heads_;
  std::vector<int> head_gid_;            // per block: the group of its first producer (-1: none yet)
  std::map<int, int> split_of_;          // split Reshape node -> block (every block)
  std::map<int, int> merge_of_;          // merge Reshape node -> block (prunable blocks)
  std::map<int, int> head_producer_;     // projection node -> block (prunable blocks)
};

}  // namespace

int64_t ChannelMap::positions() const {
  int64_t p = 0;
  for (const Segment& s : segs) p += s.channels * s.block;
  return p;
}

bool ChannelMap::SameLayout(const ChannelMap& o) const {
  if (segs.size() != o.segs.size()) return false;
  for (size_t i = 0; i < segs.size(); ++i)
    if (segs[i].channels != o.segs[i].channels || segs[i].block != o.segs[i].block) return false;
  return true;
}

int ChannelAnalysis::Root(int group) const {
  while (parent[static_cast<size_t>(group)] != group) group = parent[static_cast<size_t>(group)];
  return group;
}

std::vector<std::string> ChannelAnalysis::Reasons(int root) const {
  std::vector<std::string> out;
  for (size_t gid = 0; gid < reasons.size(); ++gid) {
    if (Root(static_cast<int>(gid)) != root) continue;
    for (const std::string& r : reasons[gid])
      if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  return out;
}

std::vector<int> ChannelAnalysis::ProducersOf(int root) const {
  std::vector<int> out;
  for (size_t i = 0; i < producers.size(); ++i)
    if (Root(producers[i].group) == root) out.push_back(static_cast<int>(i));
  return out;
}

std::vector<int> ChannelAnalysis::Roots() const {
  std::vector<int> out;
  for (const Producer& p : producers) {
    int r = Root(p.group);
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  }
  return out;
}

StatusOr<ChannelAnalysis> Analyze(const Graph& g) { return Analyzer(g).Run(); }

std::vector<int64_t> KeptPositions(const ChannelAnalysis& a, const ChannelMap& m,
                                   const std::map<int, std::vector<bool>>& keep) {
  std::vector<int64_t> out;
  int64_t offset = 0;
  for (const Segment& s : m.segs) {
    const std::vector<bool>* mask = nullptr;
    if (s.group >= 0) {
      auto it = keep.find(a.Root(s.group));
      if (it != keep.end()) mask = &it->second;
    }
    for (int64_t c = 0; c < s.channels; ++c) {
      if (!mask || (*mask)[static_cast<size_t>(c)])
        for (int64_t b = 0; b < s.block; ++b) out.push_back(offset + c * s.block + b);
    }
    offset += s.channels * s.block;
  }
  return out;
}

}  // namespace whittle::prune
