// com.microsoft MatMulNBits (ONNX Runtime's contrib op, written by its matmul_nbits_quantizer and
// onnxruntime-genai's builder, and by compress-model --int4 format=matmulnbits):
//   Y[..., n] = sum_k A[..., k] * W[n, k] (+ bias[n]),  W[n, k] = (code(n, k) - zp(n, k / B)) * scale(n, k / B)
// with B = block_size, codes of `bits` bits packed low-first along K in B [N, ceil(K/B), B*bits/8]
// (uint8), scales [N * ceil(K/B)] (or [N, ceil(K/B)]), zero points packed uint8 [N, ceil(ceil(K/B) *
// bits / 8)] or float (default 2^(bits-1)). g_idx (act-order GPTQ) is refused.
#include <string>

#include "lib/ir/domain.h"
#include "lib/ops/op_def.h"

namespace whittle {
namespace {

Status CheckNBits(const Node& n, int) {
  const int64_t K = n.attrs.GetInt("K", -1), N = n.attrs.GetInt("N", -1);
  const int64_t bits = n.attrs.GetInt("bits", 4), block = n.attrs.GetInt("block_size", -1);
  if (K <= 0 || N <= 0)
    return InvalidArgument(n.DebugName() + ": attributes K and N must be positive, got K " + std::to_string(K) +
                           ", N " + std::to_string(N));
  if (bits != 4 && bits != 8)
    return InvalidArgument(n.DebugName() + ": bits " + std::to_string(bits) + " is not supported (4 or 8)");
  if (block < 16 || block > 4096 || (block & (block - 1)) != 0)
    return InvalidArgument(n.DebugName() + ": block_size " + std::to_string(block) +
                           " must be a power of two from 16 to 4096");
  // Bounds that keep every size derived from K and N (blocks, row bytes, element counts) far from
  // int64 overflow; no model has a matrix side past 2^31.
  constexpr int64_t kMaxSide = int64_t{1} << 31;
  if (K > kMaxSide || N > kMaxSide)
    return InvalidArgument(n.DebugName() + ": K " + std::to_string(K) + " or N " + std::to_string(N) +
                           " is past 2^31");
  return Status::Ok();
}

std::string Str(const SymShape& s) { return SymShapeToString(s); }

// Checks an input's element count against `want` where the shape is known.
Status CheckCount(const InferContext& ctx, int i, const char* what, int64_t want) {
  const SymShape* s = ctx.InputShape(i);
  if (!s) return Status::Ok();
  int64_t n = 1;
  for (const Dim& d : *s) {
    if (!d.known()) return Status::Ok();
    n *= d.value;
  }
  if (n != want)
    return ctx.Error(std::string(what) + " has shape " + Str(*s) + ", expected " + std::to_string(want) + " elements");
  return Status::Ok();
}

Status InferNBits(InferContext& ctx) {
  const AttributeMap& a = ctx.attrs();
  const int64_t K = a.GetInt("K", 0), N = a.GetInt("N", 0), bits = a.GetInt("bits", 4);
  const int64_t block = a.GetInt("block_size", 16);
  const int64_t blocks = (K + block - 1) / block, blob = block * bits / 8;
  if (ctx.InputDType(0) != DType::kFloat32)
    return ctx.Error(std::string("A must be float32, got ") + DTypeName(ctx.InputDType(0)));
  if (ctx.InputDType(1) != DType::kUInt8)
    return ctx.Error(std::string("B must be uint8, got ") + DTypeName(ctx.InputDType(1)));
  if (ctx.InputDType(2) != DType::kFloat32)
    return ctx.Error(std::string("scales must be float32, got ") + DTypeName(ctx.InputDType(2)));
  if (const SymShape* b = ctx.InputShape(1)) {
    const SymShape want{Dim(N), Dim(blocks), Dim(blob)};
    if (*b != want) return ctx.Error("B has shape " + Str(*b) + ", expected " + Str(want));
  }
  WH_RETURN_IF_ERROR(CheckCount(ctx, 2, "scales", N * blocks));
  if (ctx.HasInput(3)) {
    const DType z = ctx.InputDType(3);
    if (z == DType::kUInt8) {
      WH_RETURN_IF_ERROR(CheckCount(ctx, 3, "zero_points", N * ((blocks * bits + 7) / 8)));
    } else if (z == DType::kFloat32) {
      WH_RETURN_IF_ERROR(CheckCount(ctx, 3, "zero_points", N * blocks));
    } else {
      return ctx.Error(std::string("zero_points must be uint8 or float32, got ") + DTypeName(z));
    }
  }
  if (ctx.HasInput(4))
    return ctx.Error("g_idx (act-order GPTQ's column permutation) is not supported; quantize without act-order");
  if (ctx.HasInput(5)) {
    if (ctx.InputDType(5) != DType::kFloat32)
      return ctx.Error(std::string("bias must be float32, got ") + DTypeName(ctx.InputDType(5)));
    WH_RETURN_IF_ERROR(CheckCount(ctx, 5, "bias", N));
  }
  const SymShape* x = ctx.InputShape(0);
  if (!x) {
    ctx.SetOutput(0, DType::kFloat32, std::nullopt);
    return Status::Ok();
  }
  if (x->empty()) return ctx.Error("A must have rank 1 or more");
  const Dim& k = x->back();
  if (k.known() && k.value != K)
    return ctx.Error("A has shape " + Str(*x) + " but K is " + std::to_string(K));
  SymShape y = *x;
  y.back() = Dim(N);
  ctx.SetOutput(0, DType::kFloat32, y);
  return Status::Ok();
}

}  // namespace

void RegisterNBitsOps(OpRegistry& r) {
  r.Register(OpDef{kMicrosoftDomain,
                   "MatMulNBits",
                   1,
                   3,
                   6,
                   1,
                   1,
                   {{"K", AttrType::kInt, true},
                    {"N", AttrType::kInt, true},
                    {"bits", AttrType::kInt},
                    {"block_size", AttrType::kInt, true},
                    {"accuracy_level", AttrType::kInt}},
                   CheckNBits,
                   InferNBits});
}

}  // namespace whittle
