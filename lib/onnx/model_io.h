// ONNX model I/O: load a .onnx file (including external-data tensors) into the Graph IR with
// full validation, and save a Graph back atomically. (API declared by the lead; the ONNX I/O
// helper owns this file and may extend it.)
#pragma once

#include <string>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

struct LoadOptions {
  bool validate_ops = true;
};

struct SaveOptions {
  int64_t external_data_threshold = -1;
};

StatusOr<Graph> LoadModel(const std::string& path, const LoadOptions& opts = {});
StatusOr<Graph> ParseModel(const std::string& bytes, const std::string& base_dir, const LoadOptions& opts = {});
Status SaveModel(const Graph& g, const std::string& path, const SaveOptions& opts = {});
StatusOr<Tensor> LoadTensorProtoFile(const std::string& path, std::string* name = nullptr);
Status CheckModelWithOnnxChecker(const std::string& path);

}  // namespace whittle
