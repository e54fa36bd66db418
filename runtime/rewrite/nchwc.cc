#include "runtime/rewrite/nchwc.h"

#include <functional>
#include <map>
#include <set>
#include <string>

#include "lib/ir/binary_format.h"
#include "lib/ops/op_def.h"
#include "runtime/rewrite/match.h"

namespace whittle {
namespace {


// Known channel count of a rank-4 float value, or -1.
int64_t Channels(const Graph& g, int v) {
  if (v < 0) return -1;
  const Value& val = g.value(v);
  if (val.dtype != DType::kFloat32 || !val.shape || val.shape->size() != 4 || !(*val.shape)[1].known()) return -1;
  return (*val.shape)[1].value;
}

class Converter {
 public:
  // skip: indices of Conv (and BatchNormalization) nodes to leave alone.
  Converter(Graph& g, int block, std::set<int> skip) : g_(g), block_(block), skip_(std::move(skip)) {}

  // Original index of each converted Conv, by the index of the NchwcConv that replaced it.
  const std::map<int, int>& ConvOrigins() const { return conv_origin_; }

  Status Run(int* converted) {
    WH_ASSIGN_OR_RETURN(std::vector<int> order, g_.TopologicalOrder());
    for (int ni : order) {
      const Node n = g_.nodes()[static_cast<size_t>(ni)];  // a copy: AddNode may reallocate
      if ((rewrite::IsOp(n, "Conv") || rewrite::IsOp(n, "BatchNormalization") ||
           (n.domain == kWhittleDomain && n.op_type == "BinaryConv")) &&
          skip_.count(ni))
        continue;
      if (absorbed_.count(ni)) {  // a Relu an earlier conversion took in
        dead_.insert(ni);
        continue;
      }
      current_ = ni;
      if (TryConvert(n)) dead_.insert(ni);
    }
    // Plain values someone outside the region still reads come back through FromNchwc.
    std::set<int> read_plain;
    for (size_t ni = 0; ni < g_.nodes().size(); ++ni) {
      if (dead_.count(static_cast<int>(ni)) || added_.count(static_cast<int>(ni))) continue;
      for (int v : g_.nodes()[ni].inputs)
        if (v >= 0 && blocked_.count(v) && produced_here_.count(v)) read_plain.insert(v);
    }
    for (int v : g_.outputs())
      if (blocked_.count(v) && produced_here_.count(v)) read_plain.insert(v);
    for (int v : read_plain) {
      Node from;
      from.name = g_.UniqueName(g_.value(v).name + "_from_nchwc");
      from.op_type = "FromNchwc";
      from.domain = kWhittleDomain;
      from.inputs = {blocked_.at(v)};
      from.outputs = {v};
      from.attrs.Set("channels", Attribute::Int(channels_.at(v)));
      Add(std::move(from));
    }
    if (!dead_.empty() && g_.OpsetFor(kWhittleDomain) == 0) g_.opset_imports[kWhittleDomain] = 1;
    // RemoveNodes renumbers: the origins are keyed by the new nodes' indices after it.
    const int removed_before_added = static_cast<int>(dead_.size());
    g_.RemoveNodes(dead_);
    std::map<int, int> shifted;
    for (const auto& [idx, orig] : conv_origin_) shifted[idx - removed_before_added] = orig;
    conv_origin_ = std::move(shifted);
    *converted = static_cast<int>(dead_.size());
    return Status::Ok();
  }

 private:
  bool IsBlocked(int v) const { return v >= 0 && blocked_.count(v); }

  // The blocked form of v: its converted producer's output, or a ToNchwc of it (made once).
  int BlockedOf(int v) {
    auto it = blocked_.find(v);
    if (it != blocked_.end()) return it->second;
    const int64_t c = Channels(g_, v);
    Node to;
    to.name = g_.UniqueName(g_.value(v).name + "_to_nchwc");
    to.op_type = "ToNchwc";
    to.domain = kWhittleDomain;
    to.inputs = {v};
    const int out = NewValue(v, c);
    to.outputs = {out};
    to.attrs.Set("block", Attribute::Int(block_));
    Add(std::move(to));
    return out;
  }

