#include "runtime/training/autodiff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lib/ops/emitter.h"
#include "lib/ops/grad_rule.h"
#include "lib/ops/op_def.h"
#include "runtime/training/lift.h"

namespace whittle::training {
namespace {

// Slots whose constant float input is a trainable weight.
bool TrainableSlot(const Node& n, size_t slot) {
  if (n.domain == kWhittleDomain && n.op_type == "CodebookMatMul") return slot == 1 || slot == 3;  // codebook, bias
  if (n.domain == kWhittleDomain && n.op_type == "BlockCirculantMatMul") return slot >= 1;  // block vectors, bias
  if (!n.domain.empty()) return false;
  if (n.op_type == "Gemm" || n.op_type == "Conv") return slot <= 2;
  if (n.op_type == "MatMul") return slot <= 1;
  if (n.op_type == "Add" || n.op_type == "Mul") return true;  // a bias, a scale
  if (n.op_type == "BatchNormalization") return slot == 1 || slot == 2;  // scale, bias (statistics are not trained)
  if (n.op_type == "LayerNormalization") return slot == 1 || slot == 2;  // scale, bias
  if (n.op_type == "Gather") return slot == 0;                             // an embedding table
  if (n.op_type == "Concat") return true;                                  // a learned token
  return false;
}

// Whether a value carries a gradient: float values, and the integer output of a fake
// quantization (its straight-through gradient passes on to the DequantizeLinear after it).
bool Differentiable(const Graph& g, const Node& producer, int v) {
  const DType t = g.value(v).dtype;
  if (t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kFloat64 || t == DType::kBFloat16) return true;
  return producer.domain.empty() && producer.op_type == "QuantizeLinear";
}

// bn_training: every BatchNormalization is fed the batch's statistics (mean and biased variance
// over all axes but the channel axis, computed by ReduceMean nodes) in place of its running ones,
// which become state inputs; the running statistics' ONNX training-mode update
//   running = running * momentum + batch * (1 - momentum)
// is appended as a graph output per statistic. Returns the rewritten nodes' names.
StatusOr<std::set<std::string>> UseBatchStatistics(Graph& g, std::vector<std::pair<int, int>>* updates) {
  std::set<std::string> names;
  Emitter e(g);
  e.set_prefix("bn_train/");
  std::set<int> seen;
  const size_t count = g.nodes().size();
  for (size_t ni = 0; ni < count; ++ni) {
    const Node n = g.nodes()[ni];  // a copy: emitting grows the node list
    if (!n.domain.empty() || n.op_type != "BatchNormalization") continue;
    if (n.attrs.GetInt("training_mode", 0) != 0 || n.outputs.size() > 1)
      return Unimplemented(n.DebugName() + ": BatchNormalization already in training mode (extra outputs)");
    const std::optional<SymShape> sx = ShapeOf(g, n.inputs[0]);
    if (!sx || sx->size() < 2) return Unimplemented(n.DebugName() + ": BatchNormalization needs a known rank");
    for (size_t slot : {size_t{3}, size_t{4}}) {
      const int v = n.inputs[slot];
      if (!g.ConstInput(n, slot, DType::kFloat32))
        return Unimplemented(n.DebugName() + ": training mode needs the running statistics as float32 initializers");
      if (!seen.insert(v).second)
        return Unimplemented(n.DebugName() + ": running statistic '" + g.value(v).name + "' is shared by two nodes");
    }
    std::vector<int64_t> axes{0}, bshape{1, -1};
    for (size_t i = 2; i < sx->size(); ++i) {
      axes.push_back(static_cast<int64_t>(i));
      bshape.push_back(1);
    }
    const int x = n.inputs[0];
    const int mean = e.ReduceMean(x, axes, false);
    const int xc = e.Op("Sub", {x, e.Op("Reshape", {mean, e.Int64s(bshape)})});
    const int var = e.ReduceMean(e.Op("Mul", {xc, xc}), axes, false);
    const float momentum = n.attrs.GetFloat("momentum", 0.9f);
    for (const auto& [slot, batch] : {std::pair<size_t, int>{3, mean}, std::pair<size_t, int>{4, var}}) {
      const int running = n.inputs[slot];
      const int updated =
          e.Op("Add", {e.Op("Mul", {running, e.Scalar(momentum)}), e.Op("Mul", {batch, e.Scalar(1.f - momentum)})});
      updates->push_back({running, updated});
    }
    Node& bn = g.nodes()[ni];
    bn.inputs[3] = mean;
    bn.inputs[4] = var;
    names.insert(n.name);
  }
  return names;
}

// The nodes on the path to value `logits`, in reverse topological order.
StatusOr<std::vector<int>> LiveNodes(const Graph& g, int logits) {
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::set<int> live_values{logits};
  std::vector<int> live_nodes;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& n = g.nodes()[static_cast<size_t>(*it)];
    bool live = false;
    for (int o : n.outputs) live = live || (o >= 0 && live_values.count(o));
    if (!live) continue;
    live_nodes.push_back(*it);
    for (int i : n.inputs)
      if (i >= 0) live_values.insert(i);
  }
  return live_nodes;
}

// The params: float32 constants of rank >= 1 that live nodes read in a trainable slot, or lifted
// latent weights.
std::set<int> Params(const Graph& g, const std::vector<int>& live_nodes, const std::set<int>& latent) {
  std::set<int> params;
  for (int ni : live_nodes) {
    const Node& n = g.nodes()[static_cast<size_t>(ni)];
    for (size_t s = 0; s < n.inputs.size(); ++s) {
      const int v = n.inputs[s];
      if (v < 0 || !g.value(v).is_constant() || g.value(v).dtype != DType::kFloat32) continue;
      if ((TrainableSlot(n, s) || latent.count(v)) && g.value(v).initializer->rank() >= 1) params.insert(v);
    }
  }
  return params;
}

// Which values need gradients: the params and the float values downstream of one (shape
// arithmetic, casts of integers, comparisons and the other integer plumbing exporters emit never
// need one). live_nodes in reverse topological order.
std::set<int> NeedGradients(const Graph& g, const std::vector<int>& live_nodes, const std::set<int>& params) {
  std::set<int> needs(params.begin(), params.end());
  for (auto it = live_nodes.rbegin(); it != live_nodes.rend(); ++it) {
    const Node& n = g.nodes()[static_cast<size_t>(*it)];
    bool any = false;
    for (int i : n.inputs) any = any || (i >= 0 && needs.count(i));
    if (any)
      for (int o : n.outputs)
        if (o >= 0 && Differentiable(g, n, o)) needs.insert(o);
  }
  return needs;
}

// Lifts an initializer to a graph input (fed each step); returns its value.
Tensor LiftToInput(Graph& g, int v) {
  Value& pv = g.value(v);
  Tensor init = *pv.initializer;
  pv.shape = ToSymShape(init.dims());
  pv.initializer.reset();
  g.inputs().push_back(v);
  return init;
}

// A named graph output for v, via Identity (the same value may not be output twice).
std::string AddNamedOutput(Graph& g, int v, const std::string& name) {
  Node id;
  id.name = g.UniqueName("grad/" + name);
  id.op_type = "Identity";
  id.inputs = {v};
  id.outputs = {g.AddValue(g.UniqueName(name))};
  const int out = id.outputs[0];
  g.AddNode(std::move(id));
  g.outputs().push_back(out);
  return g.value(out).name;
}

}  // namespace

