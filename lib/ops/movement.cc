// Data-movement ops: Transpose, Concat, Split, Slice, Gather, Expand, Pad, Tile and Range.
// Inference follows ONNX 1.12 semantics for opsets 7..17, including the attribute-to-input moves
// (Slice 10, Pad 11, Split 13). When index inputs (starts, pads, split, repeats ...) are not
// known yet, the output keeps its rank with unknown dims; at run time every value is known and
// the shapes are concrete.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "lib/ir/pads.h"
#include "lib/ops/op_def.h"
#include "lib/ops/shape_helpers.h"

namespace whittle {
namespace {

constexpr int kMaxArity = 1 << 20;

// Value of an int32/int64 input (rank <= 1) when present and known; *known is false otherwise.
Status ReadInts(const InferContext& ctx, int i, const char* what, bool* known, std::vector<int64_t>* out) {
  const Tensor* t = ctx.InputValue(i);
  *known = t != nullptr;
  if (!t) return Status::Ok();
  if (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)
    return ctx.Error(std::string(what) + " must be int64, got " + DTypeName(t->dtype()));
  if (t->rank() > 1) return ctx.Error(std::string(what) + " must be 1-D, got shape " + DimsToString(t->dims()));
  *out = ToInt64Vector(*t);
  return Status::Ok();
}

SymShape UnknownDims(size_t rank) { return SymShape(rank, Dim()); }

// Input 0's dtype and shape, and the values of int input 1 (Expand's shape, Tile's repeats) when
// it is a known constant: the common start of the ops whose output dims come from an input.
struct DataAndInts {
  DType dt = DType::kUndefined;
  const SymShape* in = nullptr;
  bool known = false;
  std::vector<int64_t> values;
};
StatusOr<DataAndInts> ReadDataAndInts(const InferContext& ctx, const char* what) {
  DataAndInts r;
  r.dt = ctx.InputDType(0);
  r.in = ctx.InputShape(0);
  WH_RETURN_IF_ERROR(ReadInts(ctx, 1, what, &r.known, &r.values));
  return r;
}

// ---------------------------------------------------------------- Transpose

Status CheckTranspose(const Node& node, int) {
  const std::vector<int64_t> perm = node.attrs.GetInts("perm");
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[static_cast<size_t>(p)])
      return InvalidArgument(node.DebugName() + ": perm " + DimsToString(perm) + " is not a permutation of 0.." +
                             std::to_string(static_cast<int64_t>(perm.size()) - 1));
    seen[static_cast<size_t>(p)] = true;
  }
  return Status::Ok();
}

Status InferTranspose(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = ctx.InputShape(0);
  std::vector<int64_t> perm = ctx.attrs().GetInts("perm");
  if (!in) {
    ctx.SetOutput(0, dt, perm.empty() ? std::nullopt : std::optional<SymShape>(UnknownDims(perm.size())));
    return Status::Ok();
  }
  if (perm.empty())
    for (size_t i = in->size(); i > 0; --i) perm.push_back(static_cast<int64_t>(i - 1));
  if (perm.size() != in->size())
    return ctx.Error("perm " + DimsToString(perm) + " has " + std::to_string(perm.size()) +
                     " entries for an input of rank " + std::to_string(in->size()));
  SymShape out;
  for (int64_t p : perm) out.push_back((*in)[static_cast<size_t>(p)]);
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Concat

Status InferConcat(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* first = nullptr;
  bool all_known = true;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.HasInput(i)) return ctx.Error("input " + std::to_string(i) + " is missing");
    if (ctx.InputDType(i) != dt)
      return ctx.Error("input " + std::to_string(i) + " is " + DTypeName(ctx.InputDType(i)) + " but input 0 is " +
                       DTypeName(dt));
    const SymShape* s = ctx.InputShape(i);
    if (!s) {
      all_known = false;
      continue;
    }
    if (!first) first = s;
    else if (s->size() != first->size())
      return ctx.Error("inputs have different ranks: " + SymShapeToString(*first) + " and " + SymShapeToString(*s));
  }
  if (!first) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(first->size());
  auto axis_or = NormalizeAxis(ctx.attrs().GetInt("axis", 0), r);
  if (!axis_or.ok()) return ctx.Error(axis_or.status().message());
  const size_t axis = static_cast<size_t>(*axis_or);
  SymShape out = *first;
  int64_t sum = 0;
  bool sum_known = all_known;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const SymShape* s = ctx.InputShape(i);
    if (!s) continue;
    for (size_t k = 0; k < s->size(); ++k) {
      const Dim& d = (*s)[k];
      if (k == axis) {
        if (!d.known()) sum_known = false;
        else if (__builtin_add_overflow(sum, d.value, &sum))
          return ctx.Error("the inputs' dims along axis " + std::to_string(axis) + " sum past 2^63");
      } else if (d.known() && out[k].known() && d.value != out[k].value) {
        return ctx.Error("input " + std::to_string(i) + " has shape " + SymShapeToString(*s) + ", which differs from " +
                         SymShapeToString(*first) + " outside axis " + std::to_string(axis));
      } else if (d.known() && !out[k].known()) {
        out[k] = d;
      }
    }
  }
  out[axis] = sum_known ? Dim(sum) : Dim();
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Split

