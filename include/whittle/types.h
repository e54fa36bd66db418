// The value types of Whittle's public API: element types (DType; values equal ONNX
// TensorProto.DataType so conversion is a cast), devices, concrete dims (Dims) and symbolic shapes
// (Dim, SymShape), and the backend and matrix-product precision a Session runs with. Internal
// code sees them through lib/ir/dtype.h, lib/ir/tensor.h, lib/ir/graph.h and kernels/kernel.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "whittle/status.h"

namespace whittle {

enum class DType : int32_t {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
  // 4-bit integers (ONNX opset 21), packed two to a byte, the element with the lower index in the
  // low nibble; a tensor of n of them holds (n + 1) / 2 bytes. Only quantized weights use them
  // (DequantizeLinear, MatMulNBits): DTypeSize is 0 for them, so code that needs whole-byte
  // elements refuses them; DTypeBits and DTypeStorageBytes give their size.
  kUInt4 = 21,
  kInt4 = 22,
};

// Bytes per element; 0 for kUndefined/kString (strings are not stored in tensors) and for the
// packed 4-bit types.
size_t DTypeSize(DType t);
// Bits per element (4 for kInt4/kUInt4, 8 * DTypeSize otherwise).
int DTypeBits(DType t);
// Bytes that n elements occupy (packed types round up to whole bytes).
size_t DTypeStorageBytes(DType t, int64_t n);
bool IsPacked4Bit(DType t);
const char* DTypeName(DType t);
// True for the types Whittle tensors can hold (every numeric type above and bool).
bool IsSupportedDType(int32_t onnx_type);

template <class T> constexpr DType DTypeOf();
template <> constexpr DType DTypeOf<float>() { return DType::kFloat32; }
template <> constexpr DType DTypeOf<double>() { return DType::kFloat64; }
template <> constexpr DType DTypeOf<uint8_t>() { return DType::kUInt8; }
template <> constexpr DType DTypeOf<int8_t>() { return DType::kInt8; }
template <> constexpr DType DTypeOf<uint16_t>() { return DType::kUInt16; }
template <> constexpr DType DTypeOf<int16_t>() { return DType::kInt16; }
template <> constexpr DType DTypeOf<int32_t>() { return DType::kInt32; }
template <> constexpr DType DTypeOf<int64_t>() { return DType::kInt64; }
template <> constexpr DType DTypeOf<uint32_t>() { return DType::kUInt32; }
template <> constexpr DType DTypeOf<uint64_t>() { return DType::kUInt64; }
template <> constexpr DType DTypeOf<bool>() { return DType::kBool; }

enum class DeviceType { kCpu = 0, kCuda = 1 };

// What an ONNX value is (its TypeProto's kind): a tensor, a sequence of tensors, or an optional
// holding a tensor or a sequence. At run time each is a Tensor (Tensor::Sequence, Tensor::NoValue),
// as ONNX Runtime's OrtValue holds all three.
enum class ValueKind { kTensor = 0, kSequence = 1, kOptionalTensor = 2, kOptionalSequence = 3 };
// "tensor", "sequence", "optional(tensor)", "optional(sequence)".
const char* ValueKindName(ValueKind k);

using Dims = std::vector<int64_t>;

// Product of dims; WH_CHECKs that dims are valid (use CheckedNumElements on untrusted dims).
int64_t NumElements(const Dims& dims);
// Product of dims, rejecting negative dims and products past 2^62.
StatusOr<int64_t> CheckedNumElements(const Dims& dims);
std::string DimsToString(const Dims& dims);

// A dimension: a known size (value >= 0), a named symbol (param, e.g. "batch"), or unknown.
struct Dim {
  int64_t value = -1;
  std::string param;
  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: implicit for brevity in shape code
  static Dim Symbol(std::string p) { Dim d; d.param = std::move(p); return d; }
  bool known() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && param == o.param; }
  bool operator!=(const Dim& o) const { return !(*this == o); }
};
using SymShape = std::vector<Dim>;
std::string SymShapeToString(const SymShape& s);
SymShape ToSymShape(const Dims& d);
// Concrete dims if every dim is known.
std::optional<Dims> ToDims(const SymShape& s);

// Backends: kReference (plain loops, the truth), kCpu (fast), kCuda (when built).
enum class Backend { kReference = 0, kCpu = 1, kCuda = 2 };
const char* BackendName(Backend b);

// The arithmetic of float32 matrix products (Gemm, MatMul, Conv) on the CUDA backend: kFp32 exact
// float32; kTf32 / kFp16 / kBf16 let cuBLAS round the float32 operands to that type and multiply
// on tensor cores, accumulating and writing float32 (tensors stay float32 everywhere). Only kFp32
// exists on the CPU backends.
enum class Precision { kFp32 = 0, kTf32 = 1, kFp16 = 2, kBf16 = 3 };
const char* PrecisionName(Precision p);  // "fp32", "tf32", "fp16", "bf16"
// The inverse of PrecisionName; an error naming the value and the choices otherwise.
StatusOr<Precision> ParsePrecision(const std::string& s);

}  // namespace whittle
