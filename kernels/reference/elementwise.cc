#include "kernels/reference/elementwise.h"

#include <string>

#include "kernels/common/broadcast.h"
#include "kernels/common/dtype_dispatch.h"
#include "kernels/common/elementwise_scalar.h"

namespace whittle::reference {

using ew::DataAs;
using ew::Dispatch;
using ew::TypeSet;

bool IsCompare(BinaryOp op) { return op >= BinaryOp::kEqual && op <= BinaryOp::kLessEqual; }
bool IsLogical(BinaryOp op) { return op >= BinaryOp::kAnd; }

const char* BinaryOpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "Add";
    case BinaryOp::kSub: return "Sub";
    case BinaryOp::kMul: return "Mul";
    case BinaryOp::kDiv: return "Div";
    case BinaryOp::kPow: return "Pow";
    case BinaryOp::kMod: case BinaryOp::kFmod: return "Mod";
    case BinaryOp::kMax: return "Max";
    case BinaryOp::kMin: return "Min";
    case BinaryOp::kPRelu: return "PRelu";
    case BinaryOp::kBitShiftLeft: case BinaryOp::kBitShiftRight: return "BitShift";
    case BinaryOp::kEqual: return "Equal";
    case BinaryOp::kGreater: return "Greater";
    case BinaryOp::kLess: return "Less";
    case BinaryOp::kGreaterEqual: return "GreaterOrEqual";
    case BinaryOp::kLessEqual: return "LessOrEqual";
    case BinaryOp::kAnd: return "And";
    case BinaryOp::kOr: return "Or";
    case BinaryOp::kXor: return "Xor";
  }
  return "?";
}

Status CheckOutput(const Tensor& out, const Dims& dims, DType dtype) {
  if (out.dims() != dims || out.dtype() != dtype)
    return Internal("output is " + std::string(DTypeName(out.dtype())) + DimsToString(out.dims()) + ", kernel expects " +
                    DTypeName(dtype) + DimsToString(dims));
  return Status::Ok();
}

Status CheckNoZeroDivisor(const Tensor& b) {
  return Dispatch<TypeSet::kInteger>(b.dtype(), "divisor", [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* p = DataAs<T>(b);
    for (int64_t i = 0; i < b.numel(); ++i)
      if (p[i] == T(0)) return InvalidArgument("integer division by zero");
    return Status::Ok();
  });
}

namespace {

// Walks the output in row-major order and keeps, for each input, the offset of the element that
// broadcasts to the current output element.
class BroadcastWalker {
 public:
  static StatusOr<BroadcastWalker> Make(const Dims& out, const std::vector<const Tensor*>& inputs) {
    BroadcastWalker w;
    w.dims_ = out;
    for (const Tensor* t : inputs) {
      WH_ASSIGN_OR_RETURN(std::vector<int64_t> s, ew::BroadcastStrides(*t, out));
      w.strides_.push_back(std::move(s));
    }
    w.index_.assign(out.size(), 0);
    w.offsets_.assign(inputs.size(), 0);
    return w;
  }
  int64_t offset(size_t input) const { return offsets_[input]; }
  void Next() {
    for (size_t d = dims_.size(); d-- > 0;) {
      ++index_[d];
      for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] += strides_[k][d];
      if (index_[d] < dims_[d]) return;
      for (size_t k = 0; k < offsets_.size(); ++k) offsets_[k] -= strides_[k][d] * dims_[d];
      index_[d] = 0;
    }
  }

 private:
  Dims dims_;
  std::vector<std::vector<int64_t>> strides_;
  std::vector<int64_t> index_, offsets_;
};

template <class TA, class TB, class TO, class F>
Status Loop2(const Tensor& a, const Tensor& b, Tensor& out, F f) {
  WH_ASSIGN_OR_RETURN(BroadcastWalker w, BroadcastWalker::Make(out.dims(), {&a, &b}));
  const TA* pa = DataAs<TA>(a);
  const TB* pb = DataAs<TB>(b);
  TO* po = DataAs<TO>(out);
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i, w.Next()) po[i] = f(pa[w.offset(0)], pb[w.offset(1)]);
  return Status::Ok();
}

Status SameDType(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    return InvalidArgument(std::string("inputs have different element types ") + DTypeName(a.dtype()) + " and " +
                           DTypeName(b.dtype()));
  return Status::Ok();
}

}  // namespace

