// Element-type helpers shared by every backend's kernels: dtype dispatch to a template over the
// element type, float16/bfloat16 storage types and their conversions, ONNX-style value casts
// (saturating float->int, NaN->0), wrapping integer arithmetic, and a wrapper that runs a float32
// kernel on float16/bfloat16 tensors. Everything here is input-independent arithmetic; errors
// that depend on data are returned as Status by the callers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/kernel.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle::ew {

// Storage types for the 16-bit floats; arithmetic happens in float.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

float HalfToFloat(uint16_t h);
// Round-to-nearest-even from double (exact for float inputs too, no double rounding).
uint16_t DoubleToHalf(double v);
float BFloat16ToFloat(uint16_t b);
// Truncation, which is what the ONNX 1.12 backend test data for Cast uses.
uint16_t FloatToBFloat16(float f);
// Round to nearest even: what arithmetic results take (numpy's ml_dtypes, which the onnx
// package's reference and test data use).
uint16_t FloatToBFloat16Rne(float f);

template <class T> constexpr bool kIsFloat = std::is_floating_point_v<T>;
template <class T> constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T> constexpr bool kIsInt = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <class T> struct TypeTag { using type = T; };

// Calls fn(TypeTag<T>{}) for the element type of dt; the set is a template argument so that fn
// is only instantiated for types it supports. Sets: kFloat (float, double); kInteger (every
// integer type); kNumeric (both); kNumericBool (plus bool); kAll (plus Half and BFloat16, storage
// only: used by Cast and byte-moving kernels).
enum class TypeSet { kFloat, kInteger, kNumeric, kNumericBool, kAll };

inline bool InTypeSet(DType dt, TypeSet set) {
  switch (dt) {
    case DType::kFloat32: case DType::kFloat64: return set != TypeSet::kInteger;
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64:
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
      return set != TypeSet::kFloat;
    case DType::kBool: return set == TypeSet::kNumericBool || set == TypeSet::kAll;
    case DType::kFloat16: case DType::kBFloat16: return set == TypeSet::kAll;
    default: return false;
  }
}

template <TypeSet kSet, class Fn>
Status Dispatch(DType dt, const char* what, Fn&& fn) {
  if constexpr (kSet != TypeSet::kInteger) {
    if (dt == DType::kFloat32) return fn(TypeTag<float>{});
    if (dt == DType::kFloat64) return fn(TypeTag<double>{});
  }
  if constexpr (kSet != TypeSet::kFloat) {
    switch (dt) {
      case DType::kInt8: return fn(TypeTag<int8_t>{});
      case DType::kInt16: return fn(TypeTag<int16_t>{});
      case DType::kInt32: return fn(TypeTag<int32_t>{});
      case DType::kInt64: return fn(TypeTag<int64_t>{});
      case DType::kUInt8: return fn(TypeTag<uint8_t>{});
      case DType::kUInt16: return fn(TypeTag<uint16_t>{});
      case DType::kUInt32: return fn(TypeTag<uint32_t>{});
      case DType::kUInt64: return fn(TypeTag<uint64_t>{});
      default: break;
    }
  }
  if constexpr (kSet == TypeSet::kNumericBool || kSet == TypeSet::kAll) {
    if (dt == DType::kBool) return fn(TypeTag<bool>{});
  }
  if constexpr (kSet == TypeSet::kAll) {
    if (dt == DType::kFloat16) return fn(TypeTag<Half>{});
    if (dt == DType::kBFloat16) return fn(TypeTag<BFloat16>{});
  }
  return Unimplemented(std::string(what) + ": unsupported element type " + DTypeName(dt));
}

template <class T> T* DataAs(Tensor& t) { return static_cast<T*>(t.raw_data()); }
template <class T> const T* DataAs(const Tensor& t) { return static_cast<const T*>(t.raw_data()); }

// Float value -> integer with ONNX-compatible truncation; saturates out-of-range values and
// maps NaN to 0 instead of invoking undefined behaviour.
template <class D>
D FloatToInt(double v) {
  if (std::isnan(v)) return D(0);
  if (v <= static_cast<double>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  return static_cast<D>(v);
}

// Converts one value between any two supported element types (ONNX Cast semantics).
template <class D, class S>
D CastValue(S s) {
  if constexpr (std::is_same_v<S, Half>) {
    return CastValue<D>(HalfToFloat(s.bits));
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return CastValue<D>(BFloat16ToFloat(s.bits));
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{DoubleToHalf(static_cast<double>(s))};
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    return BFloat16{FloatToBFloat16(static_cast<float>(s))};
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else if constexpr (kIsInt<D> && kIsFloat<S>) {
    return FloatToInt<D>(static_cast<double>(s));
  } else {
    return static_cast<D>(s);
  }
}

// Wrapping integer arithmetic (numpy semantics, no signed-overflow UB).
template <class T> T WrapAdd(T a, T b) {
  if constexpr (kIsInt<T>) return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) + static_cast<std::make_unsigned_t<T>>(b));
  else return a + b;
}
template <class T> T WrapSub(T a, T b) {
  if constexpr (kIsInt<T>) return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) - static_cast<std::make_unsigned_t<T>>(b));
  else return a - b;
}
template <class T> T WrapMul(T a, T b) {
  if constexpr (kIsInt<T>) {
    using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
    return static_cast<T>(static_cast<U>(static_cast<std::make_unsigned_t<T>>(a)) *
                          static_cast<U>(static_cast<std::make_unsigned_t<T>>(b)));
  } else {
    return a * b;
  }
}

// Int64 values of an integer tensor (axes inputs and the like).
std::vector<int64_t> IntValues(const Tensor& t);

// True when some input or output of ctx is float16/bfloat16.
bool HasHalfTensors(const KernelContext& ctx);
// Runs fn on float32 copies of the float16/bfloat16 inputs and outputs of ctx, then converts
// the outputs back (rounded to nearest even). Calls fn(ctx) directly when there are none.
Status RunWithHalfAsFloat(KernelContext& ctx, const std::function<Status(KernelContext&)>& fn);

// Factory-time dtype check: error naming the node when dt is known and not in set.
Status CheckDType(const KernelInit& init, int input, TypeSet set, const char* op);

}  // namespace whittle::ew

namespace whittle {

// Calls fn(E{}) with E an unsigned integer type of the given element size; error otherwise.
template <class Fn>
Status DispatchByElementSize(size_t size, Fn&& fn) {
  switch (size) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: return Internal("unsupported element size " + std::to_string(size));
  }
}

// Calls fn(T{}) with T the C++ type of an arithmetic dtype (no float16); error otherwise.
template <class Fn>
Status DispatchArithmetic(DType dt, Fn&& fn) {
  switch (dt) {
    case DType::kFloat32:
      return fn(float{});
    case DType::kFloat64:
      return fn(double{});
    case DType::kInt8:
      return fn(int8_t{});
    case DType::kUInt8:
      return fn(uint8_t{});
    case DType::kInt16:
      return fn(int16_t{});
    case DType::kUInt16:
      return fn(uint16_t{});
    case DType::kInt32:
      return fn(int32_t{});
    case DType::kUInt32:
      return fn(uint32_t{});
    case DType::kInt64:
      return fn(int64_t{});
    case DType::kUInt64:
      return fn(uint64_t{});
    default:
      return Unimplemented(std::string("unsupported element type ") + DTypeName(dt));
  }
}

}  // namespace whittle
