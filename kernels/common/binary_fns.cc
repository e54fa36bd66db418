#include "kernels/common/binary_fns.h"

#include <string>

namespace whittle {

Status ResolveBinaryConv(const BinaryConvAttrs& a, const Tensor& x, ConvShape* s) {
  if (x.rank() != 4 || x.dim(1) != a.in_channels)
    return InvalidArgument("BinaryConv input X must be [N, " + std::to_string(a.in_channels) + ", H, W], got " +
                           DimsToString(x.dims()));
  s->batch = x.dim(0);
  s->in_channels = a.in_channels;
  s->out_channels = a.b.n;
  s->group = a.group;
  return ResolveWindow(a.window, x.dims().data() + 2, a.window.kernel_shape.data(), 2, &s->geo);
}

}  // namespace whittle