Status Binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out) {
  if (IsLogical(op)) {
    if (a.dtype() != DType::kBool || b.dtype() != DType::kBool || out.dtype() != DType::kBool)
      return InvalidArgument(std::string(BinaryOpName(op)) + " expects bool tensors");
    return Loop2<bool, bool, bool>(a, b, out, [op](bool x, bool y) {
      return op == BinaryOp::kAnd ? (x && y) : op == BinaryOp::kOr ? (x || y) : (x != y);
    });
  }
  if (IsCompare(op)) {
    WH_RETURN_IF_ERROR(SameDType(a, b));
    if (out.dtype() != DType::kBool) return Internal("comparison output must be bool");
    return Dispatch<TypeSet::kNumericBool>(a.dtype(), BinaryOpName(op), [&](auto tag) {
      using T = typename decltype(tag)::type;
      return Loop2<T, T, bool>(a, b, out, [op](T x, T y) { return ew::ApplyCompare(op, x, y); });
    });
  }
  if (out.dtype() != a.dtype()) return Internal("output dtype differs from input 0");
  if (op == BinaryOp::kPow) {
    // The exponent may have another type; the result has the base's type.
    return Dispatch<TypeSet::kNumeric>(a.dtype(), "Pow base", [&](auto ta) {
      using TA = typename decltype(ta)::type;
      return Dispatch<TypeSet::kNumeric>(b.dtype(), "Pow exponent", [&](auto tb) {
        using TB = typename decltype(tb)::type;
        return Loop2<TA, TB, TA>(a, b, out, [](TA x, TB y) {
          return ew::CastValue<TA>(std::pow(static_cast<double>(x), static_cast<double>(y)));
        });
      });
    });
  }
  WH_RETURN_IF_ERROR(SameDType(a, b));
  if ((op == BinaryOp::kDiv || op == BinaryOp::kMod || op == BinaryOp::kFmod) && ew::InTypeSet(b.dtype(), TypeSet::kInteger))
    WH_RETURN_IF_ERROR(CheckNoZeroDivisor(b));
  return Dispatch<TypeSet::kNumeric>(a.dtype(), BinaryOpName(op), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return Loop2<T, T, T>(a, b, out, [op](T x, T y) { return ew::ApplyArith(op, x, y); });
  });
}

Status Variadic(BinaryOp op, bool mean, const std::vector<const Tensor*>& inputs, Tensor& out) {
  if (inputs.empty()) return InvalidArgument("variadic op needs at least one input");
  for (const Tensor* t : inputs) WH_RETURN_IF_ERROR(SameDType(*t, out));
  return Dispatch<TypeSet::kNumeric>(out.dtype(), BinaryOpName(op), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    T* po = DataAs<T>(out);
    const int64_t n = out.numel();
    for (size_t k = 0; k < inputs.size(); ++k) {
      WH_ASSIGN_OR_RETURN(BroadcastWalker w, BroadcastWalker::Make(out.dims(), {inputs[k]}));
      const T* pi = DataAs<T>(*inputs[k]);
      for (int64_t i = 0; i < n; ++i, w.Next())
        po[i] = k == 0 ? pi[w.offset(0)] : ew::ApplyArith(op, po[i], pi[w.offset(0)]);
    }
    if (mean) {
      for (int64_t i = 0; i < n; ++i) po[i] = static_cast<T>(po[i] / static_cast<T>(inputs.size()));
    }
    return Status::Ok();
  });
}

namespace {
template <class T>
Status WhereT(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out) {
  WH_ASSIGN_OR_RETURN(BroadcastWalker w, BroadcastWalker::Make(out.dims(), {&cond, &x, &y}));
  const bool* pc = DataAs<bool>(cond);
  const T* px = DataAs<T>(x);
  const T* py = DataAs<T>(y);
  T* po = DataAs<T>(out);
  for (int64_t i = 0; i < out.numel(); ++i, w.Next()) po[i] = pc[w.offset(0)] ? px[w.offset(1)] : py[w.offset(2)];
  return Status::Ok();
}
}  // namespace

Status Where(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out) {
  if (cond.dtype() != DType::kBool) return InvalidArgument("Where condition must be bool");
  WH_RETURN_IF_ERROR(SameDType(x, y));
  if (out.dtype() != x.dtype()) return Internal("Where output dtype differs from X");
  // Only bytes move, so the element size is all that matters.
  switch (DTypeSize(x.dtype())) {
    case 1: return WhereT<uint8_t>(cond, x, y, out);
    case 2: return WhereT<uint16_t>(cond, x, y, out);
    case 4: return WhereT<uint32_t>(cond, x, y, out);
    case 8: return WhereT<uint64_t>(cond, x, y, out);
    default: return Unimplemented(std::string("Where: unsupported element type ") + DTypeName(x.dtype()));
  }
}

namespace {
// The table's signature carries a thread budget that plain loops do not use.
Status BinaryRow(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& out, int) { return Binary(op, a, b, out); }
Status VariadicRow(BinaryOp op, bool mean, const std::vector<const Tensor*>& inputs, Tensor& out, int) {
  return Variadic(op, mean, inputs, out);
}
Status UnaryRow(UnaryOp op, const UnaryParams& p, const Tensor& x, Tensor& out, int) { return Unary(op, p, x, out); }
Status ClipRow(const Tensor& x, const Tensor* lo, const Tensor* hi, std::optional<float> lo_attr,
               std::optional<float> hi_attr, Tensor& out, int) {
  return Clip(x, lo, hi, lo_attr, hi_attr, out);
}
Status CastRow(const Tensor& x, Tensor& out, int) { return Cast(x, out); }
Status WhereRow(const Tensor& cond, const Tensor& x, const Tensor& y, Tensor& out, int) {
  return Where(cond, x, y, out);
}
}  // namespace

const ElementwiseFns kElementwiseFns{BinaryRow, UnaryRow, VariadicRow, ClipRow, CastRow, WhereRow};

}  // namespace whittle::reference
