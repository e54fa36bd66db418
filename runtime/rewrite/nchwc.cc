#include "runtime/rewrite/nchwc.h"

#include <map>
#include <set>
#include <string>

#include "runtime/rewrite/match.h"

namespace whittle {
namespace {

constexpr const char* kDomain = "ai.whittle";

// Known channel count of a rank-4 float value, or -1.
int64_t Channels(const Graph& g, int v) {
  if (v < 0) return -1;
  const Value& val = g.value(v);
  if (val.dtype != DType::kFloat32 || !val.shape || val.shape->size() != 4 || !(*val.shape)[1].known()) return -1;
  return (*val.shape)[1].value;
}

class Converter {
 public:
  Converter(Graph& g, int block) : g_(g), block_(block) {}

  Status Run(int* converted) {
    WH_ASSIGN_OR_RETURN(std::vector<int> order, g_.TopologicalOrder());
    for (int ni : order) {
      const Node n = g_.nodes()[static_cast<size_t>(ni)];  // a copy: AddNode may reallocate
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
      from.domain = kDomain;
      from.inputs = {blocked_.at(v)};
      from.outputs = {v};
      from.attrs.Set("channels", Attribute::Int(channels_.at(v)));
      Add(std::move(from));
    }
    if (!dead_.empty() && g_.OpsetFor(kDomain) == 0) g_.opset_imports[kDomain] = 1;
    g_.RemoveNodes(dead_);
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
    to.domain = kDomain;
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

  void Add(Node n) { added_.insert(g_.AddNode(std::move(n))); }

  // Blockable: a known channel count that is a multiple of the block (any, for NHWC).
  bool Blockable(int v) const {
    const int64_t c = Channels(g_, v);
    return c > 0 && (block_ == 0 || c % block_ == 0);
  }

  bool TryConvert(const Node& n) {
    if (n.outputs.size() != 1 || n.outputs[0] < 0) return false;
    const int y = n.outputs[0];
    if (rewrite::IsOp(n, "Conv")) return ConvertConv(n, y);
    if (!IsBlocked(rewrite::InputAt(n, 0))) return false;
    const int x = n.inputs[0];
    if (rewrite::IsOp(n, "MaxPool") || rewrite::IsOp(n, "AveragePool") || rewrite::IsOp(n, "GlobalMaxPool") ||
        rewrite::IsOp(n, "GlobalAveragePool")) {
      if (Channels(g_, y) != channels_.at(x)) return false;
      Node p;
      p.name = n.name;
      p.op_type = "NchwcPool";
      p.domain = kDomain;
      p.attrs = n.attrs;
      p.attrs.Erase("storage_order");  // only shapes the Indices output, which is absent here
      p.attrs.Set("pool", Attribute::String(n.op_type));
      p.inputs = {blocked_.at(x)};
      p.outputs = {NewValue(y, channels_.at(x))};
      produced_here_.insert(y);
      Add(std::move(p));
      return true;
    }
    if (rewrite::IsOp(n, "Relu") && n.inputs.size() == 1) {
      Node r = n;
      r.inputs = {blocked_.at(x)};
      r.outputs = {NewValue(y, channels_.at(x))};
      produced_here_.insert(y);
      Add(std::move(r));
      return true;
    }
    if (rewrite::IsOp(n, "Add") && n.inputs.size() == 2) {
      const int other = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
      const Value& xv = g_.value(x);
      const Value& ov = g_.value(other);
      if (other < 0 || !xv.shape || !ov.shape || *xv.shape != *ov.shape || !Blockable(other)) return false;
      Node a = n;
      a.inputs = {blocked_.at(x), BlockedOf(other)};
      a.outputs = {NewValue(y, channels_.at(x))};
      produced_here_.insert(y);
      Add(std::move(a));
      return true;
    }
    return false;
  }

  bool ConvertConv(const Node& n, int y) {
    const int x = rewrite::InputAt(n, 0);
    const Tensor* w = rewrite::ConstInput(g_, n, 1);
    const int b = rewrite::InputAt(n, 2);
    if (x < 0 || !w || w->dtype() != DType::kFloat32 || w->rank() != 4 || (block_ && w->dim(0) % block_ != 0))
      return false;
    if (b >= 0 && !rewrite::ConstValue(g_, b)) return false;
    if (n.attrs.GetInt("group", 1) != 1 || n.inputs.size() > 4) return false;
    const int64_t c = Channels(g_, x);
    if (c != w->dim(1) || Channels(g_, y) != w->dim(0)) return false;
    // (NHWC with 8 or 16 output channels is the blocked layout too: conv_onednn.cc.)
    const bool plain_input =
        !IsBlocked(x) && (block_ ? c <= 3 : (c == 1 || (c <= 3 && (w->dim(0) == 8 || w->dim(0) == 16))));
    if (!plain_input && !IsBlocked(x) && !Blockable(x)) return false;
    const int sum = rewrite::InputAt(n, 3);
    if (sum >= 0 && !IsBlocked(sum) && !Blockable(sum)) return false;
    Node conv;
    conv.name = n.name;
    conv.op_type = "NchwcConv";
    conv.domain = kDomain;
    conv.attrs = n.attrs;
    conv.attrs.Set("block", Attribute::Int(block_));
    if (plain_input) conv.attrs.Set("plain_input", Attribute::Int(1));
    const int64_t m = w->dim(0);  // w points into the value table, which the next lines grow
    conv.inputs = {plain_input ? x : BlockedOf(x), n.inputs[1], b};
    if (sum >= 0) conv.inputs.push_back(BlockedOf(sum));
    conv.outputs = {NewValue(y, m)};
    produced_here_.insert(y);
    Add(std::move(conv));
    return true;
  }

  Graph& g_;
  const int block_;
  std::map<int, int> blocked_;       // plain value -> its blocked counterpart
  std::map<int, int64_t> channels_;  // plain value -> its channel count
  std::set<int> produced_here_;      // plain values whose producer was converted
  std::set<int> dead_, added_;
};

}  // namespace

Status ConvertToNchwc(Graph& g, int block, int* converted) {
  *converted = 0;
  if (block != 0 && block != 8 && block != 16) return InvalidArgument("NCHWc block must be 0, 8 or 16");
  return Converter(g, block).Run(converted);
}

}  // namespace whittle