Status CheckSplit(const Node& node, int opset) {
  if (opset >= 13 && node.attrs.Has("split"))
    return InvalidArgument(node.DebugName() + ": attribute 'split' was replaced by the 'split' input in opset 13");
  if (opset < 13 && node.inputs.size() > 1 && node.inputs[1] >= 0)
    return InvalidArgument(node.DebugName() + ": the 'split' input needs opset 13; use the 'split' attribute");
  for (int64_t s : node.attrs.GetInts("split"))
    if (s < 0) return InvalidArgument(node.DebugName() + ": split sizes must be >= 0, got " + std::to_string(s));
  if (node.attrs.Has("num_outputs")) {
    if (opset < 18) return InvalidArgument(node.DebugName() + ": attribute 'num_outputs' needs opset 18");
    if (node.inputs.size() > 1 && node.inputs[1] >= 0)
      return InvalidArgument(node.DebugName() + ": give the 'split' input or 'num_outputs', not both");
    if (node.attrs.GetInt("num_outputs", 0) != static_cast<int64_t>(node.outputs.size()))
      return InvalidArgument(node.DebugName() + ": num_outputs is " + std::to_string(node.attrs.GetInt("num_outputs", 0)) +
                             " but the node has " + std::to_string(node.outputs.size()) + " outputs");
  }
  return Status::Ok();
}

Status InferSplit(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = ctx.InputShape(0);
  const int n = ctx.num_outputs();
  if (!in) {
    for (int i = 0; i < n; ++i) ctx.SetOutput(i, dt, std::nullopt);
    return Status::Ok();
  }
  auto axis_or = NormalizeAxis(ctx.attrs().GetInt("axis", 0), static_cast<int64_t>(in->size()));
  if (!axis_or.ok()) return ctx.Error(axis_or.status().message());
  const size_t axis = static_cast<size_t>(*axis_or);
  const Dim d = (*in)[axis];
  std::vector<int64_t> split;
  bool have_split = false, known = true;
  if (ctx.opset() < 13 && ctx.attrs().Has("split")) {
    split = ctx.attrs().GetInts("split");
    have_split = true;
  } else if (ctx.opset() >= 13 && ctx.HasInput(1)) {
    WH_RETURN_IF_ERROR(ReadInts(ctx, 1, "the split input", &known, &split));
    have_split = known;
  }
  std::vector<Dim> sizes(static_cast<size_t>(n), Dim());
  if (have_split) {
    if (static_cast<int>(split.size()) != n)
      return ctx.Error("split " + DimsToString(split) + " has " + std::to_string(split.size()) + " entries for " +
                       std::to_string(n) + " outputs");
    int64_t sum = 0;
    for (size_t i = 0; i < split.size(); ++i) {
      if (split[i] < 0) return ctx.Error("split sizes must be >= 0, got " + DimsToString(split));
      if (__builtin_add_overflow(sum, split[i], &sum))
        return ctx.Error("split " + DimsToString(split) + " sums past 2^63");
      sizes[i] = Dim(split[i]);
    }
    if (d.known() && sum != d.value)
      return ctx.Error("split " + DimsToString(split) + " sums to " + std::to_string(sum) + " but axis " +
                       std::to_string(axis) + " has size " + std::to_string(d.value));
  } else if (known && d.known() && ctx.attrs().Has("num_outputs")) {
    // Opset 18: chunks of ceil(d / n), the last one smaller when d does not divide.
    const int64_t chunk = d.value / n + (d.value % n != 0);  // ceil, without d + n - 1 overflowing
    int64_t left = d.value;
    for (int i = 0; i < n; ++i) {
      sizes[static_cast<size_t>(i)] = Dim(std::min(chunk, left));
      left -= std::min(chunk, left);
    }
  } else if (known && d.known()) {
    if (d.value % n != 0)
      return ctx.Error("axis " + std::to_string(axis) + " of size " + std::to_string(d.value) +
                       " cannot be split into " + std::to_string(n) + " equal parts");
    for (Dim& s : sizes) s = Dim(d.value / n);
  }
  for (int i = 0; i < n; ++i) {
    SymShape out = *in;
    out[axis] = sizes[static_cast<size_t>(i)];
    ctx.SetOutput(i, dt, out);
  }
  return Status::Ok();
}

