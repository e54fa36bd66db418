// Kernels of the sequence and optional ops (lib/ops/sequence.cc). A sequence is a Tensor that holds
// its elements (Tensor::Sequence); an element is shared, never written, so inserting or reading one
// copies no bytes. Each kernel sets its outputs itself (their shapes depend on the elements), on
// the host, for every backend.
#include <cstring>

#include "kernels/kernel.h"

namespace whittle {
namespace {

// The most elements a sequence may hold: each costs a Tensor's bookkeeping beside its bytes, so a
// hostile split of a large tensor into single elements, or a loop that inserts without end, stops
// with an error instead of exhausting memory.
constexpr int64_t kMaxSequenceElements = int64_t{1} << 20;

Status CheckLength(int64_t n) {
  if (n > kMaxSequenceElements)
    return ResourceExhausted("a sequence of " + std::to_string(n) + " elements is over the limit of " +
                             std::to_string(kMaxSequenceElements));
  return Status::Ok();
}

class SequenceKernel : public OpKernel {
 public:
  bool SetsOutputs() const override { return true; }
};

Status NeedSequence(const Tensor* t, const char* what) {
  if (!t || !t->is_sequence()) return InvalidArgument(std::string(what) + " must be a sequence");
  return Status::Ok();
}

Status NeedTensor(const Tensor* t, const char* what) {
  if (!t || !t->is_tensor()) return InvalidArgument(std::string(what) + " must be a tensor");
  if (t->device() != DeviceType::kCpu) return Internal(std::string(what) + " is not on the host");
  return Status::Ok();
}

// The position input: one int32 or int64, in [-size, size - 1], or [-size, size] when inserting
// (size: past the end). Absent: `fallback`.
StatusOr<int64_t> Position(const Tensor* t, int64_t size, bool inserting, int64_t fallback) {
  if (!t) return fallback;
  WH_RETURN_IF_ERROR(NeedTensor(t, "position"));
  if (t->numel() != 1 || t->rank() > 1)
    return InvalidArgument("position must be a scalar, got shape " + DimsToString(t->dims()));
  int64_t p;
  if (t->dtype() == DType::kInt64) p = t->data<int64_t>()[0];
  else if (t->dtype() == DType::kInt32) p = t->data<int32_t>()[0];
  else return InvalidArgument("position must be int32 or int64, got " + std::string(DTypeName(t->dtype())));
  const int64_t hi = inserting ? size : size - 1;
  if (p < -size || p > hi)
    return InvalidArgument("position " + std::to_string(p) + " is out of range for a sequence of " +
                           std::to_string(size) + " element(s)");
  return p < 0 ? p + size : p;
}

template <class F>
KernelOr Make(F compute) {
  struct K : SequenceKernel {
    explicit K(F f) : f_(std::move(f)) {}
    Status Compute(KernelContext& ctx) const override { return f_(ctx); }
    F f_;
  };
  return std::unique_ptr<OpKernel>(new K(std::move(compute)));
}

KernelOr MakeSequenceEmpty(const KernelInit& init) {
  const auto dt = static_cast<DType>(init.attrs.GetInt("dtype", static_cast<int64_t>(DType::kFloat32)));
  return Make([dt](KernelContext& ctx) {
    *ctx.outputs[0] = Tensor::Sequence(dt, {});
    return Status::Ok();
  });
}

KernelOr MakeSequenceConstruct(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    std::vector<Tensor> items;
    for (const Tensor* t : ctx.inputs) {
      WH_RETURN_IF_ERROR(NeedTensor(t, "every input"));
      if (t->dtype() != ctx.inputs[0]->dtype())
        return InvalidArgument("inputs are " + std::string(DTypeName(ctx.inputs[0]->dtype())) + " and " +
                               DTypeName(t->dtype()) + "; a sequence holds one type");
      items.push_back(*t);
    }
    *ctx.outputs[0] = Tensor::Sequence(ctx.inputs[0]->dtype(), std::move(items));
    return Status::Ok();
  });
}

KernelOr MakeSequenceInsert(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    const Tensor* s = ctx.inputs[0];
    const Tensor* t = ctx.inputs[1];
    WH_RETURN_IF_ERROR(NeedSequence(s, "input_sequence"));
    WH_RETURN_IF_ERROR(NeedTensor(t, "tensor"));
    if (t->dtype() != s->element_dtype())
      return InvalidArgument("the tensor is " + std::string(DTypeName(t->dtype())) + ", the sequence holds " +
                             DTypeName(s->element_dtype()));
    const auto n = static_cast<int64_t>(s->elements().size());
    WH_RETURN_IF_ERROR(CheckLength(n + 1));
    WH_ASSIGN_OR_RETURN(int64_t p, Position(ctx.inputs.size() > 2 ? ctx.inputs[2] : nullptr, n, true, n));
    std::vector<Tensor> items = s->elements();
    items.insert(items.begin() + p, *t);
    *ctx.outputs[0] = Tensor::Sequence(s->element_dtype(), std::move(items));
    return Status::Ok();
  });
}

