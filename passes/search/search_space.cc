#include "passes/search/search_space.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "passes/pass_manager.h"
#include "passes/pass_options.h"
#include "passes/pass_registry.h"

namespace whittle::search {
namespace {

std::string Share(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// The original layer a node of a rewritten graph comes from: itself, or the layer whose factor it
// is ('<layer>/svd_u', '<layer>/svd_v').
std::string Origin(const std::string& node) {
  for (const char* suffix : {"/svd_u", "/svd_v"}) {
    const std::string s = suffix;
    if (node.size() > s.size() && node.compare(node.size() - s.size(), s.size(), s) == 0)
      return node.substr(0, node.size() - s.size());
  }
  return node;
}

bool OneOf(const std::string& op, const std::vector<std::string>& types) {
  return std::find(types.begin(), types.end(), op) != types.end();
}

// A pass's options: the user's base spec, then `exclude=` every node of `types` whose layer is not
// in `chosen`, then the per-layer items. Empty when no node of the graph belongs to `chosen`.
std::string SpecFor(const Graph& g, const std::vector<std::string>& types,
                    const std::map<std::string, std::string>& chosen,  // layer -> per-layer items ("" none)
                    std::vector<std::string>* nodes) {
  std::string exclude, layers;
  std::set<std::string> seen;
  for (const Node& n : g.nodes()) {
    if (!OneOf(n.op_type, types) || n.name.empty() || !seen.insert(n.name).second) continue;
    auto it = chosen.find(Origin(n.name));
    if (it == chosen.end()) {
      exclude += (exclude.empty() ? "" : ",") + n.name;
      continue;
    }
    nodes->push_back(n.name);
    if (!it->second.empty()) layers += ",layer=" + n.name + ":" + it->second;
  }
  std::string spec = (exclude.empty() ? std::string() : "exclude=" + exclude) + layers;
  if (!spec.empty() && spec[0] == ',') spec.erase(0, 1);
  return spec;
}

Status RunPass(Graph& g, const std::string& pass, const std::string& base, const std::string& spec,
               const PassContext& ctx, std::vector<PassReport>* reports) {
  WH_ASSIGN_OR_RETURN(PassOptions opts, PassOptions::Parse(pass, base));
  if (!spec.empty()) {
    WH_ASSIGN_OR_RETURN(PassOptions extra, PassOptions::Parse(pass, spec));
    WH_RETURN_IF_ERROR(opts.Merge(extra));
  }
  WH_ASSIGN_OR_RETURN(std::unique_ptr<Pass> p, MakePass(pass, std::move(opts)));
  PassManager pm;
  pm.Add(std::move(p));
  auto r = pm.Run(&g, ctx);
  if (!r.ok()) return r.status().WithContext("--" + pass + " " + spec.substr(0, 200));
  if (reports)
    for (PassReport& rep : *r) {
      rep.config = base.empty() ? "(search)" : base + " (search)";
      // The layers the search kept away from this pass are listed with the search's choices.
      rep.layers.erase(std::remove_if(rep.layers.begin(), rep.layers.end(),
                                      [](const LayerReport& l) {
                                        return l.action == "skipped" && l.reason.rfind("excluded", 0) == 0;
                                      }),
                       rep.layers.end());
      reports->push_back(std::move(rep));
    }
  return Status::Ok();
}

}  // namespace

std::string Choice::Key() const {
  std::string k;
  if (prune > 0) k = "prune" + Share(prune);
  if (svd > 0) k += (k.empty() ? "" : "+") + std::string("svd") + Share(svd);
  if (!storage.empty()) k += (k.empty() ? "" : "+") + storage;
  return k.empty() ? "float" : k;
}

const std::vector<std::string>& SearchFamilies() {
  static const std::vector<std::string> kAll = {"int8", "int4", "svd", "prune", "cluster", "binarize", "circulant"};
  return kAll;
}

StatusOr<std::set<std::string>> ParseFamilies(const std::string& list) {
  std::set<std::string> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string name = list.substr(pos, comma - pos);
    pos = comma + 1;
    if (name.empty()) continue;
    if (!OneOf(name, SearchFamilies())) {
      std::string known;
      for (const std::string& f : SearchFamilies()) known += (known.empty() ? "" : ", ") + f;
      return InvalidArgument("--passes: unknown pass '" + name + "' (known: " + known + ")");
    }
    out.insert(name);
  }
  if (out.empty()) return InvalidArgument("--passes: no pass given (e.g. --passes int8,svd)");
  return out;
}

StatusOr<SearchSpace> MakeSearchSpace(const Graph& g, const std::set<std::string>& families) {
  SearchSpace s;
  std::set<std::string> names;
  for (const Node& n : g.nodes()) {
    if (n.op_type != "Conv" && n.op_type != "Gemm" && n.op_type != "MatMul") continue;
    const Tensor* w = g.ConstInput(n, 1, DType::kFloat32);
    if (!w) continue;  // activation x activation (attention), or an already quantized weight
    if (n.name.empty() || !names.insert(n.name).second) {
      s.notes.push_back("a " + n.op_type + " without a unique name is left alone");
      continue;
    }
    SearchLayer l;
    l.node = n.name;
    l.op_type = n.op_type;
    const Dims& d = w->dims();
    if (n.op_type == "Conv") {
      const int64_t group = n.attrs.GetInt("group", 1);
      if (d.size() < 3) continue;
      int64_t fan_in = 1;
      for (size_t i = 1; i < d.size(); ++i) fan_in *= d[i];
      l.full_rank = group == 1 ? std::min(d[0], fan_in) : 0;
    } else {
      if (d.size() != 2) continue;
      l.full_rank = std::min(d[0], d[1]);
      l.gemm_like = true;
    }
    std::vector<Choice> structural = {Choice{}};
    if (families.count("prune"))
      for (double r : {0.25, 0.5, 0.75}) structural.push_back(Choice{r, 0, ""});
    if (families.count("svd") && l.full_rank >= 16)
      for (double r : {0.5, 0.25}) structural.push_back(Choice{0, r, ""});
    std::vector<std::string> storage = {""};
    if (families.count("int8")) storage.push_back("int8");
    if (families.count("int8")) storage.push_back("int8w");
    if (families.count("int4") && l.gemm_like) storage.push_back("int4");
    if (families.count("cluster") && l.gemm_like) storage.insert(storage.end(), {"k256", "k16"});
    if (families.count("binarize")) storage.push_back("bin");
    if (families.count("circulant") && l.gemm_like) storage.insert(storage.end(), {"circ4", "circ8", "circ16"});
    std::vector<Choice> choices;
    for (const Choice& st : structural)
      for (const std::string& form : storage) {
        if (st.svd > 0 && form.rfind("circ", 0) == 0) continue;  // a circulant factor saves nothing more
        Choice c = st;
        c.storage = form;
        choices.push_back(c);
      }
    s.layers.push_back(l);
    s.choices.push_back(std::move(choices));
  }
  if (s.layers.empty())
    return InvalidArgument("the model has no Conv, Gemm or MatMul with a constant float weight: nothing to search over");
  return s;
}

StatusOr<Graph> ApplyConfig(const Graph& original, const SearchSpace& space, const Config& config,
                            const BaseSpecs& base, const PassContext& ctx, std::vector<PassReport>* reports) {
  if (config.size() != space.layers.size()) return Internal("ApplyConfig: config size does not match the layers");
  auto base_of = [&](const std::string& pass) {
    auto it = base.find(pass);
    return it == base.end() ? std::string() : it->second;
  };
  // Per family, the chosen layers and their per-layer items.
  std::map<std::string, std::string> prune, svd, int8, int8w, int4, cluster, bin, circ;
  for (size_t i = 0; i < config.size(); ++i) {
    const Choice& c = space.choices[i].at(static_cast<size_t>(config[i]));
    const std::string& node = space.layers[i].node;
    if (c.prune > 0) prune[node] = "ratio=" + Share(c.prune);
    if (c.svd > 0)
      svd[node] = "rank=" + std::to_string(std::max<int64_t>(1, std::llround(c.svd * space.layers[i].full_rank)));
    if (c.storage == "int8") int8[node] = "";
    if (c.storage == "int8w") int8w[node] = "";
    if (c.storage == "int4") int4[node] = "";
    if (c.storage == "k16" || c.storage == "k256") cluster[node] = "k=" + c.storage.substr(1);
    if (c.storage == "bin") bin[node] = "";
    if (c.storage.rfind("circ", 0) == 0) circ[node] = "block=" + c.storage.substr(4);
  }
  // Calibration ranges are shared only between runs that reach the int8 pass with the original
  // graph (no pruning or factorization before it).
  PassContext run_ctx = ctx;
  if (!prune.empty() || !svd.empty()) run_ctx.calibration_cache = nullptr;
  Graph g = original;
  const std::vector<std::string> all = {"Conv", "Gemm", "MatMul"}, mm = {"Gemm", "MatMul"};
  struct Step {
    const char* pass;
    const std::map<std::string, std::string>* chosen;
    const std::vector<std::string>* types;
    const char* fixed;  // options every search run of the pass has
    bool user_base;     // the user's spec for the pass applies (not to int8's weight-only run)
  };
  const Step steps[] = {
      {"prune", &prune, &all, "ratio=0", true},
      {"svd", &svd, &all, "", true},
      {"int8", &int8, &all, "", true},
      {"int8", &int8w, &all, "mode=weight-only,method=gptq", false},
      {"int4", &int4, &mm, "", true},
      {"cluster", &cluster, &mm, "", true},
      {"binarize", &bin, &all, "", true},
      {"circulant", &circ, &all, "", true},
  };
  for (const Step& s : steps) {
    if (s.chosen->empty()) continue;
    std::vector<std::string> nodes;
    std::string spec = SpecFor(g, *s.types, *s.chosen, &nodes);
    if (nodes.empty()) continue;
    if (std::string(s.pass) == "binarize") {  // the first and last layers too, when chosen
      std::string include;
      for (const std::string& n : nodes) include += (include.empty() ? "" : ",") + n;
      spec += (spec.empty() ? "" : ",") + std::string("include=") + include;
    }
    // The search's own options come last, so that they win over the user's base spec.
    if (*s.fixed) spec = std::string(s.fixed) + (spec.empty() ? "" : "," + spec);
    WH_RETURN_IF_ERROR(RunPass(g, s.pass, s.user_base ? base_of(s.pass) : std::string(), spec, run_ctx, reports));
  }
  return g;
}

std::string DescribeConfig(const SearchSpace& space, const Config& config) {
  std::string s;
  for (size_t i = 0; i < config.size() && i < space.layers.size(); ++i) {
    const Choice& c = space.choices[i].at(static_cast<size_t>(config[i]));
    if (c.identity()) continue;
    s += (s.empty() ? "" : ", ") + space.layers[i].node + ": " + c.Key();
  }
  return s.empty() ? "float (nothing compressed)" : s;
}

}  // namespace whittle::search
