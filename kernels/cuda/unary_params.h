// The alpha and beta the CUDA element-wise kernel applies for an op (kernels/cuda/unary_body.h's
// Apply): each attribute or ONNX's default for that op (Selu's gamma travels as beta). Host code
// without CUDA, so the body tests take the same parameters as kernels/cuda/elementwise.cc.
#pragma once

#include <utility>

#include "kernels/cuda/elementwise.h"
#include "lib/ir/attribute.h"

namespace whittle::cuda {

inline std::pair<float, float> UnaryParams(Unary op, const AttributeMap& a) {
  switch (op) {
    case Unary::kHardSigmoid: return {a.GetFloat("alpha", 0.2f), a.GetFloat("beta", 0.5f)};
    case Unary::kElu:
    case Unary::kThresholdedRelu: return {a.GetFloat("alpha", 1.f), 0.f};
    case Unary::kSelu: return {a.GetFloat("alpha", 1.67326319217681884765625f), a.GetFloat("gamma", 1.05070102214813232421875f)};
    default: return {a.GetFloat("alpha", 0.01f), 0.f};
  }
}

}  // namespace whittle::cuda