  // A new blocked value standing for plain value v (c channels).
  int NewValue(int v, int64_t c) {
    const int id = g_.AddValue(g_.UniqueName(g_.value(v).name + "_nchwc"), DType::kFloat32);
    blocked_[v] = id;
    channels_[v] = c;
    return id;
  }

  int Add(Node n) {
    const int i = g_.AddNode(std::move(n));
    added_.insert(i);
    return i;
  }

  // Blockable: a known channel count that is a multiple of the block (any, for NHWC).
  bool Blockable(int v) const {
    const int64_t c = Channels(g_, v);
    return c > 0 && (block_ == 0 || c % block_ == 0);
  }

  bool TryConvert(const Node& n) {
    if (n.outputs.size() != 1 || n.outputs[0] < 0) return false;
    const int y = n.outputs[0];
    if (rewrite::IsOp(n, "Conv")) return ConvertConv(n, y);
    if (n.domain == kWhittleDomain && n.op_type == "BinaryConv") return ConvertBinaryConv(n, y);
    if (IsBinaryElementwise(n)) return ConvertBinaryElementwise(n, y);
    if (rewrite::IsOp(n, "Concat")) return ConvertConcat(n, y);
    if (rewrite::IsOp(n, "BatchNormalization")) return ConvertBatchNorm(n, y);
    if (!IsBlocked(rewrite::InputAt(n, 0))) return false;
    const int x = n.inputs[0];
    if (rewrite::IsOp(n, "MaxPool") || rewrite::IsOp(n, "AveragePool") || rewrite::IsOp(n, "GlobalMaxPool") ||
        rewrite::IsOp(n, "GlobalAveragePool")) {
      if (Channels(g_, y) != channels_.at(x)) return false;
      Node p;
      p.name = n.name;
      p.op_type = "NchwcPool";
      p.domain = kWhittleDomain;
      p.attrs = n.attrs;
      p.attrs.Erase("storage_order");  // only shapes the Indices output, which is absent here
      p.attrs.Set("pool", Attribute::String(n.op_type));
      p.inputs = {blocked_.at(x)};
      p.outputs = {NewValue(y, channels_.at(x))};
      produced_here_.insert(y);
      Add(std::move(p));
      return true;
    }
    // Element-wise activations do not care about the layout (Clip's bounds are scalars).
    static const std::set<std::string> kUnary = {"Relu",    "LeakyRelu",   "Sigmoid",   "Tanh",
                                                 "Clip",    "HardSigmoid", "HardSwish"};
    if (n.domain.empty() && kUnary.count(n.op_type)) {
      for (size_t i = 1; i < n.inputs.size(); ++i) {
        const Tensor* t = rewrite::ConstInput(g_, n, i);
        if (n.inputs[i] >= 0 && (!t || t->numel() != 1)) return false;
      }
      Node r = n;
      r.inputs[0] = blocked_.at(x);
      r.outputs = {NewValue(y, channels_.at(x))};
      produced_here_.insert(y);
      Add(std::move(r));
      return true;
    }
    return false;
  }

  static bool IsBinaryElementwise(const Node& n) {
    return n.domain.empty() && n.inputs.size() == 2 &&
           (n.op_type == "Add" || n.op_type == "Mul" || n.op_type == "Sub" || n.op_type == "Div");
  }

  // Add / Mul / Sub / Div with a blocked operand: the other of the same shape (a residual), or
  // [N or 1, C, 1, 1] (squeeze-excitation's per-channel scale), goes blocked too, and the op
  // broadcasts over the blocked dims as over the plain ones. The output must have x's shape.
  bool ConvertBinaryElementwise(const Node& n, int y) {
    const int bi = IsBlocked(n.inputs[0]) ? 0 : IsBlocked(n.inputs[1]) ? 1 : -1;
    if (bi < 0) return false;
    const int x = n.inputs[static_cast<size_t>(bi)], other = n.inputs[static_cast<size_t>(1 - bi)];
    if (other < 0) return false;
    const Value& xv = g_.value(x);
    const Value& ov = g_.value(other);
    const Value& yv = g_.value(y);
    if (!xv.shape || !ov.shape || !yv.shape || *yv.shape != *xv.shape || !Blockable(other)) return false;
    const SymShape& os = *ov.shape;
    const bool same = os == *xv.shape;
    const bool per_channel = os.size() == 4 && (os[0] == (*xv.shape)[0] || os[0] == Dim(1)) && os[2] == Dim(1) &&
                             os[3] == Dim(1);
    if (!same && !per_channel) return false;
    Node a = n;
    a.inputs[static_cast<size_t>(bi)] = blocked_.at(x);
    a.inputs[static_cast<size_t>(1 - bi)] = BlockedOf(other);
    a.outputs = {NewValue(y, channels_.at(x))};
    produced_here_.insert(y);
    Add(std::move(a));
    return true;
  }

