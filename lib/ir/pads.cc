#include "lib/ir/pads.h"

#include <string>

#include "lib/ir/tensor.h"

namespace whittle {

StatusOr<std::vector<int64_t>> PadsForAllAxes(const std::vector<int64_t>& pads, const std::vector<int64_t>& axes,
                                              int64_t rank) {
  if (pads.size() != 2 * axes.size())
    return InvalidArgument("pads " + DimsToString(pads) + " must have 2 entries per axis in axes " + DimsToString(axes));
  std::vector<int64_t> all(static_cast<size_t>(2 * rank), 0);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank) return InvalidArgument("axes value " + std::to_string(axes[i]) + " is out of range for rank " + std::to_string(rank));
    if (seen[static_cast<size_t>(a)]) return InvalidArgument("axis " + std::to_string(axes[i]) + " is repeated in axes");
    seen[static_cast<size_t>(a)] = true;
    all[static_cast<size_t>(a)] = pads[i];
    all[static_cast<size_t>(a + rank)] = pads[i + axes.size()];
  }
  return all;
}

}  // namespace whittle
