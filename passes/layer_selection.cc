#include "passes/layer_selection.h"

namespace whittle {
namespace {

std::string Quoted(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s;
}

}  // namespace

StatusOr<LayerSelection> LayerSelection::Parse(PassOptions& o, Skip skip) {
  LayerSelection s;
  s.pass_ = o.pass();
  for (const std::string& name : o.GetList("exclude")) {
    if (name.empty()) return InvalidArgument("--" + s.pass_ + ": exclude= has an empty layer name");
    s.exclude_.push_back(name);
    s.exclude_set_.insert(name);
  }
  for (auto& [name, lo] : o.layers()) {
    s.layer_names_.push_back(name);
    if (skip == Skip::kRefused) continue;
    WH_ASSIGN_OR_RETURN(int64_t v, lo.GetInt("skip", 0, 0, 1));
    if (v) s.skip_set_.insert(name);
  }
  return s;
}

std::string LayerSelection::LeftAloneReason(const std::string& node) const {
  if (excluded(node)) return "excluded by exclude=";
  if (skipped(node)) return "skip=1 for this layer";
  return "";
}

Status LayerSelection::Check(const Graph& g, const std::set<std::string>& op_types) const {
  std::set<std::string> nodes;
  for (const Node& n : g.nodes())
    if (op_types.empty() || op_types.count(n.op_type)) nodes.insert(n.name);
  std::string missing;
  for (const std::string& e : exclude_)
    if (!nodes.count(e)) missing += (missing.empty() ? "'" : ", '") + e + "' (exclude=)";
  for (const std::string& l : layer_names_)
    if (!nodes.count(l)) missing += (missing.empty() ? "'" : ", '") + l + "' (layer=)";
  if (missing.empty()) return Status::Ok();
  if (op_types.empty()) return InvalidArgument("--" + pass_ + ": no node named " + missing + " in the model");
  std::string kinds;
  for (const std::string& t : op_types) kinds += (kinds.empty() ? "" : "/") + t;
  return InvalidArgument("--" + pass_ + ": no " + kinds + " node named " + missing + " in the model (its " + kinds +
                         " nodes: " + Quoted(std::vector<std::string>(nodes.begin(), nodes.end())) + ")");
}

}  // namespace whittle