  // Concat along the channels (Inception's and SqueezeNet's branches, DenseNet's growing feature
  // map) with a blocked input: every input goes blocked and the blocked tensors are concatenated
  // along their block axis, [N, C/b, H, W, b] on axis 1 (whole blocks, as every channel count is a
  // multiple of b) or NHWC's [N, 1, H, W, C] on axis 4, by the plain Concat kernel.
  bool ConvertConcat(const Node& n, int y) {
    const Value& yv = g_.value(y);
    if (!yv.shape || yv.shape->size() != 4) return false;
    int64_t axis = n.attrs.GetInt("axis", 1);
    if (axis < 0) axis += 4;
    if (axis != 1 || n.inputs.empty()) return false;
    bool any_blocked = false;
    int64_t total = 0;
    for (int v : n.inputs) {
      if (v < 0 || (!IsBlocked(v) && !Blockable(v))) return false;
      any_blocked |= IsBlocked(v);
      total += IsBlocked(v) ? channels_.at(v) : Channels(g_, v);
    }
    if (!any_blocked || Channels(g_, y) != total) return false;
    Node c = n;
    for (int& v : c.inputs) v = BlockedOf(v);
    c.attrs.Set("axis", Attribute::Int(block_ ? 1 : 4));
    c.outputs = {NewValue(y, total)};
    produced_here_.insert(y);
    Add(std::move(c));
    return true;
  }

  // An inference BatchNormalization on blocked data that no conv before it could absorb (DenseNet's
  // and pre-activation ResNets' BN -> Relu -> Conv on a concatenation or a residual sum) is a
  // depthwise 1x1 convolution with weight scale / sqrt(var + eps) and bias B - mean * weight: it
  // stays in the region, with a Relu right after it as its post-op, instead of two reorders.
  bool ConvertBatchNorm(const Node& n, int y) {
    const int x = rewrite::InputAt(n, 0);
    if (!IsBlocked(x) || n.inputs.size() != 5 || n.attrs.GetInt("training_mode", 0) != 0) return false;
    const int64_t c = channels_.at(x);
    const auto bn = rewrite::BatchNormConstants(g_, n, c);
    if (!bn) return false;
    Tensor w(DType::kFloat32, {c, 1, 1, 1}), bias(DType::kFloat32, {c});
    for (int64_t k = 0; k < c; ++k) {
      const float a = bn->Multiplier(k);
      w.data<float>()[k] = a;
      bias.data<float>()[k] = bn->beta[k] - bn->mean[k] * a;
    }
    Node conv;
    conv.name = n.name;
    conv.op_type = "Conv";
    conv.attrs.Set("kernel_shape", Attribute::Ints({1, 1}));
    conv.attrs.Set("group", Attribute::Int(c));
    // A sole Relu reader becomes the conv's activation (its node goes with the BatchNormalization).
    int out = y;
    const std::vector<int> readers = g_.Consumers(y);
    if (readers.size() == 1 && !g_.IsGraphOutput(y)) {
      const Node& r = g_.nodes()[static_cast<size_t>(readers[0])];
      if (rewrite::IsOp(r, "Relu") && r.outputs.size() == 1 && r.outputs[0] >= 0) {
        conv.attrs.Set("_activation", Attribute::String("Relu"));
        out = r.outputs[0];
        absorbed_.insert(readers[0]);
      }
    }
    conv.inputs = {x, -1, g_.AddInitializer(g_.UniqueName(n.name + "_bias_folded"), std::move(bias))};
    if (ConvertConv(conv, out, &w)) return true;
    if (out != y) absorbed_.erase(readers[0]);
    return false;
  }

