#include "kernels/common/broadcast.h"

namespace whittle {

std::vector<int64_t> StridesOf(const Dims& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i > 1; --i) s[i - 2] = s[i - 1] * dims[i - 1];
  return s;
}

bool NextIndex(std::vector<int64_t>& idx, const Dims& dims) {
  for (size_t i = dims.size(); i > 0; --i) {
    if (++idx[i - 1] < dims[i - 1]) return true;
    idx[i - 1] = 0;
  }
  return false;
}

StatusOr<std::vector<int64_t>> ExpandStrides(const Dims& in, const Dims& out) {
  const int r = static_cast<int>(out.size()), ir = static_cast<int>(in.size());
  const std::vector<int64_t> is = StridesOf(in);
  std::vector<int64_t> bstride(static_cast<size_t>(r), 0);  // 0 on broadcast axes
  for (int k = 0; k < ir; ++k) {
    const size_t ik = static_cast<size_t>(k), ok = static_cast<size_t>(k + r - ir);
    if (in[ik] == out[ok]) bstride[ok] = in[ik] == 1 ? 0 : is[ik];
    else if (in[ik] != 1)
      return Internal("Expand input " + DimsToString(in) + " does not broadcast to " + DimsToString(out));
  }
  return bstride;
}

namespace ew {

StatusOr<std::vector<int64_t>> BroadcastStrides(const Tensor& in, const Dims& out_dims) {
  const int r = static_cast<int>(out_dims.size());
  const int ir = in.rank();
  if (ir > r)
    return InvalidArgument("input of shape " + DimsToString(in.dims()) + " does not broadcast to output shape " +
                           DimsToString(out_dims));
  std::vector<int64_t> strides(static_cast<size_t>(r), 0);
  int64_t s = 1;
  for (int i = r - 1, j = ir - 1; j >= 0; --i, --j) {
    const int64_t d = in.dim(j);
    if (d == out_dims[static_cast<size_t>(i)]) {
      strides[static_cast<size_t>(i)] = d == 1 ? 0 : s;
    } else if (d != 1) {
      return InvalidArgument("input of shape " + DimsToString(in.dims()) + " does not broadcast to output shape " +
                             DimsToString(out_dims));
    }
    s *= d;
  }
  return strides;
}

}  // namespace ew
}  // namespace whittle
