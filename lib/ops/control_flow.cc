// If, Loop and Scan, as ONNX defines them (If 1-23, Loop 1-23, Scan 9-23), and SequenceMap (17). Their subgraphs are
// Graphs held by value in graph attributes; the outer values a subgraph reads are the node's
// implicit inputs (Node::implicit_inputs), bound to the subgraph's trailing inputs. Shape inference
// binds each subgraph's inputs to the node's input types, infers the subgraph and reads its outputs'
// types (both branches of an If, merged: a dim the branches disagree on is unknown). Output shapes
// at run time come from the subgraphs' runs (kernels/control_flow_kernels.cc), not from here.
#include <algorithm>

#include "lib/ops/op_def.h"

namespace whittle {
namespace {

// A dim both shapes agree on stays; one they disagree on becomes unknown; different ranks: unknown.
std::optional<SymShape> Merge(const std::optional<SymShape>& a, const std::optional<SymShape>& b) {
  if (!a || !b || a->size() != b->size()) return std::nullopt;
  SymShape r = *a;
  for (size_t k = 0; k < r.size(); ++k)
    if (r[k] != (*b)[k]) r[k] = Dim();
  return r;
}

// Subgraph input k takes dtype dt and shape s (a declared dim stays where s does not know it), and
// kind `kind` where that is a sequence or an optional (a tensor may bind where an optional is
// declared: it is an optional with a value).
void BindInput(Graph& sub, size_t k, DType dt, const std::optional<SymShape>& s, ValueKind kind = ValueKind::kTensor) {
  Value& v = sub.value(sub.inputs()[k]);
  if (dt != DType::kUndefined) v.dtype = dt;
  if (kind != ValueKind::kTensor) {
    v.kind = kind;
    v.shape.reset();
    return;
  }
  if (!s) return;
  if (v.shape && v.shape->size() == s->size()) {
    SymShape m = *s;
    for (size_t d = 0; d < m.size(); ++d)
      if (!m[d].known() && m[d].param.empty()) m[d] = (*v.shape)[d];
    v.shape = m;
  } else {
    v.shape = s;
  }
}

// The subgraph's node outputs lose the shapes an earlier inference gave them (its inputs may be
// bound differently now), then the subgraph is inferred.
Status Reinfer(Graph& sub) {
  for (const Node& n : sub.nodes())  // a graph built in code was not validated by the loader
    WH_RETURN_IF_ERROR(ValidateNode(n, static_cast<int>(sub.OpsetFor(n.domain))));
  for (const Node& n : sub.nodes())
    for (int o : n.outputs)
      if (o >= 0) sub.value(o).shape.reset();
  return InferShapes(sub);
}

// Binds the subgraph's outer inputs to the node's implicit inputs; relaxed: their ranks only, every
// dim unknown.
void BindOuter(Graph& sub, const Node& node, const std::vector<const Value*>& in, bool relaxed = false) {
  for (int j = 0; j < node.implicit_inputs; ++j) {
    const Value* v = in[node.explicit_inputs() + static_cast<size_t>(j)];
    if (!v) continue;
    std::optional<SymShape> s = v->shape;
    if (relaxed && s)
      for (Dim& d : *s) d = Dim();
    Value& bound = sub.value(sub.inputs()[sub.formal_inputs() + static_cast<size_t>(j)]);
    if (relaxed) bound.shape.reset();
    BindInput(sub, sub.formal_inputs() + static_cast<size_t>(j), v->dtype, s, v->kind);
  }
}

Status Need(const Node& n, const char* attr, Graph** g) {
  *g = n.attrs.GetGraph(attr);
  if (!*g) return InvalidArgument(n.DebugName() + ": graph attribute '" + attr + "' is missing");
  return Status::Ok();
}

const Value& Out(const Graph& g, size_t k) { return g.value(g.outputs()[k]); }

// The kind of a value that is a or b (two branches, or a loop's initial and carried value): the
// same kind, or the optional of what one side makes where the other side is that optional.
StatusOr<ValueKind> MergeKinds(ValueKind a, ValueKind b) {
  if (a == b) return a;
  auto optional_of = [](ValueKind k) {
    return k == ValueKind::kSequence ? ValueKind::kOptionalSequence
         : k == ValueKind::kTensor   ? ValueKind::kOptionalTensor
                                     : k;
  };
  if (optional_of(a) == b) return b;
  if (optional_of(b) == a) return a;
  return InvalidArgument(std::string("a ") + ValueKindName(a) + " and a " + ValueKindName(b) + " meet");
}

// ---------------------------------------------------------------- If

Status CheckIf(const Node& n, int) {
  for (const char* b : {"then_branch", "else_branch"}) {
    Graph* g;
    WH_RETURN_IF_ERROR(Need(n, b, &g));
    if (g->formal_inputs() != 0)
      return InvalidArgument(n.DebugName() + ": " + b + " has " + std::to_string(g->formal_inputs()) +
                             " inputs; an If branch takes none");
    if (g->outputs().size() != n.outputs.size())
      return InvalidArgument(n.DebugName() + ": " + b + " has " + std::to_string(g->outputs().size()) +
                             " outputs, the node " + std::to_string(n.outputs.size()));
  }
  return Status::Ok();
}

Status BindIf(Node& n, int, const std::vector<const Value*>& in) {
  WH_RETURN_IF_ERROR(CheckIf(n, 0));
  for (const char* b : {"then_branch", "else_branch"}) {
    Graph* g = n.attrs.GetGraph(b);
    BindOuter(*g, n, in);
    if (Reinfer(*g).ok()) continue;
    // A branch the input sizes cannot take (Silero VAD's 8 kHz branch, given the 16 kHz frame
    // size) infers with those sizes unknown, as it would be read with no sizes pinned; only a
    // branch that fails then too is an error.
    BindOuter(*g, n, in, /*relaxed=*/true);
    WH_RETURN_IF_ERROR(Reinfer(*g).WithContext(n.DebugName() + ": " + b));
  }
  return Status::Ok();
}

Status InferIf(InferContext& ctx) {
  const Graph* t = ctx.attrs().GetGraph("then_branch");
  const Graph* e = ctx.attrs().GetGraph("else_branch");
  if (ctx.HasInput(0) && ctx.InputDType(0) != DType::kBool && ctx.InputDType(0) != DType::kUndefined)
    return ctx.Error("cond must be bool, got " + std::string(DTypeName(ctx.InputDType(0))));
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    const Value& a = Out(*t, static_cast<size_t>(k));
    const Value& b = Out(*e, static_cast<size_t>(k));
    if (a.dtype != DType::kUndefined && b.dtype != DType::kUndefined && a.dtype != b.dtype)
      return ctx.Error("output " + std::to_string(k) + " is " + DTypeName(a.dtype) + " in then_branch but " +
                       DTypeName(b.dtype) + " in else_branch");
    ctx.SetOutput(k, a.dtype != DType::kUndefined ? a.dtype : b.dtype, Merge(a.shape, b.shape));
    auto kind = MergeKinds(a.kind, b.kind);
    if (!kind.ok()) return ctx.Error("output " + std::to_string(k) + ": " + kind.status().message());
    ctx.SetOutputKind(k, *kind);
    if (*kind != ValueKind::kTensor) ctx.SetOutput(k, ctx.OutputDType(k), std::nullopt);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- Loop

// Loop: inputs M, cond, v_initial (N), then implicit; body inputs iteration_num, cond, N carried;
// body outputs cond, N carried, K scan outputs; node outputs N final values, K scan outputs.
Status CheckLoop(const Node& n, int) {
  Graph* g;
  WH_RETURN_IF_ERROR(Need(n, "body", &g));
  const size_t explicit_in = n.explicit_inputs();
  if (explicit_in < 2) return InvalidArgument(n.DebugName() + ": needs inputs M and cond (either may be empty)");
  const size_t carried = explicit_in - 2;
  if (g->formal_inputs() != 2 + carried)
    return InvalidArgument(n.DebugName() + ": body has " + std::to_string(g->formal_inputs()) + " inputs, expected " +
                           std::to_string(2 + carried) + " (iteration_num, cond and " + std::to_string(carried) +
                           " loop-carried values)");
  if (g->outputs().size() < 1 + carried || n.outputs.size() != g->outputs().size() - 1)
    return InvalidArgument(n.DebugName() + ": body has " + std::to_string(g->outputs().size()) +
                           " outputs; expected cond, " + std::to_string(carried) +
                           " loop-carried values and one per scan output of the node's " +
                           std::to_string(n.outputs.size()) + " outputs");
  return Status::Ok();
}

Status BindLoop(Node& n, int, const std::vector<const Value*>& in) {
  WH_RETURN_IF_ERROR(CheckLoop(n, 0));
  Graph& g = *n.attrs.GetGraph("body");
  const size_t carried = n.explicit_inputs() - 2;
  const Value& iter = g.value(g.inputs()[0]);
  BindInput(g, 0, DType::kInt64, iter.shape && iter.shape->size() == 1 ? iter.shape : SymShape{});
  const Value& cond = g.value(g.inputs()[1]);
  BindInput(g, 1, DType::kBool, cond.shape && cond.shape->size() == 1 ? cond.shape : SymShape{});
  std::vector<std::optional<SymShape>> bound(carried);
  for (size_t k = 0; k < carried; ++k) {
    const Value* v = in[2 + k];
    if (v) BindInput(g, 2 + k, v->dtype, v->shape, v->kind);
    bound[k] = g.value(g.inputs()[2 + k]).shape;
  }
  BindOuter(g, n, in);
  WH_RETURN_IF_ERROR(Reinfer(g).WithContext(n.DebugName() + ": body"));
  // A carried value whose shape changes from one iteration to the next (a growing sequence) is
  // bound again with the dims that change unknown.
  bool again = false;
  for (size_t k = 0; k < carried; ++k) {
    auto m = Merge(bound[k], Out(g, 1 + k).shape);
    if (m != bound[k]) {
      g.value(g.inputs()[2 + k]).shape = m;
      again = true;
    }
  }
  if (again) WH_RETURN_IF_ERROR(Reinfer(g).WithContext(n.DebugName() + ": body"));
  return Status::Ok();
}

Status InferLoop(InferContext& ctx) {
  const Graph& g = *ctx.attrs().GetGraph("body");
  const size_t carried = ctx.node().explicit_inputs() - 2;
  if (ctx.HasInput(0) && ctx.InputDType(0) != DType::kInt64 && ctx.InputDType(0) != DType::kUndefined)
    return ctx.Error("M must be int64");
  if (ctx.HasInput(1) && ctx.InputDType(1) != DType::kBool && ctx.InputDType(1) != DType::kUndefined)
    return ctx.Error("cond must be bool");
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    const Value& b = Out(g, 1 + static_cast<size_t>(k));
    if (static_cast<size_t>(k) < carried) {
      const int i = 2 + k;
      const DType dt = ctx.InputDType(i) != DType::kUndefined ? ctx.InputDType(i) : b.dtype;
      const SymShape* s = ctx.InputShape(i);
      ctx.SetOutput(k, dt, Merge(s ? std::optional<SymShape>(*s) : std::nullopt, b.shape));
      // As ONNX infers it: the body's carried output's kind (an optional initial value that the
      // body turns into its element, ONNX's loop16_seq_none, makes the element).
      auto kind = MergeKinds(ctx.InputKind(i), b.kind);
      if (!kind.ok()) return ctx.Error("loop-carried value " + std::to_string(k) + ": " + kind.status().message());
      ctx.SetOutputKind(k, b.kind);
    } else {
      if (b.kind != ValueKind::kTensor)
        return ctx.Error("scan output " + std::to_string(k - static_cast<int>(carried)) + " of the body is a " +
                         ValueKindName(b.kind) + "; scan outputs are tensors");
      std::optional<SymShape> s;
      if (b.shape) {
        s = SymShape{Dim()};
        s->insert(s->end(), b.shape->begin(), b.shape->end());
      }
      ctx.SetOutput(k, b.dtype, s);
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- Scan

// Scan (opset 9+): inputs N initial states, M scan inputs, then implicit; body inputs N states and
// M slices; body outputs N states and K scan output slices. Scan 8 has an input before those
// (sequence_lens, may be empty) and a batch axis 0 on every input and output; the body sees one
// batch element, and its scan axis is 1 (`directions` instead of scan_input_directions).
Status ScanCounts(const Node& n, int opset, size_t* states, size_t* scans, size_t* scan_outs) {
  const size_t lead = opset < 9 ? 1 : 0;  // sequence_lens
  Graph* g;
  WH_RETURN_IF_ERROR(Need(n, "body", &g));
  const int64_t m = n.attrs.GetInt("num_scan_inputs", 0);
  if (n.explicit_inputs() < lead) return InvalidArgument(n.DebugName() + ": needs input sequence_lens (may be empty)");
  const size_t explicit_in = n.explicit_inputs() - lead;
  if (m < 1 || static_cast<size_t>(m) > explicit_in)
    return InvalidArgument(n.DebugName() + ": num_scan_inputs " + std::to_string(m) + " must be in [1, " +
                           std::to_string(explicit_in) + "]");
  *scans = static_cast<size_t>(m);
  *states = explicit_in - *scans;
  if (lead && (n.attrs.Has("scan_input_axes") || n.attrs.Has("scan_output_axes") ||
               n.attrs.Has("scan_input_directions") || n.attrs.Has("scan_output_directions")))
    return InvalidArgument(n.DebugName() + ": Scan 8 has `directions`, not the axes and directions of Scan 9");
  if (g->formal_inputs() != explicit_in)
    return InvalidArgument(n.DebugName() + ": body has " + std::to_string(g->formal_inputs()) + " inputs, expected " +
                           std::to_string(explicit_in));
  if (g->outputs().size() != n.outputs.size() || n.outputs.size() < *states)
    return InvalidArgument(n.DebugName() + ": body has " + std::to_string(g->outputs().size()) +
                           " outputs, the node " + std::to_string(n.outputs.size()));
  *scan_outs = n.outputs.size() - *states;
  auto check_list = [&](const char* name, size_t len, bool directions) -> Status {
    const auto* a = n.attrs.Find(name);
    if (!a) return Status::Ok();
    if (a->ints.size() != len)
      return InvalidArgument(n.DebugName() + ": " + name + " has " + std::to_string(a->ints.size()) +
                             " entries, expected " + std::to_string(len));
    for (int64_t v : a->ints)
      if (directions && v != 0 && v != 1)
        return InvalidArgument(n.DebugName() + ": " + name + " entries must be 0 or 1, got " + std::to_string(v));
    return Status::Ok();
  };
  WH_RETURN_IF_ERROR(check_list("directions", *scans, true));
  WH_RETURN_IF_ERROR(check_list("scan_input_directions", *scans, true));
  WH_RETURN_IF_ERROR(check_list("scan_output_directions", *scan_outs, true));
  WH_RETURN_IF_ERROR(check_list("scan_input_axes", *scans, false));
  WH_RETURN_IF_ERROR(check_list("scan_output_axes", *scan_outs, false));
  return Status::Ok();
}

Status CheckScan(const Node& n, int opset) {
  size_t a, b, c;
  return ScanCounts(n, opset, &a, &b, &c);
}

Status BindScan(Node& n, int opset, const std::vector<const Value*>& in) {
  size_t states, scans, scan_outs;
  WH_RETURN_IF_ERROR(ScanCounts(n, opset, &states, &scans, &scan_outs));
  Graph& g = *n.attrs.GetGraph("body");
  const size_t lead = opset < 9 ? 1 : 0;
  const std::vector<int64_t> axes =
      n.attrs.GetInts("scan_input_axes", std::vector<int64_t>(scans, lead ? 1 : 0));
  for (size_t k = 0; k < states + scans; ++k) {
    const Value* v = in[lead + k];
    if (!v) continue;
    std::optional<SymShape> s = v->shape;
    if (lead && s && !s->empty()) s->erase(s->begin());  // the batch axis
    if (k >= states && s) {
      int64_t ax = axes[k - states] - static_cast<int64_t>(lead);
      const auto r = static_cast<int64_t>(s->size());
      if (ax < 0) ax += r;
      if (ax < 0 || ax >= r)
        return InvalidArgument(n.DebugName() + ": scan_input_axes[" + std::to_string(k - states) + "] = " +
                               std::to_string(axes[k - states]) + " is out of range for rank " + std::to_string(r));
      s->erase(s->begin() + ax);
    }
    BindInput(g, k, v->dtype, s);
  }
  BindOuter(g, n, in);
  return Reinfer(g).WithContext(n.DebugName() + ": body");
}

Status InferScan(InferContext& ctx) {
  const Node& n = ctx.node();
  size_t states, scans, scan_outs;
  WH_RETURN_IF_ERROR(ScanCounts(n, ctx.opset(), &states, &scans, &scan_outs));
  const Graph& g = *n.attrs.GetGraph("body");
  const int lead = ctx.opset() < 9 ? 1 : 0;
  Dim len, batch;
  if (const SymShape* s = ctx.InputShape(lead + static_cast<int>(states))) {
    if (lead && !s->empty()) batch = (*s)[0];
    int64_t ax = n.attrs.GetInts("scan_input_axes", std::vector<int64_t>(scans, lead))[0];
    if (ax < 0) ax += static_cast<int64_t>(s->size());
    if (ax >= 0 && ax < static_cast<int64_t>(s->size())) len = (*s)[static_cast<size_t>(ax)];
  }
  const std::vector<int64_t> out_axes = n.attrs.GetInts("scan_output_axes", std::vector<int64_t>(scan_outs, 0));
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const Value& b = Out(g, k);
    if (k < states) {
      const int i = lead + static_cast<int>(k);
      const SymShape* s = ctx.InputShape(i);
      const DType dt = ctx.InputDType(i) != DType::kUndefined ? ctx.InputDType(i) : b.dtype;
      std::optional<SymShape> body = b.shape;
      if (lead && body) body->insert(body->begin(), batch);
      ctx.SetOutput(static_cast<int>(k), dt, Merge(s ? std::optional<SymShape>(*s) : std::nullopt, body));
      continue;
    }
    std::optional<SymShape> s;
    if (b.shape) {
      int64_t ax = out_axes[k - states];
      const auto r = static_cast<int64_t>(b.shape->size()) + 1;
      if (ax < 0) ax += r;
      if (ax < 0 || ax >= r)
        return ctx.Error("scan_output_axes[" + std::to_string(k - states) + "] = " + std::to_string(out_axes[k - states]) +
                         " is out of range for rank " + std::to_string(r));
      s = *b.shape;
      s->insert(s->begin() + ax, len);
      if (lead) s->insert(s->begin(), batch);
    }
    ctx.SetOutput(static_cast<int>(k), b.dtype, s);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- SequenceMap

// SequenceMap (opset 17): the body runs once per element of input_sequence; it takes that element,
// and for each additional input the element of the same index (a sequence) or the input itself (a
// tensor); output k is the sequence of the body's output k.
Status CheckSequenceMap(const Node& n, int) {
  Graph* g;
  WH_RETURN_IF_ERROR(Need(n, "body", &g));
  if (g->formal_inputs() != n.explicit_inputs())
    return InvalidArgument(n.DebugName() + ": body has " + std::to_string(g->formal_inputs()) + " inputs, the node " +
                           std::to_string(n.explicit_inputs()));
  if (g->outputs().size() != n.outputs.size())
    return InvalidArgument(n.DebugName() + ": body has " + std::to_string(g->outputs().size()) + " outputs, the node " +
                           std::to_string(n.outputs.size()));
  return Status::Ok();
}

Status BindSequenceMap(Node& n, int, const std::vector<const Value*>& in) {
  WH_RETURN_IF_ERROR(CheckSequenceMap(n, 0));
  Graph& g = *n.attrs.GetGraph("body");
  for (size_t k = 0; k < n.explicit_inputs(); ++k) {
    const Value* v = in[k];
    if (!v) continue;
    if (k == 0 && v->kind != ValueKind::kSequence)
      return InvalidArgument(n.DebugName() + ": input_sequence is a " + ValueKindName(v->kind) + ", not a sequence");
    if (v->kind == ValueKind::kSequence) {
      BindInput(g, k, v->dtype, g.value(g.inputs()[k]).shape);  // an element: the body's declared shape
      g.value(g.inputs()[k]).kind = ValueKind::kTensor;
    } else if (v->kind == ValueKind::kTensor) {
      BindInput(g, k, v->dtype, v->shape);
    } else {
      return InvalidArgument(n.DebugName() + ": input " + std::to_string(k) + " is a " + ValueKindName(v->kind) +
                             "; SequenceMap takes sequences and tensors");
    }
  }
  BindOuter(g, n, in);
  return Reinfer(g).WithContext(n.DebugName() + ": body");
}

Status InferSequenceMap(InferContext& ctx) {
  const Graph& g = *ctx.attrs().GetGraph("body");
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    const Value& b = Out(g, static_cast<size_t>(k));
    if (b.kind != ValueKind::kTensor)
      return ctx.Error("body output " + std::to_string(k) + " is a " + ValueKindName(b.kind) + "; it must be a tensor");
    ctx.SetOutput(k, b.dtype, std::nullopt);
    ctx.SetOutputKind(k, ValueKind::kSequence);
  }
  return Status::Ok();
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& r) {
  constexpr int kMany = 1 << 20;
  OpDef if_def{"", "If", 1, 1, 1, 1, kMany,
               {{"then_branch", AttrType::kGraph, true}, {"else_branch", AttrType::kGraph, true}},
               CheckIf, InferIf, 23};
  if_def.infer_subgraphs = BindIf;
  if_def.any_kind = true;
  r.Register(std::move(if_def));
  OpDef loop{"", "Loop", 1, 0, kMany, 0, kMany, {{"body", AttrType::kGraph, true}}, CheckLoop, InferLoop, 23};
  loop.infer_subgraphs = BindLoop;
  loop.any_kind = true;
  r.Register(std::move(loop));
  OpDef scan{"", "Scan", 8, 0, kMany, 0, kMany,
             {{"body", AttrType::kGraph, true},
              {"num_scan_inputs", AttrType::kInt, true},
              {"directions", AttrType::kInts},
              {"scan_input_directions", AttrType::kInts},
              {"scan_output_directions", AttrType::kInts},
              {"scan_input_axes", AttrType::kInts},
              {"scan_output_axes", AttrType::kInts}},
             CheckScan, InferScan, 23};
  scan.infer_subgraphs = BindScan;
  r.Register(std::move(scan));
  OpDef map{"", "SequenceMap", 17, 1, kMany, 1, kMany, {{"body", AttrType::kGraph, true}}, CheckSequenceMap,
            InferSequenceMap, 17};
  map.infer_subgraphs = BindSequenceMap;
  map.any_kind = true;
  r.Register(std::move(map));
}

}  // namespace whittle
