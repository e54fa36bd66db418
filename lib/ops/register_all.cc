// The one place that lists every op family.
#include <mutex>

#include "lib/ops/op_def.h"

namespace whittle {

void RegisterElementwiseOps(OpRegistry& r);  // lib/ops/elementwise.cc
void RegisterReduceOps(OpRegistry& r);       // lib/ops/reduce.cc
void RegisterConvOps(OpRegistry& r);         // lib/ops/conv.cc
void RegisterLinearOps(OpRegistry& r);       // lib/ops/linear.cc
void RegisterNormOps(OpRegistry& r);         // lib/ops/norm.cc
void RegisterPoolOps(OpRegistry& r);         // lib/ops/pool.cc
void RegisterShapeOps(OpRegistry& r);        // lib/ops/shape_ops.cc
void RegisterMovementOps(OpRegistry& r);       // lib/ops/movement.cc
void RegisterQuantOps(OpRegistry& r);        // lib/ops/quant.cc
void RegisterQLinearOps(OpRegistry& r);      // lib/ops/qlinear.cc
void RegisterIndexOps(OpRegistry& r);        // lib/ops/index_ops.cc
void RegisterLossOps(OpRegistry& r);         // lib/ops/loss.cc
void RegisterRecurrentOps(OpRegistry& r);    // lib/ops/recurrent.cc
void RegisterResampleOps(OpRegistry& r);     // lib/ops/resample.cc
void RegisterNchwcOps(OpRegistry& r);        // lib/ops/nchwc.cc
void RegisterAttentionOps(OpRegistry& r);    // lib/ops/attention.cc
void RegisterGradOps(OpRegistry& r);         // lib/ops/grad.cc
void RegisterCodebookOps(OpRegistry& r);     // lib/ops/codebook.cc
void RegisterBinaryOps(OpRegistry& r);       // lib/ops/binary.cc
void RegisterCirculantOps(OpRegistry& r);    // lib/ops/circulant.cc
void RegisterSignalOps(OpRegistry& r);       // lib/ops/signal.cc

void RegisterAllOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    OpRegistry& r = OpRegistry::Global();
    RegisterElementwiseOps(r);
    RegisterReduceOps(r);
    RegisterConvOps(r);
    RegisterLinearOps(r);
    RegisterNormOps(r);
    RegisterPoolOps(r);
    RegisterShapeOps(r);
    RegisterMovementOps(r);
    RegisterQuantOps(r);
    RegisterQLinearOps(r);
    RegisterIndexOps(r);
    RegisterLossOps(r);
    RegisterRecurrentOps(r);
    RegisterResampleOps(r);
    RegisterNchwcOps(r);
    RegisterAttentionOps(r);
    RegisterGradOps(r);
    RegisterCodebookOps(r);
    RegisterBinaryOps(r);
    RegisterCirculantOps(r);
    RegisterSignalOps(r);
  });
}

}  // namespace whittle