StatusOr<TrainingGraph> BuildTrainingGraph(const Graph& model, float temperature, const TrainingGraphOptions& options) {
  RegisterAllOps();
  TrainingGraph tg;
  Graph& g = tg.graph;
  g = model;
  std::vector<int> live_scales;
  WH_ASSIGN_OR_RETURN(std::set<int> latent,
                      LiftQuantizedWeights(g, &tg.quantized, options.refresh_weight_scales, &live_scales));
  WH_ASSIGN_OR_RETURN(std::set<int> binary_latent, LiftBinaryWeights(g, &tg.binary));
  latent.insert(binary_latent.begin(), binary_latent.end());
  if (g.inputs().size() != 1) return InvalidArgument("fine-tuning needs a model with exactly one data input");
  for (int v : live_scales) g.inputs().push_back(v);
  WH_RETURN_IF_ERROR(InferShapes(g));
  if (g.outputs().empty()) return InvalidArgument("the model has no outputs");
  const int logits = g.outputs()[0];
  tg.logits = g.value(logits).name;
  tg.model_input = g.value(g.inputs()[0]).name;
  const std::optional<SymShape> ls = ShapeOf(g, logits);
  if (g.value(logits).dtype != DType::kFloat32 || !ls || ls->size() != 2)
    return InvalidArgument("the model's first output '" + tg.logits + "' must be float32 logits [batch, classes]");
  const SymShape logits_shape = *ls;
  GradContext ctx;
  std::vector<std::pair<int, int>> state;  // (running statistic, its updated value)
  if (options.bn_training) {
    WH_ASSIGN_OR_RETURN(ctx.bn_training, UseBatchStatistics(g, &state));
    WH_RETURN_IF_ERROR(InferShapes(g));
  }

  WH_ASSIGN_OR_RETURN(const std::vector<int> live_nodes, LiveNodes(g, logits));
  std::set<int> params = Params(g, live_nodes, latent);
  if (params.empty()) return InvalidArgument("the model has no trainable float32 weights on the path to its logits");
  std::set<int> needs = NeedGradients(g, live_nodes, params);

  // The loss gradient at the logits.
  Emitter e(g);
  const int target = g.AddValue(kTargetInput, DType::kFloat32, logits_shape);
  const int a = g.AddValue(kCeCoefInput, DType::kFloat32, SymShape{});
  const int b = g.AddValue(kKdCoefInput, DType::kFloat32, SymShape{});
  g.inputs().push_back(target);
  g.inputs().push_back(a);
  g.inputs().push_back(b);
  AttributeMap last_axis;  // the logits are [B, C]: -1 is the class axis at every opset (the CUDA Softmax's)
  last_axis.Set("axis", Attribute::Int(-1));
  const int s = e.Op("Softmax", {logits}, last_axis);
  const int q = e.Op("Softmax", {e.Op("Div", {logits, e.Const(Tensor::Scalar<float>(temperature), "temperature")})},
                     last_axis);
  const int dz = e.Op("Sub", {e.Op("Add", {e.Op("Mul", {s, a}), e.Op("Mul", {q, b})}), target});

  // Backward, accumulating contributions per value.
  std::map<int, std::vector<int>> contrib;
  contrib[logits].push_back(dz);
  // Feature (hint) losses: c_i (s - t_i) at each hint tensor.
  std::set<int> live_set;
  for (int ni : live_nodes)
    for (int o : g.nodes()[static_cast<size_t>(ni)].outputs) live_set.insert(o);
  std::vector<int> hint_values;
  for (size_t i = 0; i < options.hints.size(); ++i) {
    const std::string& name = options.hints[i];
    const int v = g.FindValue(name);
    if (v < 0) return InvalidArgument("hint: the student has no tensor '" + name + "'");
    if (g.value(v).dtype != DType::kFloat32 || !live_set.count(v) || !needs.count(v))
      return InvalidArgument("hint: '" + name + "' is not a float32 tensor between the trainable weights and the logits");
    const int t = g.AddValue(kHintTargetPrefix + std::to_string(i), DType::kFloat32, g.value(v).shape);
    const int c = g.AddValue(std::string(kHintCoefInput) + "_" + std::to_string(i), DType::kFloat32, SymShape{});
    g.inputs().push_back(t);
    g.inputs().push_back(c);
    contrib[v].push_back(e.Op("Mul", {e.Op("Sub", {v, t}), c}));
    hint_values.push_back(v);
  }
  auto GradOfValue = [&](int v) -> int {
    auto it = contrib.find(v);
    if (it == contrib.end()) return -1;
    int sum = it->second[0];
    for (size_t i = 1; i < it->second.size(); ++i) sum = e.Op("Add", {sum, it->second[i]});
    it->second = {sum};
    return sum;
  };
  for (int ni : live_nodes) {
    const Node n = g.nodes()[static_cast<size_t>(ni)];  // copy: emitting grows the node list
    std::vector<int> dys;
    bool any = false;
    for (int o : n.outputs) {
      dys.push_back(o >= 0 && needs.count(o) ? GradOfValue(o) : -1);
      any = any || dys.back() >= 0;
    }
    if (!any) continue;  // nothing downstream depends on it
    auto need = [&](size_t slot) { return slot < n.inputs.size() && n.inputs[slot] >= 0 && needs.count(n.inputs[slot]); };
    WH_ASSIGN_OR_RETURN(InputGrads grads, GradOf(e, g, n, dys, need, ctx));
    for (const auto& [slot, gv] : grads) contrib[n.inputs[slot]].push_back(gv);
  }

  auto lift = [&](int v) { return LiftToInput(g, v); };
  auto output = [&](int v, const std::string& name) { return AddNamedOutput(g, v, name); };
  // Params become inputs; their gradients become outputs after the logits.
  g.outputs() = {logits};
  for (int p : params) {
    const int gv = GradOfValue(p);
    if (gv < 0) continue;  // no path (cannot happen for a live param, kept for safety)
    const std::string name = g.value(p).name;
    tg.params.push_back(name);
    tg.initial.push_back(lift(p));
    output(gv, "grad_" + name);
  }
  // Running statistics: inputs too, their updates the last outputs.
  for (const auto& [running, updated] : state) {
    StateUpdate u;
    u.initializer = g.value(running).name;
    u.initial = lift(running);
    u.output = output(updated, u.initializer + "_updated");
    tg.state.push_back(std::move(u));
  }
  for (int v : hint_values) tg.hint_outputs.push_back(output(v, "hint_" + g.value(v).name));
  if (g.OpsetFor(kWhittleDomain) == 0) g.opset_imports[kWhittleDomain] = 1;
  WH_RETURN_IF_ERROR(g.Compact());
  WH_RETURN_IF_ERROR(g.Verify());
  WH_RETURN_IF_ERROR(InferShapes(g));
  return tg;
}

}  // namespace whittle::training
