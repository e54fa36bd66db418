// OpDefs for the ONNX recurrent ops RNN, GRU and LSTM (opset 7 onwards; `layout` from opset 14):
// attribute checks (direction, activations, hidden_size, clip, layout) and shape inference for
// the optional outputs Y, Y_h and Y_c from X, W, R and the optional B, sequence_lens, initial_h,
// initial_c and P, with every weight shape checked against hidden_size and num_directions.
#include <algorithm>
#include <cctype>
#include <string>

#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

struct RecurrentKind {
  const char* op;
  int gates;            // weight blocks per direction in W and R
  int activations;      // activation functions per direction
  bool lstm;
};

constexpr RecurrentKind kRnn{"RNN", 1, 1, false};
constexpr RecurrentKind kGru{"GRU", 3, 2, false};
constexpr RecurrentKind kLstm{"LSTM", 4, 3, true};

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool KnownActivation(const std::string& name) {
  static const char* const kNames[] = {"relu",      "tanh",       "sigmoid",     "affine",
                                       "leakyrelu", "thresholdedrelu", "scaledtanh", "hardsigmoid",
                                       "elu",       "softsign",   "softplus"};
  const std::string l = Lower(name);
  for (const char* n : kNames)
    if (l == n) return true;
  return false;
}

int NumDirections(const Node& node) { return node.attrs.GetString("direction", "forward") == "bidirectional" ? 2 : 1; }