// ---------------------------------------------------------------- Slice

Status CheckSlice(const Node& node, int opset) {
  if (opset < 10) {
    if (!node.attrs.Has("starts") || !node.attrs.Has("ends"))
      return InvalidArgument(node.DebugName() + ": attributes 'starts' and 'ends' are required before opset 10");
    if (node.inputs.size() > 1)
      return InvalidArgument(node.DebugName() + ": inputs starts/ends/axes/steps need opset 10");
  } else {
    if (node.attrs.Has("starts") || node.attrs.Has("ends") || node.attrs.Has("axes"))
      return InvalidArgument(node.DebugName() + ": attributes starts/ends/axes became inputs in opset 10");
    if (node.inputs.size() < 3 || node.inputs[1] < 0 || node.inputs[2] < 0)
      return InvalidArgument(node.DebugName() + ": inputs 'starts' and 'ends' are required");
  }
  return Status::Ok();
}

// Output size of one sliced axis of known size d, as ONNX defines the clamping.
int64_t SliceLength(int64_t d, int64_t start, int64_t end, int64_t step) {
  if (d == 0) return 0;
  if (start < 0) start += d;
  if (end < 0) end += d;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, d);
    end = std::clamp<int64_t>(end, 0, d);
    return end > start ? (end - start - 1) / step + 1 : 0;  // no overflow for huge steps
  }
  start = std::clamp<int64_t>(start, 0, d - 1);
  end = std::clamp<int64_t>(end, -1, d - 1);
  // step == INT64_MIN has no positive counterpart; INT64_MAX gives the same single element.
  const int64_t s = step == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : -step;
  return start > end ? (start - end - 1) / s + 1 : 0;
}

Status InferSlice(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = ctx.InputShape(0);
  if (!in) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(in->size());
  std::vector<int64_t> starts, ends, axes, steps;
  bool known = true, axes_known = true;
  if (ctx.opset() < 10) {
    starts = ctx.attrs().GetInts("starts");
    ends = ctx.attrs().GetInts("ends");
    axes = ctx.attrs().GetInts("axes");
  } else {
    bool k;
    WH_RETURN_IF_ERROR(ReadInts(ctx, 1, "starts", &k, &starts));
    known &= k;
    WH_RETURN_IF_ERROR(ReadInts(ctx, 2, "ends", &k, &ends));
    known &= k;
    if (ctx.HasInput(3)) {
      WH_RETURN_IF_ERROR(ReadInts(ctx, 3, "axes", &axes_known, &axes));
      known &= axes_known;
    }
    if (ctx.HasInput(4)) {
      WH_RETURN_IF_ERROR(ReadInts(ctx, 4, "steps", &k, &steps));
      known &= k;
    }
  }
  const bool default_axes = axes.empty() && axes_known && !(ctx.opset() >= 10 && ctx.HasInput(3));
  if (default_axes && known)
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (axes_known && !axes.empty()) {
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (int64_t& a : axes) {
      auto n = NormalizeAxis(a, r);
      if (!n.ok()) return ctx.Error(n.status().message());
      if (seen[static_cast<size_t>(*n)]) return ctx.Error("axis " + std::to_string(a) + " is repeated");
      seen[static_cast<size_t>(*n)] = true;
      a = *n;
    }
  }
  if (!known) {
    SymShape out = *in;
    if (axes_known && !default_axes) {
      for (int64_t a : axes) out[static_cast<size_t>(a)] = Dim();
    } else {
      out = UnknownDims(in->size());
    }
    ctx.SetOutput(0, dt, out);
    return Status::Ok();
  }
  if (starts.size() != ends.size() || starts.size() != axes.size() || (!steps.empty() && steps.size() != starts.size()))
    return ctx.Error("starts, ends, axes and steps must have the same length, got " + std::to_string(starts.size()) +
                     ", " + std::to_string(ends.size()) + ", " + std::to_string(axes.size()) + ", " +
                     std::to_string(steps.size()));
  SymShape out = *in;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) return ctx.Error("steps may not contain 0");
    Dim& d = out[static_cast<size_t>(axes[i])];
    if (d.known()) {
      d = Dim(SliceLength(d.value, starts[i], ends[i], step));
    } else {
      // A full slice ([0:INT_MAX] or reversed [-1:-INT_MAX:-1]) keeps a symbolic dim.
      constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
      const bool full = (starts[i] == 0 && step == 1 && ends[i] >= kBig) ||
                        (starts[i] == -1 && step == -1 && ends[i] <= -kBig);
      if (!full) d = Dim();
    }
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Gather