  // An ai.whittle BinaryConv with float activations is the Conv of weight sign * alpha
  // (lib/ops/binary.cc): its packed bits are decoded into that float weight, which only this
  // in-memory graph holds (the saved model keeps the bits), and it becomes an NchwcConv like a
  // Conv, with the blocked layout and a fused Relu (its CPU kernel runs the float Conv kernel on
  // the same decoded weight; without the conversion it would stay NCHW between blocked nodes).
  bool ConvertBinaryConv(const Node& n, int y) {
    if (n.attrs.GetString("activations", "float") != "float" || n.attrs.GetInt("group", 1) != 1) return false;
    const Tensor* bits = rewrite::ConstInput(g_, n, 1);
    const Tensor* alpha = rewrite::ConstInput(g_, n, 2);
    const std::vector<int64_t> ks = n.attrs.GetInts("kernel_shape", {});
    const int64_t m = n.attrs.GetInt("out_channels", 0), c = n.attrs.GetInt("in_channels", 0);
    if (!bits || !alpha || ks.size() != 2 || m < 1 || c < 1) return false;
    const BinaryAttrs ba{m, c * ks[0] * ks[1], false, false};
    const Tensor* bias = rewrite::ConstInput(g_, n, 3);
    if (rewrite::InputAt(n, 3) >= 0 && !bias) return false;
    if (!CheckBinaryTensors(ba, *bits, *alpha, bias, true).ok()) return false;
    Tensor w(DType::kFloat32, {m, c, ks[0], ks[1]});
    const int64_t words = BinaryWords(ba.k);
    for (int64_t o = 0; o < m; ++o) {
      const float a = alpha->data<float>()[o];
      for (int64_t i = 0; i < ba.k; ++i)
        w.data<float>()[o * ba.k + i] = BinaryBit(bits->data<uint64_t>() + o * words, i) ? a : -a;
    }
    Node conv;
    conv.name = n.name;
    conv.op_type = "Conv";
    for (const char* a : {"kernel_shape", "strides", "pads", "dilations", "auto_pad", "group", "_activation"})
      if (const Attribute* v = n.attrs.Find(a)) conv.attrs.Set(a, *v);
    conv.inputs = {rewrite::InputAt(n, 0), -1, rewrite::InputAt(n, 3)};
    return ConvertConv(conv, y, &w);
  }

  // decoded: the weight when n's input 1 is not yet a value (ConvertBinaryConv), added to the
  // graph as an initializer only when the conversion happens.
  bool ConvertConv(const Node& n, int y, const Tensor* decoded = nullptr) {
    const int x = rewrite::InputAt(n, 0);
    const Tensor* w = decoded ? decoded : rewrite::ConstInput(g_, n, 1);
    const int b = rewrite::InputAt(n, 2);
    if (x < 0 || !w || w->dtype() != DType::kFloat32 || w->rank() != 4 || (block_ && w->dim(0) % block_ != 0))
      return false;
    if (b >= 0 && !rewrite::ConstValue(g_, b)) return false;
    // Group 1, or depthwise (one filter per channel: MobileNet's, EfficientNet's, ConvNeXt's
    // 3x3/5x5/7x7 convs), which oneDNN runs on the blocked layout with its depthwise kernels.
    const int64_t group = n.attrs.GetInt("group", 1);
    const bool depthwise = group > 1 && w->dim(1) == 1 && w->dim(0) == group;
    if ((group != 1 && !depthwise) || n.inputs.size() > 4) return false;
    const int64_t c = Channels(g_, x);
    if (c != w->dim(1) * group || Channels(g_, y) != w->dim(0)) return false;
    // A conv on a 1x1 image (squeeze-excitation) is a matrix-vector product, where oneDNN's
    // per-call cost exceeds the whole computation of the NCHW kernel.
    const SymShape& xs = *g_.value(x).shape;
    if (xs[2].known() && xs[3].known() && xs[2].value == 1 && xs[3].value == 1) return false;
    // (NHWC with 8 or 16 output channels is the blocked layout too: conv_onednn.cc.)
    const bool plain_input = !depthwise && !IsBlocked(x) &&
                             (block_ ? c <= 3 : (c == 1 || (c <= 3 && (w->dim(0) == 8 || w->dim(0) == 16))));
    if (!plain_input && !IsBlocked(x) && !Blockable(x)) return false;
    const int sum = rewrite::InputAt(n, 3);
    if (sum >= 0 && !IsBlocked(sum) && !Blockable(sum)) return false;
    Node conv;
    conv.name = n.name;
    conv.op_type = "NchwcConv";
    conv.domain = kWhittleDomain;
    conv.attrs = n.attrs;
    conv.attrs.Set("block", Attribute::Int(block_));
    if (plain_input) conv.attrs.Set("plain_input", Attribute::Int(1));
    const int64_t m = w->dim(0);  // w points into the value table, which the next lines grow
    const int wid = decoded ? g_.AddInitializer(g_.UniqueName(n.name + "_weight_decoded"), *decoded) : n.inputs[1];
    conv.inputs = {plain_input ? x : BlockedOf(x), wid, b};
    if (sum >= 0) conv.inputs.push_back(BlockedOf(sum));
    conv.outputs = {NewValue(y, m)};
    produced_here_.insert(y);
    conv_origin_[Add(std::move(conv))] = current_;
    return true;
  }

