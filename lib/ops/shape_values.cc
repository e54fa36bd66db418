#include "lib/ops/shape_values.h"

#include <limits>
#include <algorithm>
#include <string>

namespace whittle {
namespace {

bool IsIntType(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

// Concrete integers of input i: its initializer, or a fully known shape value.
bool ConcreteInts(const Value* v, const ShapeValue* sv, std::vector<int64_t>* out) {
  out->clear();
  if (v && v->initializer && IsIntType(v->initializer->dtype())) {
    auto s = ShapeValueOfTensor(*v->initializer);
    if (!s) return false;
    for (const SymInt& d : *s) out->push_back(*d.value);
    return true;
  }
  if (!sv) return false;
  for (const SymInt& d : *sv) {
    if (!d.known()) return false;
    out->push_back(*d.value);
  }
  return true;
}

// A shape value of input i: its propagated value or its constant elements.
std::optional<ShapeValue> ValueOf(const Value* v, const ShapeValue* sv) {
  if (sv) return *sv;
  if (v && v->initializer) return ShapeValueOfTensor(*v->initializer);
  return std::nullopt;
}

std::optional<int64_t> Combine(const std::string& op, int64_t a, int64_t b) {
  int64_t r;
  if (op == "Add") return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
  if (op == "Sub") return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
  if (op == "Mul") return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
  if (op == "Div")  // INT64_MIN / -1 overflows
    return b == 0 || (b == -1 && a == std::numeric_limits<int64_t>::min()) ? std::nullopt : std::optional<int64_t>(a / b);
  if (op == "Max") return std::max(a, b);
  if (op == "Min") return std::min(a, b);
  return std::nullopt;
}

SymInt CombineElems(const std::string& op, const SymInt& a, const SymInt& b) {
  if (a.known() && b.known()) {
    auto r = Combine(op, *a.value, *b.value);
    return r ? SymInt::Of(*r) : SymInt();
  }
  auto is = [](const SymInt& x, int64_t v) { return x.known() && *x.value == v; };
  // A symbol survives the identity element of the operation.
  if ((op == "Mul" && is(b, 1)) || ((op == "Add" || op == "Sub") && is(b, 0)) || (op == "Div" && is(b, 1))) return a;
  if ((op == "Mul" && is(a, 1)) || (op == "Add" && is(a, 0))) return b;
  if ((op == "Max" || op == "Min") && a == b) return a;
  return SymInt();
}

}  // namespace

std::optional<ShapeValue> ShapeValueOfTensor(const Tensor& t) {
  if (!t.defined() || t.rank() > 1 || t.numel() > kMaxShapeValueElements || !IsIntType(t.dtype())) return std::nullopt;
  ShapeValue s;
  for (int64_t i = 0; i < t.numel(); ++i)
    s.push_back(SymInt::Of(t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i]));
  return s;
}

std::vector<std::optional<ShapeValue>> PropagateShapeValues(const Node& node, int opset,
                                                            const std::vector<const Value*>& inputs,
                                                            const std::vector<const ShapeValue*>& in_vals,
                                                            const std::vector<std::optional<SymShape>>& out_shapes) {
  std::vector<std::optional<ShapeValue>> out(node.outputs.size());
  if (!node.domain.empty() || node.outputs.empty() || out_shapes.empty() || !out_shapes[0]) return out;
  const std::string& op = node.op_type;
  auto in = [&](size_t i) -> const Value* { return i < inputs.size() ? inputs[i] : nullptr; };
  auto sv = [&](size_t i) -> const ShapeValue* { return i < in_vals.size() ? in_vals[i] : nullptr; };
  const size_t out_rank = out_shapes[0]->size();
  if (out_rank > 1) return out;
  std::optional<ShapeValue> r;

  if (op == "Shape") {
    const Value* x = in(0);
    if (!x || !x->shape) return out;
    const int64_t rank = static_cast<int64_t>(x->shape->size());
    int64_t start = opset >= 15 ? node.attrs.GetInt("start", 0) : 0;
    int64_t end = opset >= 15 ? node.attrs.GetInt("end", rank) : rank;
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    ShapeValue v;
    for (int64_t i = start; i < end; ++i) v.push_back(SymInt::FromDim((*x->shape)[static_cast<size_t>(i)]));
    r = v;
  } else if (op == "Size") {
    const Value* x = in(0);
    if (!x || !x->shape) return out;
    int64_t n = 1;
    for (const Dim& d : *x->shape) {
      if (!d.known() || __builtin_mul_overflow(n, d.value, &n)) return out;
    }
    r = ShapeValue{SymInt::Of(n)};
  } else if (op == "Identity" || op == "Cast") {
    if (op == "Cast" && node.attrs.GetInt("to", 0) != static_cast<int64_t>(DType::kInt64) &&
        node.attrs.GetInt("to", 0) != static_cast<int64_t>(DType::kInt32))
      return out;
    r = ValueOf(in(0), sv(0));
  } else if (op == "Gather") {
    auto data = ValueOf(in(0), sv(0));
    std::vector<int64_t> idx;
    if (!data || node.attrs.GetInt("axis", 0) != 0 || !in(0) || !in(0)->shape || in(0)->shape->size() != 1 ||
        !ConcreteInts(in(1), sv(1), &idx))
      return out;
    ShapeValue g;
    const int64_t n = static_cast<int64_t>(data->size());
    for (int64_t i : idx) {
      if (i < 0) i += n;
      if (i < 0 || i >= n) return out;
      g.push_back((*data)[static_cast<size_t>(i)]);
    }
    r = g;
  } else if (op == "Unsqueeze" || op == "Squeeze") {
    r = ValueOf(in(0), sv(0));
    if (r && r->size() != 1) r.reset();
  } else if (op == "Concat") {
    const int64_t axis = node.attrs.GetInt("axis", 0);
    if (axis != 0 && axis != -1) return out;
    ShapeValue c;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      auto v = ValueOf(in(i), sv(i));
      if (!v) return out;
      c.insert(c.end(), v->begin(), v->end());
    }
    r = c;
  } else if (op == "Slice") {
    auto data = ValueOf(in(0), sv(0));
    if (!data) return out;
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset < 10) {
      starts = node.attrs.GetInts("starts");
      ends = node.attrs.GetInts("ends");
      axes = node.attrs.GetInts("axes");
    } else if (!ConcreteInts(in(1), sv(1), &starts) || !ConcreteInts(in(2), sv(2), &ends) ||
               (node.inputs.size() > 3 && node.inputs[3] >= 0 && !ConcreteInts(in(3), sv(3), &axes)) ||
               (node.inputs.size() > 4 && node.inputs[4] >= 0 && !ConcreteInts(in(4), sv(4), &steps))) {
      return out;
    }
    if (starts.size() != 1 || ends.size() != 1 || (!axes.empty() && axes != std::vector<int64_t>{0} &&
                                                   axes != std::vector<int64_t>{-1}))
      return out;
    const int64_t n = static_cast<int64_t>(data->size());
    const int64_t step = steps.empty() ? 1 : steps[0];
    if (step == 0) return out;
    int64_t s = starts[0], e = ends[0];
    if (s < 0) s += n;
    if (e < 0) e += n;
    ShapeValue sl;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      e = std::clamp<int64_t>(e, 0, n);
      for (int64_t i = s; i < e; i = e - i > step ? i + step : e) sl.push_back((*data)[static_cast<size_t>(i)]);
    } else {
      s = std::clamp<int64_t>(s, -1, n - 1);
      e = std::clamp<int64_t>(e, -1, n - 1);
      for (int64_t i = s; i > e; i = i - e > -(step + 1) ? i + step : e) sl.push_back((*data)[static_cast<size_t>(i)]);
    }
    r = sl;
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min") {
    if (node.inputs.size() != 2) return out;
    auto a = ValueOf(in(0), sv(0));
    auto b = ValueOf(in(1), sv(1));
    if (!a || !b) return out;
    const size_t n = std::max(a->size(), b->size());
    if ((a->size() != n && a->size() != 1) || (b->size() != n && b->size() != 1)) return out;
    ShapeValue c;
    for (size_t i = 0; i < n; ++i)
      c.push_back(CombineElems(op, (*a)[a->size() == 1 ? 0 : i], (*b)[b->size() == 1 ? 0 : i]));
    r = c;
  } else if (op == "Neg") {
    auto a = ValueOf(in(0), sv(0));
    if (!a) return out;
    ShapeValue c;
    for (const SymInt& d : *a)  // -INT64_MIN overflows: unknown
      c.push_back(d.known() && *d.value != std::numeric_limits<int64_t>::min() ? SymInt::Of(-*d.value) : SymInt());
    r = c;
  }
  if (!r || static_cast<int64_t>(r->size()) > kMaxShapeValueElements) return out;
  // The value must agree with the output's inferred shape: a scalar holds one element, a vector
  // as many as its length.
  const SymShape& os = *out_shapes[0];
  if (out_rank == 0 ? r->size() != 1 : (os[0].known() && os[0].value != static_cast<int64_t>(r->size())))
    return out;
  out[0] = std::move(r);
  return out;
}

}  // namespace whittle