Status InferGather(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const DType it = ctx.InputDType(1);
  if (it != DType::kInt32 && it != DType::kInt64)
    return ctx.Error(std::string("indices must be int32 or int64, got ") + DTypeName(it));
  const SymShape* data = ctx.InputShape(0);
  const SymShape* ind = ctx.InputShape(1);
  if (data && data->empty()) return ctx.Error("data must have rank >= 1");
  if (!data || !ind) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  auto axis_or = NormalizeAxis(ctx.attrs().GetInt("axis", 0), static_cast<int64_t>(data->size()));
  if (!axis_or.ok()) return ctx.Error(axis_or.status().message());
  const size_t axis = static_cast<size_t>(*axis_or);
  SymShape out(data->begin(), data->begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), ind->begin(), ind->end());
  out.insert(out.end(), data->begin() + static_cast<std::ptrdiff_t>(axis) + 1, data->end());
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Expand

Status InferExpand(InferContext& ctx) {
  WH_ASSIGN_OR_RETURN(const DataAndInts args, ReadDataAndInts(ctx, "the shape input"));
  const DType dt = args.dt;
  const SymShape* in = args.in;
  const std::vector<int64_t>& shape = args.values;
  if (!args.known) {
    const SymShape* ss = ctx.InputShape(1);
    if (in && ss && ss->size() == 1 && (*ss)[0].known()) {
      WH_ASSIGN_OR_RETURN(SymShape out, UnknownDimsOfRank(ctx, (*ss)[0].value));
      ctx.SetOutput(0, dt, out.size() >= in->size() ? std::move(out) : UnknownDims(in->size()));
    } else {
      ctx.SetOutput(0, dt, std::nullopt);
    }
    return Status::Ok();
  }
  for (int64_t d : shape)
    if (d < 0) return ctx.Error("the shape input has a negative dim: " + DimsToString(shape));
  if (!in) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  auto out = BroadcastShapes(*in, ToSymShape(shape));
  if (!out.ok()) return ctx.Error(out.status().message());
  ctx.SetOutput(0, dt, *out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Pad

Status CheckPad(const Node& node, int opset) {
  const std::string mode = node.attrs.GetString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && !(mode == "wrap" && opset >= 19))
    return InvalidArgument(node.DebugName() + ": mode '" + mode + "' is not one of constant, reflect, edge" +
                           (opset >= 19 ? ", wrap" : ""));
  if (opset < 18 && node.inputs.size() > 3 && node.inputs[3] >= 0)
    return InvalidArgument(node.DebugName() + ": the 'axes' input needs opset 18");
  if (opset < 11) {
    if (!node.attrs.Has("pads")) return InvalidArgument(node.DebugName() + ": attribute 'pads' is required");
    if (node.inputs.size() > 1) return InvalidArgument(node.DebugName() + ": inputs 'pads'/'constant_value' need opset 11");
  } else {
    if (node.attrs.Has("pads") || node.attrs.Has("value"))
      return InvalidArgument(node.DebugName() + ": attributes 'pads' and 'value' became inputs in opset 11");
    if (node.inputs.size() < 2 || node.inputs[1] < 0)
      return InvalidArgument(node.DebugName() + ": input 'pads' is required");
  }
  return Status::Ok();
}

Status InferPad(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  const SymShape* in = ctx.InputShape(0);
  std::vector<int64_t> pads;
  bool known = true;
  if (ctx.opset() < 11) pads = ctx.attrs().GetInts("pads");
  else WH_RETURN_IF_ERROR(ReadInts(ctx, 1, "pads", &known, &pads));
  std::vector<int64_t> axes;
  bool axes_known = true;
  const bool has_axes = ctx.opset() >= 18 && ctx.HasInput(3);
  if (has_axes) WH_RETURN_IF_ERROR(ReadInts(ctx, 3, "axes", &axes_known, &axes));
  known = known && axes_known;
  if (ctx.opset() >= 11 && ctx.HasInput(2)) {
    if (ctx.InputDType(2) != dt)
      return ctx.Error(std::string("constant_value is ") + DTypeName(ctx.InputDType(2)) + " but data is " + DTypeName(dt));
    const Tensor* v = ctx.InputValue(2);
    if (v && v->numel() != 1) return ctx.Error("constant_value must be a scalar, got shape " + DimsToString(v->dims()));
  }
  if (!in) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  if (!known) {
    ctx.SetOutput(0, dt, UnknownDims(in->size()));
    return Status::Ok();
  }
  const size_t r = in->size();
  if (has_axes) {
    auto all = PadsForAllAxes(pads, axes, static_cast<int64_t>(r));
    if (!all.ok()) return ctx.Error(all.status().message());
    pads = *all;
  }
  if (pads.size() != 2 * r)
    return ctx.Error("pads " + DimsToString(pads) + " must have 2 * rank = " + std::to_string(2 * r) + " entries");
  const bool constant = ctx.attrs().GetString("mode", "constant") == "constant";
  SymShape out = *in;
  for (size_t i = 0; i < r; ++i) {
    const int64_t b = pads[i], e = pads[i + r];
    if (!out[i].known()) {
      if (b != 0 || e != 0) out[i] = Dim();
      continue;
    }
    const int64_t d = out[i].value;
    if (!constant && d == 0 && (b > 0 || e > 0))
      return ctx.Error("cannot pad axis " + std::to_string(i) + " of size 0 in mode '" +
                       ctx.attrs().GetString("mode", "") + "'");
    int64_t n;
    if (__builtin_add_overflow(d, b, &n) || __builtin_add_overflow(n, e, &n))
      return ctx.Error("pads " + DimsToString(pads) + " overflow the size of axis " + std::to_string(i));
    if (n < 0)
      return ctx.Error("pads " + DimsToString(pads) + " remove more than axis " + std::to_string(i) + " of size " +
                       std::to_string(d) + " holds");
    out[i] = Dim(n);
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Tile

Status InferTile(InferContext& ctx) {
  WH_ASSIGN_OR_RETURN(const DataAndInts args, ReadDataAndInts(ctx, "repeats"));
  const DType dt = args.dt;
  const SymShape* in = args.in;
  const std::vector<int64_t>& reps = args.values;
  if (!in) {
    ctx.SetOutput(0, dt, std::nullopt);
    return Status::Ok();
  }
  if (!args.known) {
    ctx.SetOutput(0, dt, UnknownDims(in->size()));
    return Status::Ok();
  }
  if (reps.size() != in->size())
    return ctx.Error("repeats " + DimsToString(reps) + " must have one entry per input dim (rank " +
                     std::to_string(in->size()) + ")");
  SymShape out = *in;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) return ctx.Error("repeats must be >= 0, got " + DimsToString(reps));
    int64_t v;
    if (out[i].known() && !__builtin_mul_overflow(out[i].value, reps[i], &v)) out[i] = Dim(v);
    else if (reps[i] == 0) out[i] = Dim(0);
    else if (reps[i] != 1) out[i] = Dim();
  }
  ctx.SetOutput(0, dt, out);
  return Status::Ok();
}

// ---------------------------------------------------------------- Range

// The value of a float16 (bf: bfloat16) scalar.
double HalfScalar(uint16_t h, bool bf) {
  if (bf) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
  }
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? std::nan("") : INFINITY) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

