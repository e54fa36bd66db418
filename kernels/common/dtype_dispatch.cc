#include "kernels/common/dtype_dispatch.h"

#include <cmath>
#include <cstring>

namespace whittle::ew {

float HalfToFloat(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int man = h & 0x3ff;
  float v;
  if (exp == 0) v = std::ldexp(static_cast<float>(man), -24);
  else if (exp == 31) v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(static_cast<float>(man + 1024), exp - 25);
  return (h & 0x8000) ? -v : v;
}

uint16_t DoubleToHalf(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return static_cast<uint16_t>(sign | 0x7e00);
  const double a = std::fabs(v);
  // 65520 is half-way between the largest half (65504) and 2^16: ties-to-even rounds up to inf.
  if (a >= 65520.0) return static_cast<uint16_t>(sign | 0x7c00);
  if (a < std::ldexp(1.0, -14)) {
    // Subnormal: units of 2^-24; a result of 1024 is the smallest normal, whose bits are the same.
    const double m = std::nearbyint(a * std::ldexp(1.0, 24));
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(m));
  }
  int e2 = 0;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;      // a in [2^e, 2^(e+1))
  double mant = std::nearbyint((std::ldexp(a, -e) - 1.0) * 1024.0);
  if (mant >= 1024.0) {
    mant = 0;
    ++e;
  }
  if (e + 15 >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  return static_cast<uint16_t>(sign | ((e + 15) << 10) | static_cast<uint16_t>(mant));
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x0040);  // keep it a quiet NaN
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t FloatToBFloat16Rne(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

std::vector<int64_t> IntValues(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype() == DType::kInt32 ? DataAs<int32_t>(t)[i] : DataAs<int64_t>(t)[i];
  return v;
}

namespace {
bool IsHalf(DType d) { return d == DType::kFloat16 || d == DType::kBFloat16; }

Tensor HalfToFloat32(const Tensor& t) {
  Tensor f(DType::kFloat32, t.dims());
  const uint16_t* src = DataAs<uint16_t>(t);
  float* dst = f.data<float>();
  const bool bf = t.dtype() == DType::kBFloat16;
  for (int64_t i = 0; i < t.numel(); ++i) dst[i] = bf ? BFloat16ToFloat(src[i]) : HalfToFloat(src[i]);
  return f;
}
}  // namespace

bool HasHalfTensors(const KernelContext& ctx) {
  for (const Tensor* t : ctx.inputs)
    if (t && IsHalf(t->dtype())) return true;
  for (const Tensor* t : ctx.outputs)
    if (t && IsHalf(t->dtype())) return true;
  return false;
}

Status RunWithHalfAsFloat(KernelContext& ctx, const std::function<Status(KernelContext&)>& fn) {
  if (!HasHalfTensors(ctx)) return fn(ctx);
  std::vector<Tensor> ins(ctx.inputs.size()), outs(ctx.outputs.size());
  KernelContext c;
  c.num_threads = ctx.num_threads;
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    const Tensor* t = ctx.inputs[i];
    if (t && IsHalf(t->dtype())) {
      ins[i] = HalfToFloat32(*t);
      c.inputs.push_back(&ins[i]);
    } else {
      c.inputs.push_back(t);
    }
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    Tensor* t = ctx.outputs[i];
    if (t && IsHalf(t->dtype())) {
      outs[i] = Tensor(DType::kFloat32, t->dims());
      c.outputs.push_back(&outs[i]);
    } else {
      c.outputs.push_back(t);
    }
  }
  WH_RETURN_IF_ERROR(fn(c));
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (!outs[i].defined()) continue;
    Tensor* t = ctx.outputs[i];
    const float* src = outs[i].data<float>();
    uint16_t* dst = DataAs<uint16_t>(*t);
    const bool bf = t->dtype() == DType::kBFloat16;
    for (int64_t k = 0; k < t->numel(); ++k) dst[k] = bf ? FloatToBFloat16Rne(src[k]) : DoubleToHalf(src[k]);
  }
  return Status::Ok();
}

Status CheckDType(const KernelInit& init, int input, TypeSet set, const char* op) {
  if (input >= static_cast<int>(init.input_dtypes.size())) return Status::Ok();
  const DType dt = init.input_dtypes[static_cast<size_t>(input)];
  if (dt == DType::kUndefined || InTypeSet(dt, set)) return Status::Ok();
  // float16/bfloat16 are computed in float32 by RunWithHalfAsFloat.
  if (IsHalf(dt) && set != TypeSet::kInteger) return Status::Ok();
  return Unimplemented(std::string(op) + ": input " + std::to_string(input) + " has unsupported element type " +
                       DTypeName(dt));
}

}  // namespace whittle::ew
