#include "kernels/common/recurrent_attrs.h"

#include <cctype>

namespace whittle {
namespace {

std::string Str(int64_t v) { return std::to_string(v); }

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct ActivationName {
  const char* name;
  RnnActivation::Kind kind;
  bool takes_alpha, takes_beta;
  float alpha, beta;  // defaults of the corresponding ONNX operator
};

// ScaledTanh's ONNX operator gives no defaults; 1 and 1 make it Tanh.
constexpr ActivationName kActivations[] = {
    {"relu", RnnActivation::kRelu, false, false, 0.f, 0.f},
    {"tanh", RnnActivation::kTanh, false, false, 0.f, 0.f},
    {"sigmoid", RnnActivation::kSigmoid, false, false, 0.f, 0.f},
    {"affine", RnnActivation::kAffine, true, true, 1.f, 0.f},
    {"leakyrelu", RnnActivation::kLeakyRelu, true, false, 0.01f, 0.f},
    {"thresholdedrelu", RnnActivation::kThresholdedRelu, true, false, 1.f, 0.f},
    {"scaledtanh", RnnActivation::kScaledTanh, true, true, 1.f, 1.f},
    {"hardsigmoid", RnnActivation::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", RnnActivation::kElu, true, false, 1.f, 0.f},
    {"softsign", RnnActivation::kSoftsign, false, false, 0.f, 0.f},
    {"softplus", RnnActivation::kSoftplus, false, false, 0.f, 0.f},
};

std::vector<std::string> DefaultActivations(RecurrentOp op) {
  switch (op) {
    case RecurrentOp::kRnn: return {"Tanh"};
    case RecurrentOp::kGru: return {"Sigmoid", "Tanh"};
    case RecurrentOp::kLstm: return {"Sigmoid", "Tanh", "Tanh"};
  }
  return {};
}

// A tensor's shape against the expected one; -1 in want matches anything.
Status ExpectShape(const Tensor& t, const Dims& want, const char* name, RecurrentOp op) {
  bool ok = t.rank() == static_cast<int>(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i) ok = want[i] < 0 || t.dims()[i] == want[i];
  if (ok) return Status::Ok();
  std::string w = "[";
  for (size_t i = 0; i < want.size(); ++i) w += (i ? "," : "") + (want[i] < 0 ? std::string("?") : Str(want[i]));
  return InvalidArgument(std::string(RecurrentOpName(op)) + " " + name + " is " + DimsToString(t.dims()) +
                         ", expected " + w + "]");
}

}  // namespace

const char* RecurrentOpName(RecurrentOp op) {
  switch (op) {
    case RecurrentOp::kRnn: return "RNN";
    case RecurrentOp::kGru: return "GRU";
    case RecurrentOp::kLstm: return "LSTM";
  }
  return "?";
}

int RecurrentGates(RecurrentOp op) {
  switch (op) {
    case RecurrentOp::kRnn: return 1;
    case RecurrentOp::kGru: return 3;
    case RecurrentOp::kLstm: return 4;
  }
  return 1;
}

StatusOr<RecurrentAttrs> ParseRecurrentAttrs(RecurrentOp op, const KernelInit& init) {
  const char* name = RecurrentOpName(op);
  const AttributeMap& m = init.attrs;
  RecurrentAttrs a;
  a.op = op;
  a.dtype = init.input_dtypes.empty() ? DType::kUndefined : init.input_dtypes[0];
  if (a.dtype != DType::kFloat32 && a.dtype != DType::kFloat64)
    return Unimplemented(std::string(name) + " supports float and double, got " + DTypeName(a.dtype));
  for (size_t i = 1; i < init.input_dtypes.size(); ++i) {
    const DType t = init.input_dtypes[i];
    if (t == DType::kUndefined) continue;
    if (i == kRnnSeqLens) {
      if (t != DType::kInt32)
        return InvalidArgument(std::string(name) + " sequence_lens must be int32, got " + DTypeName(t));
    } else if (t != a.dtype) {
      return InvalidArgument(std::string(name) + " input " + Str(static_cast<int64_t>(i)) + " is " + DTypeName(t) +
                             " but X is " + DTypeName(a.dtype));
    }
  }
  const std::string dir = m.GetString("direction", "forward");
  if (dir == "bidirectional") a.num_directions = 2;
  else if (dir == "reverse") a.reverse = true;
  else if (dir != "forward")
    return InvalidArgument(std::string(name) + " direction must be forward, reverse or bidirectional, got '" + dir +
                           "'");
  if (m.Has("hidden_size")) {
    a.hidden_size = m.GetInt("hidden_size", 0);
    if (a.hidden_size <= 0) return InvalidArgument(std::string(name) + " hidden_size must be positive, got " +
                                                   Str(a.hidden_size));
  }
  if (m.Has("clip")) {
    a.has_clip = true;
    a.clip = m.GetFloat("clip", 0.f);
    if (!(a.clip > 0.f)) return InvalidArgument(std::string(name) + " clip must be positive, got " +
                                                std::to_string(a.clip));
  }
  const int64_t layout = m.GetInt("layout", 0);
  if (layout != 0 && layout != 1) return InvalidArgument(std::string(name) + " layout must be 0 or 1, got " + Str(layout));
  a.layout = static_cast<int>(layout);
  if (op == RecurrentOp::kLstm) {
    const int64_t f = m.GetInt("input_forget", 0);
    if (f != 0 && f != 1) return InvalidArgument("LSTM input_forget must be 0 or 1, got " + Str(f));
    a.input_forget = f != 0;
  }
  if (op == RecurrentOp::kGru) a.linear_before_reset = m.GetInt("linear_before_reset", 0) != 0;

  // Activations: per direction (a list for one direction is used for both); alpha and beta are
  // consumed in order by the functions that take them, the operator's default when they run out.
  const std::vector<std::string> defaults = DefaultActivations(op);
  a.per_direction = static_cast<int>(defaults.size());
  const Attribute* acts_attr = m.Find("activations");
  std::vector<std::string> names = acts_attr ? acts_attr->strings : defaults;
  const size_t per = defaults.size(), nd = static_cast<size_t>(a.num_directions);
  if (names.size() == per && nd == 2) {
    const std::vector<std::string> one = names;
    names.insert(names.end(), one.begin(), one.end());
  }
  if (names.size() != per * nd)
    return InvalidArgument(std::string(name) + " takes " + Str(static_cast<int64_t>(per * nd)) +
                           " activations for " + Str(static_cast<int64_t>(nd)) + " direction(s), got " +
                           Str(static_cast<int64_t>(names.size())));
  const std::vector<float> alphas = m.GetFloats("activation_alpha");
  const std::vector<float> betas = m.GetFloats("activation_beta");
  size_t ai = 0, bi = 0;
  for (const std::string& n : names) {
    const std::string l = Lower(n);
    const ActivationName* found = nullptr;
    for (const ActivationName& c : kActivations)
      if (l == c.name) found = &c;
    if (!found) return Unimplemented(std::string(name) + ": unsupported activation '" + n + "'");
    RnnActivation act;
    act.kind = found->kind;
    act.alpha = found->alpha;
    act.beta = found->beta;
    if (found->takes_alpha && ai < alphas.size()) act.alpha = alphas[ai++];
    if (found->takes_beta && bi < betas.size()) act.beta = betas[bi++];
    a.acts.push_back(act);
  }
  return a;
}

Status RecurrentDims::Resolve(const RecurrentAttrs& a, const std::vector<const Tensor*>& in) {
  const RecurrentOp op = a.op;
  auto arg = [&](int i) -> const Tensor* { return i < static_cast<int>(in.size()) ? in[static_cast<size_t>(i)] : nullptr; };
  const Tensor* x = arg(kRnnX);
  const Tensor* w = arg(kRnnW);
  const Tensor* r = arg(kRnnR);
  if (!x || !w || !r) return InvalidArgument(std::string(RecurrentOpName(op)) + " needs X, W and R");
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    const Tensor* t = arg(i);
    if (!t) continue;
    const DType want = i == kRnnSeqLens ? DType::kInt32 : a.dtype;
    if (t->dtype() != want)
      return InvalidArgument(std::string(RecurrentOpName(op)) + " input " + Str(i) + " is " + DTypeName(t->dtype()) +
                             ", expected " + DTypeName(want));
  }
  gates = RecurrentGates(op);
  num_directions = a.num_directions;
  const int64_t nd = num_directions, G = gates;
  if (x->rank() != 3) return ExpectShape(*x, {-1, -1, -1}, "X", op);
  seq = x->dim(a.layout == 0 ? 0 : 1);
  batch = x->dim(a.layout == 0 ? 1 : 0);
  input = x->dim(2);
  if (r->rank() != 3) return ExpectShape(*r, {nd, -1, -1}, "R", op);
  hidden = a.hidden_size > 0 ? a.hidden_size : r->dim(2);
  if (a.hidden_size > 0 && w->rank() == 3 && w->dim(1) != G * hidden)
    return InvalidArgument(std::string(RecurrentOpName(op)) + " W is " + DimsToString(w->dims()) + " but hidden_size " +
                           Str(hidden) + " needs dim 1 = " + Str(G * hidden));
  WH_RETURN_IF_ERROR(ExpectShape(*w, {nd, G * hidden, input}, "W", op));
  WH_RETURN_IF_ERROR(ExpectShape(*r, {nd, G * hidden, hidden}, "R", op));
  if (const Tensor* b = arg(kRnnB)) WH_RETURN_IF_ERROR(ExpectShape(*b, {nd, 2 * G * hidden}, "B", op));
  if (const Tensor* s = arg(kRnnSeqLens)) WH_RETURN_IF_ERROR(ExpectShape(*s, {batch}, "sequence_lens", op));
  const Dims state = a.layout == 0 ? Dims{nd, batch, hidden} : Dims{batch, nd, hidden};
  if (const Tensor* h = arg(kRnnInitialH)) WH_RETURN_IF_ERROR(ExpectShape(*h, state, "initial_h", op));
  if (op == RecurrentOp::kLstm) {
    if (const Tensor* c = arg(kRnnInitialC)) WH_RETURN_IF_ERROR(ExpectShape(*c, state, "initial_c", op));
    if (const Tensor* p = arg(kRnnP)) WH_RETURN_IF_ERROR(ExpectShape(*p, {nd, 3 * hidden}, "P", op));
  } else if (in.size() > kRnnInitialC && (arg(kRnnInitialC) || arg(kRnnP))) {
    return InvalidArgument(std::string(RecurrentOpName(op)) + " takes at most 6 inputs");
  }
  return Status::Ok();
}

StatusOr<std::vector<int64_t>> ResolveSequenceLengths(const Tensor* sequence_lens, const RecurrentDims& d) {
  std::vector<int64_t> lens(static_cast<size_t>(d.batch), d.seq);
  if (!sequence_lens) return lens;
  const int32_t* p = sequence_lens->data<int32_t>();
  for (int64_t b = 0; b < d.batch; ++b) {
    if (p[b] < 0 || p[b] > d.seq)
      return InvalidArgument("sequence_lens[" + Str(b) + "] = " + Str(p[b]) + " is outside [0, " + Str(d.seq) + "]");
    lens[static_cast<size_t>(b)] = p[b];
  }
  return lens;
}

}  // namespace whittle