// The scalar of input i as a double.
double RangeScalar(const InferContext& ctx, int i) {
  const Tensor& t = *ctx.InputValue(i);
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[0];
    case DType::kFloat64: return t.data<double>()[0];
    case DType::kInt16: return t.data<int16_t>()[0];
    case DType::kInt32: return t.data<int32_t>()[0];
    case DType::kFloat16:
    case DType::kBFloat16:
      return HalfScalar(static_cast<const uint16_t*>(t.raw_data())[0], t.dtype() == DType::kBFloat16);
    default: return static_cast<double>(t.data<int64_t>()[0]);
  }
}

StatusOr<int64_t> RangeCount(const InferContext& ctx) {
  const double start = RangeScalar(ctx, 0), limit = RangeScalar(ctx, 1), delta = RangeScalar(ctx, 2);
  if (delta == 0) return ctx.Error("delta must not be 0");
  const double n = std::ceil((limit - start) / delta);
  if (!(n < 4.0e18)) return ctx.Error("the range is too long or not finite");
  return n > 0 ? static_cast<int64_t>(n) : int64_t{0};
}

Status InferRange(InferContext& ctx) {
  const DType dt = ctx.InputDType(0);
  for (int i = 1; i < 3; ++i)
    if (ctx.InputDType(i) != dt)
      return ctx.Error("start, limit and delta must have the same type, got " + std::string(DTypeName(dt)) + " and " +
                       DTypeName(ctx.InputDType(i)));
  const bool half = dt == DType::kFloat16 || dt == DType::kBFloat16;
  if (half && ctx.opset() < 27) return ctx.Error(std::string("type ") + DTypeName(dt) + " needs opset 27");
  if (half && ctx.attrs().GetInt("stash_type", 1) != 1)
    return Unimplemented(ctx.node().DebugName() + ": stash_type " + std::to_string(ctx.attrs().GetInt("stash_type", 1)) +
                         " is not supported (float, 1, is)");
  if (dt != DType::kFloat32 && dt != DType::kFloat64 && dt != DType::kInt16 && dt != DType::kInt32 &&
      dt != DType::kInt64 && !half)
    return ctx.Error(std::string("type ") + DTypeName(dt) +
                     " is not one of float, double, int16, int32, int64 (float16, bfloat16 from opset 27)");
  for (int i = 0; i < 3; ++i) {
    const SymShape* s = ctx.InputShape(i);
    // One element of rank 1 is read as the scalar (as ONNX Runtime does); an unknown length is
    // checked at run time, where it is known.
    if (s && !(s->empty() || (s->size() == 1 && ((*s)[0] == Dim(1) || !(*s)[0].known()))))
      return ctx.Error("start, limit and delta must be scalars, input " + std::to_string(i) + " has shape " +
                       SymShapeToString(*s));
  }
  if (!ctx.InputValue(0) || !ctx.InputValue(1) || !ctx.InputValue(2)) {
    ctx.SetOutput(0, dt, SymShape{Dim()});
    return Status::Ok();
  }
  StatusOr<int64_t> n = RangeCount(ctx);
  if (!n.ok()) return n.status();
  ctx.SetOutput(0, dt, SymShape{Dim(*n)});
  return Status::Ok();
}

}  // namespace

