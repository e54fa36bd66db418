#include "lib/ir/dtype.h"

namespace whittle {

size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kUInt8: case DType::kInt8: case DType::kBool: return 1;
    case DType::kUInt16: case DType::kInt16: case DType::kFloat16: case DType::kBFloat16: return 2;
    case DType::kInt64: case DType::kFloat64: case DType::kUInt64: return 8;
    default: return 0;
  }
}

int DTypeBits(DType t) {
  if (IsPacked4Bit(t)) return 4;
  return static_cast<int>(8 * DTypeSize(t));
}

bool IsPacked4Bit(DType t) { return t == DType::kInt4 || t == DType::kUInt4; }

size_t DTypeStorageBytes(DType t, int64_t n) {
  if (IsPacked4Bit(t)) return static_cast<size_t>((n + 1) / 2);
  return static_cast<size_t>(n) * DTypeSize(t);
}

const char* ValueKindName(ValueKind k) {
  switch (k) {
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kOptionalTensor: return "optional(tensor)";
    case ValueKind::kOptionalSequence: return "optional(sequence)";
  }
  return "?";
}

const char* DTypeName(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kString: return "string";
    case DType::kBool: return "bool";
    case DType::kFloat16: return "float16";
    case DType::kFloat64: return "float64";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBFloat16: return "bfloat16";
    case DType::kUInt4: return "uint4";
    case DType::kInt4: return "int4";
    default: return "undefined";
  }
}

bool IsSupportedDType(int32_t t) {
  if (t == 21 || t == 22) return true;  // uint4, int4
  return t >= 1 && t <= 16 && t != 8 && t != 14 && t != 15 && DTypeSize(static_cast<DType>(t)) > 0;
}

}  // namespace whittle
