#include "passes/quantize/int8_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace whittle::quant {
namespace {

Status ParseCalibration(const std::string& text, CalibConfig* c) {
  if (text == "minmax") {
    c->method = CalibMethod::kMinMax;
  } else if (text == "entropy") {
    c->method = CalibMethod::kEntropy;
  } else if (text == "mse") {
    c->method = CalibMethod::kMse;
  } else if (text.rfind("percentile", 0) == 0) {
    c->method = CalibMethod::kPercentile;
    if (text == "percentile") return Status::Ok();  // default 99.99
    if (text[10] != ':') return InvalidArgument("--int8: calibration='" + text + "': expected percentile:P, e.g. percentile:99.99");
    const std::string p = text.substr(11);
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(p.c_str(), &end);
    if (errno != 0 || end == p.c_str() || *end != '\0' || !std::isfinite(v) || v <= 50 || v > 100)
      return InvalidArgument("--int8: calibration=percentile:" + p + ": P must be a number in (50, 100], e.g. 99.99");
    c->percentile = v;
  } else {
    return InvalidArgument("--int8: calibration='" + text + "' must be one of minmax|percentile:P|entropy|mse");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Int8Config> ParseInt8Config(PassOptions& o) {
  Int8Config c;
  c.spec = o.spec();
  // mse: best or tied-best top-1 on both bundled models (see the pass help), at the cost of a
  // second calibration pass.
  c.calib.method = CalibMethod::kMse;
  WH_ASSIGN_OR_RETURN(std::string mode, o.GetChoice("mode", "static", {"static", "dynamic", "weight-only"}));
  if (mode == "weight-only") return Internal("--int8 mode=weight-only is the weight-only pass, not this configuration");
  c.dynamic = mode == "dynamic";
  const std::vector<std::string> calib = o.GetList("calibration");
  if (calib.size() > 1) return InvalidArgument("--int8: calibration= takes one method, got '" + calib[0] + "," + calib[1] + "'");
  if (!calib.empty()) {
    if (c.dynamic)
      return InvalidArgument("--int8: calibration= applies to mode=static; mode=dynamic measures activation ranges at run time");
    c.calibration_text = calib[0];
    WH_RETURN_IF_ERROR(ParseCalibration(calib[0], &c.calib));
  }
  WH_ASSIGN_OR_RETURN(int64_t pc, o.GetInt("per-channel", 1, 0, 1));
  c.per_channel = pc != 0;
  WH_ASSIGN_OR_RETURN(int64_t bc, o.GetInt("bias-correction", 0, 0, 1));
  c.bias_correction = bc != 0;
  WH_ASSIGN_OR_RETURN(int64_t eq, o.GetInt("equalize", 0, 0, 1));
  c.equalize = eq != 0;
  WH_ASSIGN_OR_RETURN(int64_t att, o.GetInt("attention", 0, 0, 1));
  c.attention = att != 0;
  WH_ASSIGN_OR_RETURN(int64_t rr, o.GetInt("reduce-range", 1, 0, 1));
  c.reduce_range = rr != 0;
  WH_ASSIGN_OR_RETURN(std::string act, o.GetChoice("activations", "u8", {"u8", "s8"}));
  c.activations = act == "s8" ? DType::kInt8 : DType::kUInt8;
  c.calib.symmetric = c.activations == DType::kInt8;
  if (c.dynamic && act == "s8")
    return InvalidArgument("--int8: activations=s8 is not available with mode=dynamic (DynamicQuantizeLinear produces uint8)");
  const bool format_given = o.Has("format");
  WH_ASSIGN_OR_RETURN(std::string format, o.GetChoice("format", "qdq", {"qdq", "qoperator"}));
  if (c.dynamic && format_given)
    return InvalidArgument("--int8: format= applies to mode=static; mode=dynamic always emits DynamicQuantizeLinear + "
                           "MatMulInteger");
  c.qoperator = format == "qoperator";
  if (c.attention && (c.dynamic || c.qoperator))
    return InvalidArgument("--int8: attention=1 needs mode=static and format=qdq (both MatMul inputs get QuantizeLinear/"
                           "DequantizeLinear pairs)");
  if (o.Has("op-types")) {
    c.op_types.clear();
    for (const std::string& t : o.GetList("op-types")) {
      if (t != "Conv" && t != "MatMul" && t != "Gemm")
        return InvalidArgument("--int8: op-types='" + t + "': supported op types are Conv, MatMul and Gemm");
      c.op_types.insert(t);
    }
  }
  WH_ASSIGN_OR_RETURN(c.select, LayerSelection::Parse(o, LayerSelection::Skip::kAllowed));
  for (auto& [name, lo] : o.layers()) {
    Int8LayerOverride ov;
    if (lo.Has("per-channel")) {
      WH_ASSIGN_OR_RETURN(int64_t p, lo.GetInt("per-channel", 1, 0, 1));
      ov.per_channel = static_cast<int>(p);
    }
    c.layers[name] = ov;
  }
  WH_RETURN_IF_ERROR(o.Finish());
  return c;
}

bool IsWeightOnlyMode(PassOptions o) {
  auto mode = o.GetChoice("mode", "static", {"static", "dynamic", "weight-only"});
  return mode.ok() && *mode == "weight-only";
}

}  // namespace whittle::quant