  Graph& g_;
  const int block_;
  const std::set<int> skip_;
  int current_ = -1;                  // index of the node being converted
  std::map<int, int> conv_origin_;    // NchwcConv index -> the Conv it replaced
  std::map<int, int> blocked_;       // plain value -> its blocked counterpart
  std::map<int, int64_t> channels_;  // plain value -> its channel count
  std::set<int> produced_here_;      // plain values whose producer was converted
  std::set<int> dead_, added_;
  std::set<int> absorbed_;           // Relu nodes a converted BatchNormalization took in
};

}  // namespace

// Convs of regions (nodes joined by blocked values) holding fewer than two convolutions: a lone
// conv pays two reorders and loses the per-geometry path choice of the NCHW Conv kernel
// (measured: MobileNet's pointwise convs between depthwise ones, 22 % slower at batch 1).
std::set<int> LoneConvs(const Graph& g, const std::map<int, int>& origins) {
  const size_t n = g.nodes().size();
  std::vector<int> parent(n);
  for (size_t i = 0; i < n; ++i) parent[i] = static_cast<int>(i);
  std::function<int(int)> find = [&](int i) { return parent[i] == i ? i : parent[i] = find(parent[i]); };
  auto blocked_op = [&](const Node& node) {
    return node.domain == kWhittleDomain && (node.op_type == "NchwcConv" || node.op_type == "NchwcPool");
  };
  for (size_t i = 0; i < n; ++i) {
    const Node& node = g.nodes()[i];
    const bool passthrough = !blocked_op(node) && node.domain.empty();  // Relu / Add on blocked data
    if (!blocked_op(node) && !passthrough) continue;
    for (int v : node.inputs) {
      if (v < 0) continue;
      const Value& val = g.value(v);
      if (val.producer < 0 || !val.shape || val.shape->size() != 5) continue;  // blocked values are 5-D
      const Node& p = g.nodes()[static_cast<size_t>(val.producer)];
      if (p.op_type == "ToNchwc") continue;
      parent[static_cast<size_t>(find(static_cast<int>(i)))] = find(val.producer);
    }
  }
  std::map<int, int> convs_in;
  for (const auto& [idx, orig] : origins) ++convs_in[find(idx)];
  std::set<int> lone;
  for (const auto& [idx, orig] : origins)
    if (convs_in[find(idx)] < 2) lone.insert(orig);
  return lone;
}

Status ConvertToNchwc(Graph& g, int block, int* converted) {
  *converted = 0;
  if (block != 0 && block != 8 && block != 16) return InvalidArgument("NCHWc block must be 0, 8 or 16");
  // A trial conversion finds the regions; the real one leaves out the convs that would be alone.
  Graph trial = g;
  Converter t(trial, block, {});
  int n = 0;
  WH_RETURN_IF_ERROR(t.Run(&n));
  WH_RETURN_IF_ERROR(InferShapes(trial));
  const std::set<int> lone = LoneConvs(trial, t.ConvOrigins());
  if (lone.empty()) {
    g = std::move(trial);
    *converted = n;
    return Status::Ok();
  }
  return Converter(g, block, lone).Run(converted);
}

}  // namespace whittle
