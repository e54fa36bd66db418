// Reference kernels for the shape ops that write data: Shape, Constant, ConstantOfShape and
// Dropout with a mask output (the others alias their input, see kernels/shape_kernels.cc).
// Dropout runs in inference mode: output = input, mask all "kept".
#pragma once

#include <cstdint>

#include "kernels/common/shape_fns.h"
#include "lib/ir/attribute.h"
#include "lib/ir/status.h"
#include "lib/ir/tensor.h"

namespace whittle {

// out (int64, 1-D) = in's dims[start:end], with ONNX's negative/clamping rules.
Status ShapeReference(const Tensor& in, int64_t start, int64_t end, Tensor* out);
// The tensor a Constant node's value* attribute describes (strings: Unimplemented).
StatusOr<Tensor> ConstantFromAttrs(const AttributeMap& attrs);
// Fills out with the single element of value (same dtype).
Status FillWithElement(const Tensor& value, Tensor* out);
// y = x; mask (optional) = all ones of its dtype (bool true, or 1 in x's float type before opset 10).
Status DropoutReference(const Tensor& x, Tensor* y, Tensor* mask);

namespace reference {
extern const ShapeFns kShapeFns;
}  // namespace reference

}  // namespace whittle
