// The unary ops' attributes as every backend's kernels read them (kernels/common/elementwise_fns.h).
#include <string>

#include "kernels/common/elementwise_fns.h"

namespace whittle::ew {

UnaryParams ReadUnaryParams(UnaryOp op, const AttributeMap& a) {
  UnaryParams p;
  for (const UnaryOpInfo& u : kUnaryOps) {
    if (u.op != op) continue;
    for (const UnaryAttr& at : u.attrs) {
      if (!at.name) continue;
      const std::string name = at.name;
      const float v = a.GetFloat(name, at.value);
      float* slot = name == "alpha" ? &p.alpha : name == "beta" ? &p.beta : name == "gamma" ? &p.gamma
                    : name == "lambd" ? &p.lambd : &p.bias;
      *slot = v;
    }
  }
  if (op == UnaryOp::kIsInf) {
    p.detect_negative = a.GetInt("detect_negative", 1) != 0;
    p.detect_positive = a.GetInt("detect_positive", 1) != 0;
  }
  return p;
}

}  // namespace whittle::ew
