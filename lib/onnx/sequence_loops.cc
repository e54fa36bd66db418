// TorchScript's list appended in a loop, read as the scan output it is (see proto_convert.h).
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "lib/onnx/proto_convert.h"

namespace whittle::onnx_io {
namespace {

// Reads of `name` by g's nodes, its nested subgraphs' nodes and g's outputs.
int Uses(const onnx::GraphProto& g, const std::string& name, int depth = 0) {
  int n = 0;
  for (const auto& node : g.node()) {
    for (const auto& i : node.input()) n += i == name;
    for (const auto& a : node.attribute())
      if (a.has_g() && depth < kMaxSubgraphDepth) n += Uses(a.g(), name, depth + 1);
  }
  for (const auto& o : g.output()) n += o.name() == name;
  return n;
}

int Producer(const onnx::GraphProto& g, const std::string& name) {
  for (int i = 0; i < g.node_size(); ++i)
    for (const auto& o : g.node(i).output())
      if (o == name) return i;
  return -1;
}

void CollectNames(const onnx::GraphProto& g, std::set<std::string>* names, int depth = 0) {
  for (const auto& v : g.input()) names->insert(v.name());
  for (const auto& t : g.initializer()) names->insert(t.name());
  for (const auto& node : g.node()) {
    names->insert(node.name());
    for (const auto& o : node.output()) names->insert(o);
    for (const auto& a : node.attribute())
      if (a.has_g() && depth < kMaxSubgraphDepth) CollectNames(a.g(), names, depth + 1);
  }
}

std::string Fresh(std::set<std::string>* names, const std::string& base) {
  std::string n = base;
  for (int k = 1; names->count(n); ++k) n = base + "_" + std::to_string(k);
  names->insert(n);
  return n;
}

const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

void DropValueInfo(onnx::GraphProto* g, const std::set<std::string>& names) {
  auto* vi = g->mutable_value_info();
  for (int i = vi->size() - 1; i >= 0; --i)
    if (names.count(vi->Get(i).name())) vi->DeleteSubrange(i, 1);
}

onnx::NodeProto MakeNode(const std::string& op, std::vector<std::string> in, const std::string& out,
                         const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (auto& i : in) n.add_input(i);
  n.add_output(out);
  return n;
}

// Loop slot k of `loop` (node ni of g): a list appended in the loop becomes a scan output.
// *ni: the Loop's index, updated when a node before it goes.
bool RewriteSlot(onnx::GraphProto* g, int* ni, int k, std::set<std::string>* names) {
  onnx::NodeProto* loop = g->mutable_node(*ni);
  onnx::GraphProto* body = nullptr;
  for (auto& a : *loop->mutable_attribute())
    if (a.name() == "body" && a.has_g()) body = a.mutable_g();
  const int n_carried = loop->input_size() - 2;
  if (!body || body->input_size() != 2 + n_carried || body->output_size() < 1 + n_carried ||
      loop->output_size() < n_carried)
    return false;
  // Before the loop: an empty sequence nothing else reads.
  const std::string init = loop->input(2 + k);
  const int pe = Producer(*g, init);
  if (pe < 0 || g->node(pe).op_type() != "SequenceEmpty" || Uses(*g, init) != 1) return false;
  // In the body: one SequenceInsert at the end appends to it, and only the body's output reads that.
  const std::string s_in = body->input(2 + k).name(), s_out = body->output(1 + k).name();
  const int pi = Producer(*body, s_out);
  if (pi < 0) return false;
  const onnx::NodeProto& ins = body->node(pi);
  if (ins.op_type() != "SequenceInsert" || ins.input_size() != 2 || ins.input(0) != s_in || Uses(*body, s_in) != 1 ||
      Uses(*body, s_out) != 1)
    return false;
  // After the loop: only ConcatFromSequence(axis 0) reads the list.
  const std::string seq = loop->output(k);
  std::vector<int> concats;
  for (int i = 0; i < g->node_size(); ++i)
    for (const auto& in : g->node(i).input())
      if (in == seq) concats.push_back(i);
  if (static_cast<int>(concats.size()) != Uses(*g, seq) || concats.empty()) return false;
  for (int c : concats) {
    const onnx::NodeProto& cn = g->node(c);
    const onnx::AttributeProto* axis = Attr(cn, "axis");
    if (cn.op_type() != "ConcatFromSequence" || cn.input_size() != 1 || !axis || axis->i() != 0) return false;
    const onnx::AttributeProto* new_axis = Attr(cn, "new_axis");
    if (new_axis && new_axis->i() != 0 && new_axis->i() != 1) return false;
  }

  // The body: the appended tensor becomes its last (scan) output.
  const std::string elem = ins.input(1);
  const std::string scan_name = Fresh(names, elem + "_scan");
  body->mutable_node()->DeleteSubrange(pi, 1);
  *body->add_node() = MakeNode("Identity", {elem}, scan_name, Fresh(names, scan_name + "_Identity"));
  body->mutable_input()->DeleteSubrange(2 + k, 1);
  body->mutable_output()->DeleteSubrange(1 + k, 1);
  body->add_output()->set_name(scan_name);
  DropValueInfo(body, {s_in, s_out});
  // The Loop: the slot goes, a scan output of the same name comes last.
  loop->mutable_input()->DeleteSubrange(2 + k, 1);
  loop->mutable_output()->DeleteSubrange(k, 1);
  loop->add_output(seq);
  // ConcatFromSequence: new_axis 1 stacks (the scan output itself); new_axis 0 concatenates
  // (the scan output with its first two dims merged).
  for (int c : concats) {
    onnx::NodeProto* cn = g->mutable_node(c);
    const onnx::AttributeProto* new_axis = Attr(*cn, "new_axis");
    const std::string out = cn->output(0), name = cn->name().empty() ? out : cn->name();
    std::vector<onnx::NodeProto> repl;
    if (new_axis && new_axis->i() == 1) {
      repl.push_back(MakeNode("Identity", {seq}, out, Fresh(names, name + "_Identity")));
    } else {
      const std::string shape = Fresh(names, out + "_shape"), tail = Fresh(names, out + "_tail"),
                        starts = Fresh(names, out + "_two"), ends = Fresh(names, out + "_end"),
                        minus = Fresh(names, out + "_minus_one"), target = Fresh(names, out + "_target");
      auto constant = [&](const std::string& o, int64_t v) {
        onnx::NodeProto n = MakeNode("Constant", {}, o, Fresh(names, o + "_Constant"));
        auto* a = n.add_attribute();
        a->set_name("value");
        a->set_type(onnx::AttributeProto::TENSOR);
        a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
        a->mutable_t()->add_dims(1);
        a->mutable_t()->add_int64_data(v);
        return n;
      };
      repl.push_back(constant(starts, 2));
      repl.push_back(constant(ends, INT64_MAX));
      repl.push_back(constant(minus, -1));
      repl.push_back(MakeNode("Shape", {seq}, shape, Fresh(names, shape + "_Shape")));
      repl.push_back(MakeNode("Slice", {shape, starts, ends}, tail, Fresh(names, tail + "_Slice")));
      onnx::NodeProto cat = MakeNode("Concat", {minus, tail}, target, Fresh(names, target + "_Concat"));
      auto* a = cat.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(0);
      repl.push_back(cat);
      repl.push_back(MakeNode("Reshape", {seq, target}, out, Fresh(names, out + "_Reshape")));
    }
    *cn = repl.back();
    for (size_t r = 0; r + 1 < repl.size(); ++r) *g->add_node() = repl[r];  // the loader sorts nodes
  }
  DropValueInfo(g, {init, seq});
  g->mutable_node()->DeleteSubrange(pe, 1);
  if (pe < *ni) --*ni;
  return true;
}

bool HasSequenceEmpty(const onnx::GraphProto& g, int depth = 0) {
  for (const auto& node : g.node()) {
    if (node.op_type() == "SequenceEmpty") return true;
    for (const auto& a : node.attribute())
      if (a.has_g() && depth < kMaxSubgraphDepth && HasSequenceEmpty(a.g(), depth + 1)) return true;
  }
  return false;
}

void Rewrite(onnx::GraphProto* g, std::set<std::string>* names, int depth) {
  for (auto& node : *g->mutable_node())
    for (auto& a : *node.mutable_attribute())
      if (a.has_g() && depth < kMaxSubgraphDepth) Rewrite(a.mutable_g(), names, depth + 1);
  for (int ni = 0; ni < g->node_size(); ++ni) {
    if (g->node(ni).op_type() != "Loop") continue;
    for (int k = g->node(ni).input_size() - 3; k >= 0; --k) RewriteSlot(g, &ni, k, names);
  }
}

}  // namespace

void RewriteSequenceLoops(onnx::ModelProto* m) {
  if (!m->has_graph() || !HasSequenceEmpty(m->graph())) return;  // one scan for the files without lists
  std::set<std::string> names;
  CollectNames(m->graph(), &names);
  Rewrite(m->mutable_graph(), &names, 0);
}

}  // namespace whittle::onnx_io