KernelOr MakeSequenceAt(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    const Tensor* s = ctx.inputs[0];
    WH_RETURN_IF_ERROR(NeedSequence(s, "input_sequence"));
    const auto n = static_cast<int64_t>(s->elements().size());
    if (!ctx.inputs[1]) return InvalidArgument("position is missing");
    WH_ASSIGN_OR_RETURN(int64_t p, Position(ctx.inputs[1], n, false, 0));
    *ctx.outputs[0] = s->elements()[static_cast<size_t>(p)];
    return Status::Ok();
  });
}

KernelOr MakeSequenceErase(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    const Tensor* s = ctx.inputs[0];
    WH_RETURN_IF_ERROR(NeedSequence(s, "input_sequence"));
    const auto n = static_cast<int64_t>(s->elements().size());
    if (n == 0) return InvalidArgument("cannot erase from an empty sequence");
    WH_ASSIGN_OR_RETURN(int64_t p, Position(ctx.inputs.size() > 1 ? ctx.inputs[1] : nullptr, n, false, n - 1));
    std::vector<Tensor> items = s->elements();
    items.erase(items.begin() + p);
    *ctx.outputs[0] = Tensor::Sequence(s->element_dtype(), std::move(items));
    return Status::Ok();
  });
}

KernelOr MakeSequenceLength(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    WH_RETURN_IF_ERROR(NeedSequence(ctx.inputs[0], "input_sequence"));
    *ctx.outputs[0] = Tensor::Scalar<int64_t>(static_cast<int64_t>(ctx.inputs[0]->elements().size()));
    return Status::Ok();
  });
}

// Joins equal-typed parts along `axis`: every dim but axis must agree (new_axis: every dim, and
// each part gains a dim of 1 at axis first).
KernelOr MakeConcatFromSequence(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  const bool new_axis = init.attrs.GetInt("new_axis", 0) == 1;
  return Make([axis_attr, new_axis](KernelContext& ctx) {
    const Tensor* s = ctx.inputs[0];
    WH_RETURN_IF_ERROR(NeedSequence(s, "input_sequence"));
    const std::vector<Tensor>& parts = s->elements();
    if (parts.empty()) return InvalidArgument("cannot concatenate an empty sequence");
    for (const Tensor& p : parts) WH_RETURN_IF_ERROR(NeedTensor(&p, "every element"));
    const Tensor& p0 = parts[0];
    const int64_t r = p0.rank() + (new_axis ? 1 : 0);
    int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
    if (axis < 0 || axis >= r || (!new_axis && p0.rank() == 0))
      return InvalidArgument("axis " + std::to_string(axis_attr) + " is out of range for elements of rank " +
                             std::to_string(p0.rank()) + (new_axis ? " (new_axis)" : ""));
    auto dims_of = [&](const Tensor& t) {
      Dims d = t.dims();
      if (new_axis) d.insert(d.begin() + axis, 1);
      return d;
    };
    Dims out = dims_of(p0);
    out[static_cast<size_t>(axis)] = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const Dims d = dims_of(parts[i]);
      bool ok = parts[i].dtype() == p0.dtype() && d.size() == out.size();
      for (size_t k = 0; ok && k < d.size(); ++k) ok = k == static_cast<size_t>(axis) || d[k] == out[k];
      if (!ok)
        return InvalidArgument("element " + std::to_string(i) + " is " + DTypeName(parts[i].dtype()) +
                               DimsToString(parts[i].dims()) + ", element 0 " + DTypeName(p0.dtype()) +
                               DimsToString(p0.dims()) + ": they differ off the concatenation axis");
      out[static_cast<size_t>(axis)] += d[static_cast<size_t>(axis)];
    }
    WH_ASSIGN_OR_RETURN(int64_t total, CheckedNumElements(out));
    (void)total;
    Tensor y(p0.dtype(), out);
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= out[static_cast<size_t>(k)];
    for (size_t k = static_cast<size_t>(axis) + 1; k < out.size(); ++k) inner *= out[k];
    const size_t es = DTypeSize(p0.dtype());
    const size_t out_row = static_cast<size_t>(out[static_cast<size_t>(axis)] * inner) * es;
    auto* dst = static_cast<char*>(y.raw_data());
    size_t at = 0;
    for (const Tensor& p : parts) {
      const size_t row = static_cast<size_t>(dims_of(p)[static_cast<size_t>(axis)] * inner) * es;
      const auto* src = static_cast<const char*>(p.raw_data());
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + static_cast<size_t>(o) * out_row + at, src + static_cast<size_t>(o) * row, row);
      at += row;
    }
    *ctx.outputs[0] = std::move(y);
    return Status::Ok();
  });
}