Status CheckRecurrent(const RecurrentKind& k, const Node& node, int opset) {
  const AttributeMap& a = node.attrs;
  const std::string where = node.DebugName() + ": ";
  const std::string dir = a.GetString("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    return InvalidArgument(where + "direction must be forward, reverse or bidirectional, got '" + dir + "'");
  if (a.Has("hidden_size") && a.GetInt("hidden_size", 0) <= 0)
    return InvalidArgument(where + "hidden_size must be positive, got " + Str(a.GetInt("hidden_size", 0)));
  if (a.Has("clip") && !(a.GetFloat("clip", 0.f) > 0.f))
    return InvalidArgument(where + "clip must be positive, got " + std::to_string(a.GetFloat("clip", 0.f)));
  if (a.Has("layout")) {
    if (opset < 14) return InvalidArgument(where + "attribute 'layout' needs opset 14, the model has " + Str(opset));
    const int64_t layout = a.GetInt("layout", 0);
    if (layout != 0 && layout != 1) return InvalidArgument(where + "layout must be 0 or 1, got " + Str(layout));
  }
  if (const Attribute* acts = a.Find("activations")) {
    const size_t per = static_cast<size_t>(k.activations);
    const size_t nd = static_cast<size_t>(NumDirections(node));
    if (acts->strings.size() != per && acts->strings.size() != per * nd)
      return InvalidArgument(where + k.op + " takes " + Str(static_cast<int64_t>(per * nd)) + " activations for " +
                             Str(static_cast<int64_t>(nd)) + " direction(s), got " +
                             Str(static_cast<int64_t>(acts->strings.size())));
    for (const std::string& s : acts->strings)
      if (!KnownActivation(s)) return Unimplemented(where + "unsupported activation '" + s + "'");
  }
  if (k.lstm) {
    const int64_t f = a.GetInt("input_forget", 0);
    if (f != 0 && f != 1) return InvalidArgument(where + "input_forget must be 0 or 1, got " + Str(f));
  }
  return Status::Ok();
}

// Checks that dim d of shape s (when known) equals want (when known); names input and dim.
Status ExpectDim(const InferContext& ctx, const SymShape& s, size_t d, const Dim& want, const char* input,
                 const std::string& meaning) {
  if (s[d].known() && want.known() && s[d].value != want.value)
    return ctx.Error(std::string(input) + " " + SymShapeToString(s) + ": dim " + Str(static_cast<int64_t>(d)) +
                     " must be " + meaning + " = " + Str(want.value));
  return Status::Ok();
}

Status InferRecurrent(const RecurrentKind& k, InferContext& ctx) {
  static const char* const kNames[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  const DType dt = ctx.InputDType(0);
  if (dt != DType::kUndefined && dt != DType::kFloat32 && dt != DType::kFloat64 && dt != DType::kFloat16)
    return ctx.Error(std::string("X must be float16, float or double, got ") + DTypeName(dt));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (i == 4 || !ctx.HasInput(i)) continue;
    const DType di = ctx.InputDType(i);
    if (di != DType::kUndefined && dt != DType::kUndefined && di != dt)
      return ctx.Error(std::string(kNames[i]) + " is " + DTypeName(di) + " but X is " + DTypeName(dt));
  }
  if (ctx.HasInput(4) && ctx.InputDType(4) != DType::kUndefined && ctx.InputDType(4) != DType::kInt32)
    return ctx.Error(std::string("sequence_lens must be int32, got ") + DTypeName(ctx.InputDType(4)));

  const AttributeMap& a = ctx.attrs();
  const int64_t layout = a.GetInt("layout", 0);
  const int64_t nd = NumDirections(ctx.node());
  const int64_t G = k.gates;
  Dim seq, batch, input, hidden;
  if (a.Has("hidden_size")) hidden = Dim(a.GetInt("hidden_size", 0));
  // f * hidden_size, checked: hidden_size comes from the model (3 * 2^62 overflowed, fuzzing).
  auto times_hidden = [&](int64_t f, Dim* out) -> Status {
    int64_t v = 0;
    if (!hidden.known()) return *out = Dim(), Status::Ok();
    if (hidden.value < 0 || __builtin_mul_overflow(f, hidden.value, &v))
      return ctx.Error("hidden_size " + Str(hidden.value) + " is out of range");
    return *out = Dim(v), Status::Ok();
  };
  Dim gh;
  for (int i : {0, 1, 2}) {
    const SymShape* s = ctx.InputShape(i);
    if (s && s->size() != 3) return ctx.Error(std::string(kNames[i]) + " must be 3-D, got " + SymShapeToString(*s));
  }
  if (const SymShape* r = ctx.InputShape(2)) {
    if (!hidden.known() && (*r)[2].known()) hidden = (*r)[2];
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *r, 0, Dim(nd), "R", "num_directions"));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *r, 2, hidden, "R", "hidden_size"));
    WH_RETURN_IF_ERROR(times_hidden(G, &gh));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *r, 1, gh, "R", Str(G) + "*hidden_size"));
  }
  if (const SymShape* w = ctx.InputShape(1)) {
    if (!hidden.known() && (*w)[1].known()) {
      if ((*w)[1].value % G != 0)
        return ctx.Error("W " + SymShapeToString(*w) + ": dim 1 must be a multiple of " + Str(G));
      hidden = Dim((*w)[1].value / G);
    }
    input = (*w)[2];
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *w, 0, Dim(nd), "W", "num_directions"));
    WH_RETURN_IF_ERROR(times_hidden(G, &gh));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *w, 1, gh, "W", Str(G) + "*hidden_size"));
  }
  if (const SymShape* x = ctx.InputShape(0)) {
    seq = (*x)[layout == 0 ? 0 : 1];
    batch = (*x)[layout == 0 ? 1 : 0];
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *x, 2, input, "X", "input_size (W dim 2)"));
    if (!input.known()) input = (*x)[2];
  }
  if (const SymShape* b = ctx.InputShape(3)) {
    if (b->size() != 2) return ctx.Error("B must be 2-D, got " + SymShapeToString(*b));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *b, 0, Dim(nd), "B", "num_directions"));
    WH_RETURN_IF_ERROR(times_hidden(2 * G, &gh));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *b, 1, gh, "B", Str(2 * G) + "*hidden_size"));
  }
  if (const SymShape* sl = ctx.InputShape(4)) {
    if (sl->size() != 1) return ctx.Error("sequence_lens must be 1-D, got " + SymShapeToString(*sl));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *sl, 0, batch, "sequence_lens", "batch_size"));
  }
  for (int i : {5, 6}) {
    const SymShape* s = ctx.InputShape(i);
    if (!s) continue;
    if (s->size() != 3) return ctx.Error(std::string(kNames[i]) + " must be 3-D, got " + SymShapeToString(*s));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *s, layout == 0 ? 0 : 1, Dim(nd), kNames[i], "num_directions"));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *s, layout == 0 ? 1 : 0, batch, kNames[i], "batch_size"));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *s, 2, hidden, kNames[i], "hidden_size"));
  }
  if (const SymShape* p = ctx.InputShape(7)) {
    if (p->size() != 2) return ctx.Error("P must be 2-D, got " + SymShapeToString(*p));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *p, 0, Dim(nd), "P", "num_directions"));
    WH_RETURN_IF_ERROR(ExpectDim(ctx, *p, 1, hidden.known() ? Dim(3 * hidden.value) : Dim(), "P", "3*hidden_size"));
  }
  const bool x_known = ctx.InputShape(0) != nullptr;
  if (ctx.HasOutput(0)) {
    ctx.SetOutput(0, dt, x_known ? std::optional<SymShape>(layout == 0 ? SymShape{seq, Dim(nd), batch, hidden}
                                                                     : SymShape{batch, seq, Dim(nd), hidden})
                                 : std::nullopt);
  }
  const std::optional<SymShape> state =
      x_known ? std::optional<SymShape>(layout == 0 ? SymShape{Dim(nd), batch, hidden} : SymShape{batch, Dim(nd), hidden})
              : std::nullopt;
  if (ctx.HasOutput(1)) ctx.SetOutput(1, dt, state);
  if (k.lstm && ctx.HasOutput(2)) ctx.SetOutput(2, dt, state);
  return Status::Ok();
}

OpDef MakeRecurrentDef(const RecurrentKind& k) {
  OpDef d;
  d.op_type = k.op;
  d.since_opset = 7;
  d.min_inputs = 3;
  d.max_inputs = k.lstm ? 8 : 6;
  d.min_outputs = 0;
  d.max_outputs = k.lstm ? 3 : 2;
  d.attrs = {{"activation_alpha", AttrType::kFloats}, {"activation_beta", AttrType::kFloats},
             {"activations", AttrType::kStrings},     {"clip", AttrType::kFloat},
             {"direction", AttrType::kString},        {"hidden_size", AttrType::kInt},
             {"layout", AttrType::kInt}};
  if (k.lstm) d.attrs.push_back({"input_forget", AttrType::kInt});
  if (std::string(k.op) == "GRU") d.attrs.push_back({"linear_before_reset", AttrType::kInt});
  d.check = [k](const Node& node, int opset) { return CheckRecurrent(k, node, opset); };
  d.infer = [k](InferContext& ctx) { return InferRecurrent(k, ctx); };
  return d;
}

}  // namespace

void RegisterRecurrentOps(OpRegistry& r) {
  r.Register(MakeRecurrentDef(kRnn));
  r.Register(MakeRecurrentDef(kGru));
  r.Register(MakeRecurrentDef(kLstm));
}

}  // namespace whittle
