#include "passes/quantize/int8_plan.h"

#include <algorithm>

#include "passes/cost.h"
#include "runtime/rewrite/match.h"

namespace whittle::quant {
namespace {

bool ProducedBy(const Graph& g, int value, const char* op) {
  if (value < 0) return false;
  const int p = g.value(value).producer;
  return p >= 0 && g.nodes()[static_cast<size_t>(p)].op_type == op;
}

// Ops that move or select values without arithmetic: on quantized data they give the quantized
// result with the input's scale and zero point.
bool IsPassthrough(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  return n.op_type == "MaxPool" || n.op_type == "Flatten" || n.op_type == "Reshape" || n.op_type == "Transpose" ||
         n.op_type == "Squeeze" || n.op_type == "Unsqueeze" || n.op_type == "Gather";
}

// Scale/zero point of a DequantizeLinear that already feeds a layer (per-tensor only).
bool ExistingParams(const Graph& g, int value, ActParams* p) {
  if (!ProducedBy(g, value, "DequantizeLinear")) return false;
  const Node& dq = g.nodes()[static_cast<size_t>(g.value(value).producer)];
  const Tensor* s = g.ConstInput(dq, 1);
  const Tensor* z = g.ConstInput(dq, 2);
  if (!s || s->numel() != 1 || s->dtype() != DType::kFloat32) return false;
  p->scale = s->data<float>()[0];
  p->dtype = z ? z->dtype() : DType::kUInt8;
  p->zero_point = !z ? 0 : z->dtype() == DType::kInt8 ? z->data<int8_t>()[0] : z->data<uint8_t>()[0];
  return p->dtype == DType::kUInt8 || p->dtype == DType::kInt8;
}

// Why node n cannot be quantized as a layer ("" if it can); fills l on success.
std::string MatchLayer(const Graph& g, int idx, const Int8Config& c, QuantLayer* l) {
  const Node& n = g.nodes()[static_cast<size_t>(idx)];
  l->node = idx;
  l->name = n.name;
  l->op_type = n.op_type;
  if (n.inputs.size() < 2 || n.inputs[0] < 0 || n.inputs[1] < 0) return "missing input";
  if (ProducedBy(g, n.inputs[1], "DequantizeLinear"))
    return "already quantized (its weight comes from a DequantizeLinear)";
  const Tensor* w = g.ConstInput(n, 1);
  if (!w || w->dtype() != DType::kFloat32) return "weight is not a constant float32 initializer";
  if (g.value(n.inputs[0]).dtype != DType::kFloat32) return "input is not float32";
  l->input = n.inputs[0];
  l->weight = n.inputs[1];
  l->output = n.outputs.empty() ? -1 : n.outputs[0];
  if (l->output < 0) return "no output";
  if (n.op_type == "Conv") {
    if (w->rank() < 3) return "weight rank " + std::to_string(w->rank()) + " < 3";
    l->weight_axis = 0;
  } else if (n.op_type == "Gemm") {
    if (n.attrs.GetFloat("alpha", 1.f) != 1.f || n.attrs.GetFloat("beta", 1.f) != 1.f)
      return "alpha/beta other than 1";
    if (n.attrs.GetInt("transA", 0) != 0) return "transA=1";
    if (w->rank() != 2) return "weight is not 2-D";
    l->trans_b = n.attrs.GetInt("transB", 0) != 0;
    l->weight_axis = l->trans_b ? 0 : 1;
  } else {  // MatMul
    if (w->rank() != 2) return "weight is not 2-D (batched MatMul weights are not quantized)";
    const Value& a = g.value(n.inputs[0]);
    if (!a.shape || a.shape->size() < 2) return "input rank unknown or < 2";
    l->weight_axis = 1;
  }
  const int64_t units = w->dim(static_cast<int>(l->weight_axis));
  if (n.op_type != "MatMul" && n.inputs.size() > 2 && n.inputs[2] >= 0) {
    const Tensor* b = g.ConstInput(n, 2);
    if (!b || b->dtype() != DType::kFloat32) return "bias is not a constant float32 initializer";
    if (b->numel() != units || (b->rank() == 2 && b->dim(0) != 1) || b->rank() > 2)
      return "bias shape " + DimsToString(b->dims()) + " is not [" + std::to_string(units) + "]";
    l->bias = n.inputs[2];
  }
  if (n.op_type == "Conv" && c.dynamic)
    return "mode=dynamic quantizes MatMul/Gemm only: ONNX Runtime's ConvInteger takes uint8 weights, not the "
           "symmetric int8 ones this pass makes (use mode=static for Conv)";
  return "";
}

}  // namespace

StatusOr<Int8Plan> MakePlan(const Graph& g, const Int8Config& c) {
  WH_RETURN_IF_ERROR(c.select.Check(g));

  Int8Plan plan;
  WH_ASSIGN_OR_RETURN(std::vector<int> order, g.TopologicalOrder());
  std::set<int> quantized;  // values that will carry quantization parameters
  std::set<int> calibrate_set;
  auto need = [&](int v) {
    if (quantized.count(v)) return;
    ActParams p;
    if (ExistingParams(g, v, &p)) {
      plan.existing[v] = p;
    } else {
      calibrate_set.insert(v);
      plan.calibrate.push_back(v);
    }
    quantized.insert(v);
  };
  for (int idx : order) {
    const Node& n = g.nodes()[static_cast<size_t>(idx)];
    const bool std_domain = n.domain.empty() || n.domain == "ai.onnx";
    if (std_domain && (n.op_type == "Conv" || n.op_type == "Gemm" || n.op_type == "MatMul")) {
      if (!c.op_types.count(n.op_type)) {
        plan.skipped[idx] = SkippedLayer(g, n, "op type not in op-types=");
        continue;
      }
      QuantLayer l;
      std::string why = MatchLayer(g, idx, c, &l);
      if (why.empty()) why = c.select.LeftAloneReason(n.name);
      if (!why.empty() && c.attention && !c.dynamic && n.op_type == "MatMul" && n.inputs.size() == 2 &&
          n.inputs[0] >= 0 && n.inputs[1] >= 0 && !g.value(n.inputs[0]).initializer &&
          !g.value(n.inputs[1]).initializer && g.value(n.inputs[0]).dtype == DType::kFloat32 &&
          g.value(n.inputs[1]).dtype == DType::kFloat32 && c.select.LeftAloneReason(n.name).empty()) {
        // attention=1: activation x activation (Q·Kᵀ, softmax·V): both inputs quantized per tensor.
        need(n.inputs[0]);
        need(n.inputs[1]);
        plan.act_matmuls.push_back(idx);
        continue;
      }
      if (!why.empty()) {
        plan.skipped[idx] = SkippedLayer(g, n, why);
        continue;
      }
      l.weight_qmax = c.reduce_range ? 63 : 127;
      const auto ov = c.layers.find(n.name);
      l.per_channel = ov != c.layers.end() && ov->second.per_channel >= 0 ? ov->second.per_channel != 0 : c.per_channel;
      if (!c.dynamic && !c.qoperator && n.op_type == "MatMul" && l.bias < 0) {
        // A MatMul's bias as exporters write a Linear on 3-D input (Add of a constant [N]) stays
        // before the output QuantizeLinear too: the layer's output is quantized once, after it,
        // and the runtime takes the Add as its int32 bias.
        const Tensor& w = *g.value(l.weight).initializer;
        int b = -1;
        const int r = w.rank() == 2 ? rewrite::MatMulBiasAdd(g, l.output, w.dim(1), &b) : -1;
        if (r >= 0) {
          l.bias_add = r;
          l.output = g.nodes()[static_cast<size_t>(r)].outputs[0];
        }
      }
      if (!c.dynamic) {
        // A Relu or a Clip with constant bounds (ReLU6) right after the layer stays before the
        // output QuantizeLinear, so the layer's output is quantized once, in the activation's
        // range (the runtime folds both into its integer clamp).
        const int r = g.SoleConsumer(l.output);
        const Node* a = r >= 0 ? &g.nodes()[static_cast<size_t>(r)] : nullptr;
        if (a && !a->inputs.empty() && a->inputs[0] == l.output && a->outputs.size() == 1 && a->outputs[0] >= 0 &&
            (rewrite::IsOp(*a, "Relu") || (rewrite::IsOp(*a, "Clip") && rewrite::ConstClipRange(g, *a)))) {
          l.act = r;
          l.output = a->outputs[0];
        }
        need(l.input);
        need(l.output);
      }
      plan.layers.push_back(l);
      continue;
    }
    if (!c.dynamic && IsPassthrough(n) && !n.inputs.empty() && n.inputs[0] >= 0 && quantized.count(n.inputs[0]) &&
        n.outputs.size() == 1 && n.outputs[0] >= 0 && !quantized.count(n.outputs[0])) {
      plan.passthrough.push_back(idx);
      plan.inherit[n.outputs[0]] = n.inputs[0];
      quantized.insert(n.outputs[0]);
    }
  }
  return plan;
}

}  // namespace whittle::quant
