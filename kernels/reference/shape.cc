#include "kernels/reference/shape.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace whittle {

Status ShapeReference(const Tensor& in, int64_t start, int64_t end, Tensor* out) {
  const int64_t r = in.rank();
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  const int64_t n = std::max<int64_t>(0, end - start);
  if (out->dtype() != DType::kInt64 || out->numel() != n) return Internal("Shape output must be int64 [" + std::to_string(n) + "]");
  int64_t* p = out->data<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = in.dim(static_cast<int>(start + i));
  return Status::Ok();
}

StatusOr<Tensor> ConstantFromAttrs(const AttributeMap& attrs) {
  if (const Tensor* t = attrs.GetTensor("value")) {
    if (!t->defined()) return InvalidArgument("attribute 'value' holds no tensor data");
    return *t;
  }
  if (attrs.Has("value_float")) return Tensor::Scalar<float>(attrs.GetFloat("value_float", 0.f));
  if (attrs.Has("value_floats")) {
    std::vector<float> v = attrs.GetFloats("value_floats");
    return Tensor::FromVector<float>({static_cast<int64_t>(v.size())}, v);
  }
  if (attrs.Has("value_int")) return Tensor::Scalar<int64_t>(attrs.GetInt("value_int", 0));
  if (attrs.Has("value_ints")) {
    std::vector<int64_t> v = attrs.GetInts("value_ints");
    return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
  }
  return Unimplemented("Constant supports the value, value_float(s) and value_int(s) attributes only");
}

Status FillWithElement(const Tensor& value, Tensor* out) {
  const size_t es = DTypeSize(out->dtype());
  if (value.dtype() != out->dtype() || value.numel() != 1) return Internal("fill value must be one element of the output type");
  // One element, then doubling copies: a large fill is a few memcpy calls, not one per element
  // (each with a numel() recount); fuzz_model_load_run timed out in the per-element loop.
  char* p = static_cast<char*>(out->raw_data());
  const size_t total = static_cast<size_t>(out->numel()) * es;
  if (total == 0) return Status::Ok();
  std::memcpy(p, value.raw_data(), es);
  for (size_t done = es; done < total;) {
    const size_t n = std::min(done, total - done);
    std::memcpy(p + done, p, n);
    done += n;
  }
  return Status::Ok();
}

Status DropoutReference(const Tensor& x, Tensor* y, Tensor* mask) {
  if (y && y->raw_data() != x.raw_data()) std::memcpy(y->raw_data(), x.raw_data(), x.nbytes());
  if (!mask) return Status::Ok();
  uint64_t one = 0;
  switch (mask->dtype()) {
    case DType::kBool: one = 1; break;
    case DType::kFloat16: one = 0x3C00; break;
    case DType::kBFloat16: one = 0x3F80; break;
    case DType::kFloat32: { const float f = 1.f; std::memcpy(&one, &f, 4); break; }
    case DType::kFloat64: { const double d = 1.0; std::memcpy(&one, &d, 8); break; }
    default: return InvalidArgument(std::string("Dropout mask cannot be ") + DTypeName(mask->dtype()));
  }
  const size_t es = DTypeSize(mask->dtype());
  char* p = static_cast<char*>(mask->raw_data());
  for (int64_t i = 0; i < mask->numel(); ++i) std::memcpy(p + static_cast<size_t>(i) * es, &one, es);
  return Status::Ok();
}

namespace reference {
const ShapeFns kShapeFns{ShapeReference, FillWithElement, DropoutReference};
}  // namespace reference

}  // namespace whittle
