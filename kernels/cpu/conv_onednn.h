// Float32 2-D convolution by oneDNN's convolution primitive (its direct/brgemm kernels for the
// CPU's ISA, in the blocked layouts it picks): per input shape a plan with the primitive, the
// NCHW <-> blocked reorders of the activations and the weights reordered once. A fused Relu /
// LeakyRelu is a post-op, a fused residual (Conv's fourth input) a sum post-op applied before it;
// other fused activations are applied to the NCHW output afterwards. A plan is made per thread
// count too: oneDNN fixes a primitive's thread split when the primitive is created.
// The Conv kernel measures this path against its own (im2col + Sgemm) on the first call of each
// input shape and keeps the faster (kernels/cpu/conv.cc).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "kernels/common/fused_activation.h"
#include "kernels/common/window.h"

namespace whittle::cpu {

// Activation layout: NCHW in and out unless `blocked` (reordered to oneDNN's choice and back per
// call); blocked is nChw{block}c for block 8 or 16 and NHWC for block 0, in (NCHW when
// plain_input) and out, as the NCHWc rewrite (runtime/rewrite/nchwc.h) hands them over.
struct OneDnnConvLayout {
  bool blocked = false;
  int block = 0;
  bool plain_input = false;
};

class OneDnnConv {
 public:
  // weights [M, C/group, KH, KW] and bias [M] (or null) must outlive this object.
  OneDnnConv(const float* weights, const float* bias, FusedActivation act);
  ~OneDnnConv();
  using Layout = OneDnnConvLayout;
  // y = act(conv(x) + b + sum) for a 2-D conv shape (sum: null, or a tensor of y's shape and
  // layout, which may be y itself); false when oneDNN has no implementation for it.
  bool Run(const ConvShape& s, const float* x, const float* sum, float* y, int threads,
           const Layout& layout = Layout()) const;

 private:
  struct Plan;
  std::shared_ptr<Plan> PlanFor(const ConvShape& s, bool with_sum, int threads, const Layout& layout) const;

  const float* w_;
  const float* b_;
  FusedActivation act_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<Plan>> plans_;
};

// The activation layout oneDNN's convolutions prefer on this CPU, as a block: 16 or 8 for
// nChw16c / nChw8c (its direct kernels), 0 for NHWC (its brgemm kernels on AVX-512 cores);
// nullopt for anything else. The NCHWc rewrite uses it.
std::optional<int> OneDnnPreferredBlock();

}  // namespace whittle::cpu