void RegisterMovementOps(OpRegistry& r) {
  r.Register(OpDef{"", "Transpose", 1, 1, 1, 1, 1, {{"perm", AttrType::kInts}}, CheckTranspose, InferTranspose});
  r.Register(OpDef{"", "Concat", 4, 1, kMaxArity, 1, 1, {{"axis", AttrType::kInt, true}}, nullptr, InferConcat});
  r.Register(OpDef{"", "Split", 2, 1, 2, 1, kMaxArity,
                   {{"axis", AttrType::kInt}, {"split", AttrType::kInts}, {"num_outputs", AttrType::kInt}}, CheckSplit,
                   InferSplit, /*max_opset=*/21});
  r.Register(OpDef{"", "Slice", 1, 1, 5, 1, 1,
                   {{"starts", AttrType::kInts}, {"ends", AttrType::kInts}, {"axes", AttrType::kInts}}, CheckSlice,
                   InferSlice});
  r.Register(OpDef{"", "Gather", 1, 2, 2, 1, 1, {{"axis", AttrType::kInt}}, nullptr, InferGather});
  r.Register(OpDef{"", "Expand", 8, 2, 2, 1, 1, {}, nullptr, InferExpand});
  r.Register(OpDef{"", "Pad", 2, 1, 4, 1, 1,
                   {{"mode", AttrType::kString}, {"pads", AttrType::kInts}, {"value", AttrType::kFloat}}, CheckPad,
                   InferPad, /*max_opset=*/21});  // 18: axes input; 19: wrap mode
  r.Register(OpDef{"", "Tile", 6, 2, 2, 1, 1, {}, nullptr, InferTile});
  // 27: float16/bfloat16, computed in the type stash_type names (float, 1, by default; the
  // attribute does nothing for the other types).
  OpDef range{"", "Range", 11, 3, 3, 1, 1, {{"stash_type", AttrType::kInt}},
              [](const Node& n, int opset) -> Status {
                if (n.attrs.Has("stash_type") && opset < 27)
                  return InvalidArgument(n.DebugName() + ": Range has the stash_type attribute from opset 27");
                return Status::Ok();
              },
              InferRange};
  range.max_opset = 27;
  r.Register(std::move(range));
}

}  // namespace whittle
