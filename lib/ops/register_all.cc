// The one place that lists every op family: their OpDefs and their gradient rules.
#include <mutex>

#include "lib/ops/grad_rule.h"
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
void RegisterOnnxAttentionOps(OpRegistry& r);  // lib/ops/onnx_attention.cc
void RegisterGradOps(OpRegistry& r);         // lib/ops/grad.cc
void RegisterCodebookOps(OpRegistry& r);     // lib/ops/codebook.cc
void RegisterBinaryOps(OpRegistry& r);       // lib/ops/binary.cc
void RegisterCirculantOps(OpRegistry& r);    // lib/ops/circulant.cc
void RegisterSignalOps(OpRegistry& r);       // lib/ops/signal.cc
void RegisterNBitsOps(OpRegistry& r);        // lib/ops/nbits.cc
void RegisterControlFlowOps(OpRegistry& r);  // lib/ops/control_flow.cc
void RegisterSequenceOps(OpRegistry& r);     // lib/ops/sequence.cc

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
    RegisterOnnxAttentionOps(r);
    RegisterGradOps(r);
    RegisterCodebookOps(r);
    RegisterBinaryOps(r);
    RegisterCirculantOps(r);
    RegisterSignalOps(r);
    RegisterNBitsOps(r);
    RegisterControlFlowOps(r);
    RegisterSequenceOps(r);
  });
}

void RegisterElementwiseGrads(GradRegistry& r);  // lib/ops/elementwise_grad.cc
void RegisterReduceGrads(GradRegistry& r);       // lib/ops/reduce_grad.cc
void RegisterConvGrads(GradRegistry& r);         // lib/ops/conv_grad.cc
void RegisterLinearGrads(GradRegistry& r);       // lib/ops/linear_grad.cc
void RegisterNormGrads(GradRegistry& r);         // lib/ops/norm_grad.cc
void RegisterPoolGrads(GradRegistry& r);         // lib/ops/pool_grad.cc
void RegisterShapeOpsGrads(GradRegistry& r);     // lib/ops/shape_ops_grad.cc
void RegisterMovementGrads(GradRegistry& r);     // lib/ops/movement_grad.cc
void RegisterQuantGrads(GradRegistry& r);        // lib/ops/quant_grad.cc
void RegisterCodebookGrads(GradRegistry& r);     // lib/ops/codebook_grad.cc
void RegisterBinaryGrads(GradRegistry& r);       // lib/ops/binary_grad.cc
void RegisterCirculantGrads(GradRegistry& r);    // lib/ops/circulant_grad.cc

void RegisterAllGrads() {
  static std::once_flag once;
  std::call_once(once, [] {
    GradRegistry& r = GradRegistry::Global();
    RegisterElementwiseGrads(r);
    RegisterReduceGrads(r);
    RegisterConvGrads(r);
    RegisterLinearGrads(r);
    RegisterNormGrads(r);
    RegisterPoolGrads(r);
    RegisterShapeOpsGrads(r);
    RegisterMovementGrads(r);
    RegisterQuantGrads(r);
    RegisterCodebookGrads(r);
    RegisterBinaryGrads(r);
    RegisterCirculantGrads(r);
  });
}

}  // namespace whittle
