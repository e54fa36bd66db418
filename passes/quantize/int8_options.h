// The --int8 configuration and its parsing from the CLI spec
// ("mode=static,calibration=percentile:99.99,per-channel=1,activations=u8,format=qdq,
// op-types=Conv,MatMul,Gemm,exclude=fc3,layer=fc1:skip=1"). Every option is validated here,
// with the option named in the error, before any model is read.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/ir/dtype.h"
#include "passes/layer_selection.h"
#include "passes/pass_options.h"
#include "passes/quantize/calibration.h"

namespace whittle::quant {

// layer=NAME:per-channel=0|1 (layer=NAME:skip=1 is Int8Config::select's).
struct Int8LayerOverride {
  int per_channel = -1;  // -1: the global setting
};

struct Int8Config {
  bool dynamic = false;
  CalibConfig calib;  // method mse unless calibration= says otherwise (set by ParseInt8Config)
  std::string calibration_text = "mse";  // as the user wrote it, for the report
  bool per_channel = true;
  bool reduce_range = true;  // weights in [-63, 63] (the default; see Int8PassHelp)
  DType activations = DType::kUInt8;
  bool qoperator = false;
  bool bias_correction = false;  // shift biases by the mean output error weight rounding causes
  bool equalize = false;
  bool attention = false;        // also activation x activation MatMuls (QDQ on both inputs)         // cross-layer equalization of Conv/Gemm/MatMul -> [Relu] -> ... chains
  std::set<std::string> op_types = {"Conv", "MatMul", "Gemm"};
  LayerSelection select;  // exclude= and the layer= names
  std::map<std::string, Int8LayerOverride> layers;
  std::string spec;
};

StatusOr<Int8Config> ParseInt8Config(PassOptions& o);

// Whether the spec says mode=weight-only: that mode is the weight-only pass
// (passes/quantize/weight_only.h) with 8 bits, and takes its options instead of these.
bool IsWeightOnlyMode(PassOptions o);

}  // namespace whittle::quant
