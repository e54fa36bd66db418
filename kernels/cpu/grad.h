// The CPU backend's row of the ai.whittle gradient ops (kernels/cpu/grad.cc): the Conv grads as
// Eigen products over im2col columns (X / dX themselves for pointwise windows), images over threads
// (dW from per-thread partial sums added in order); MaxPoolGrad a direct 1-D/2-D window loop (2x2
// stride-2 rows with AVX2) or a generic N-D tap loop, planes over threads; ReluGrad in 16K blocks
// from 64K elements up; AveragePoolGrad planes and GatherGrad slabs over threads.
#pragma once

#include "kernels/common/grad_fns.h"

namespace whittle::cpu {

extern const GradFns kGradFns;

}  // namespace whittle::cpu