// Splits along axis: into pieces of the lengths `split` lists, into pieces of `split` rows (the
// last may be shorter), or, with no split, into single rows (dropped when keepdims is 0).
KernelOr MakeSplitToSequence(const KernelInit& init) {
  const int64_t axis_attr = init.attrs.GetInt("axis", 0);
  const bool keepdims = init.attrs.GetInt("keepdims", 1) != 0;
  return Make([axis_attr, keepdims](KernelContext& ctx) {
    const Tensor* x = ctx.inputs[0];
    WH_RETURN_IF_ERROR(NeedTensor(x, "input"));
    const int64_t r = x->rank();
    const int64_t axis = axis_attr < 0 ? axis_attr + r : axis_attr;
    if (axis < 0 || axis >= r)
      return InvalidArgument("axis " + std::to_string(axis_attr) + " is out of range for rank " + std::to_string(r));
    const int64_t len = x->dim(static_cast<int>(axis));
    std::vector<int64_t> lengths;
    const Tensor* split = ctx.inputs.size() > 1 ? ctx.inputs[1] : nullptr;
    bool squeeze = false;
    if (!split) {
      WH_RETURN_IF_ERROR(CheckLength(len));
      lengths.assign(static_cast<size_t>(len), 1);
      squeeze = !keepdims;
    } else {
      WH_RETURN_IF_ERROR(NeedTensor(split, "split"));
      if (split->dtype() != DType::kInt64 && split->dtype() != DType::kInt32)
        return InvalidArgument("split must be int32 or int64");
      auto at = [&](int64_t i) {
        return split->dtype() == DType::kInt64 ? split->data<int64_t>()[i] : int64_t{split->data<int32_t>()[i]};
      };
      if (split->rank() == 0) {
        const int64_t piece = at(0);
        if (piece <= 0) return InvalidArgument("split must be positive, got " + std::to_string(piece));
        WH_RETURN_IF_ERROR(CheckLength(len / piece + (len % piece != 0)));
        for (int64_t done = 0; done < len; done += piece) lengths.push_back(std::min(piece, len - done));
      } else if (split->rank() == 1) {
        int64_t sum = 0;
        WH_RETURN_IF_ERROR(CheckLength(split->numel()));
        for (int64_t i = 0; i < split->numel(); ++i) {
          if (at(i) < 0 || at(i) > len - sum)
            return InvalidArgument("split lengths must be non-negative and sum to the axis length " + std::to_string(len));
          lengths.push_back(at(i));
          sum += at(i);
        }
        if (sum != len)
          return InvalidArgument("split lengths sum to " + std::to_string(sum) + ", the axis has " + std::to_string(len));
      } else {
        return InvalidArgument("split must be a scalar or 1-D");
      }
    }
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x->dim(static_cast<int>(k));
    for (int64_t k = axis + 1; k < r; ++k) inner *= x->dim(static_cast<int>(k));
    const size_t es = DTypeSize(x->dtype());
    const size_t in_row = static_cast<size_t>(len * inner) * es;
    std::vector<Tensor> items;
    int64_t start = 0;
    for (int64_t piece : lengths) {
      Dims d = x->dims();
      d[static_cast<size_t>(axis)] = piece;
      if (squeeze) d.erase(d.begin() + axis);
      Tensor t(x->dtype(), d);
      const size_t row = static_cast<size_t>(piece * inner) * es;
      const auto* src = static_cast<const char*>(x->raw_data()) + static_cast<size_t>(start * inner) * es;
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(static_cast<char*>(t.raw_data()) + static_cast<size_t>(o) * row, src + static_cast<size_t>(o) * in_row,
                    row);
      items.push_back(std::move(t));
      start += piece;
    }
    *ctx.outputs[0] = Tensor::Sequence(x->dtype(), std::move(items));
    return Status::Ok();
  });
}

// An optional with a value is that value; an Optional with no input is one without.
KernelOr MakeOptional(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    const Tensor* x = ctx.inputs.empty() ? nullptr : ctx.inputs[0];
    *ctx.outputs[0] = x ? *x : Tensor::NoValue();
    return Status::Ok();
  });
}

KernelOr MakeOptionalHasElement(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    const Tensor* x = ctx.inputs.empty() ? nullptr : ctx.inputs[0];
    *ctx.outputs[0] = Tensor::Scalar<bool>(x && !x->is_no_value());
    return Status::Ok();
  });
}

KernelOr MakeOptionalGetElement(const KernelInit&) {
  return Make([](KernelContext& ctx) {
    const Tensor* x = ctx.inputs[0];
    if (!x || x->is_no_value()) return InvalidArgument("the optional has no value");
    *ctx.outputs[0] = *x;
    return Status::Ok();
  });
}

}  // namespace

void RegisterSequenceKernels(KernelRegistry& r) {
  const std::pair<const char*, KernelOr (*)(const KernelInit&)> ops[] = {
      {"SequenceEmpty", MakeSequenceEmpty},
      {"SequenceConstruct", MakeSequenceConstruct},
      {"SequenceInsert", MakeSequenceInsert},
      {"SequenceAt", MakeSequenceAt},
      {"SequenceErase", MakeSequenceErase},
      {"SequenceLength", MakeSequenceLength},
      {"ConcatFromSequence", MakeConcatFromSequence},
      {"SplitToSequence", MakeSplitToSequence},
      {"Optional", MakeOptional},
      {"OptionalHasElement", MakeOptionalHasElement},
      {"OptionalGetElement", MakeOptionalGetElement},
  };
  for (const auto& [op, make] : ops) r.Add(DeclareKernel(Backend::kReference, "", op, {}, make));
}

}  // namespace whittle
