// ONNX model I/O: load a .onnx file (including external-data tensors) into the Graph IR with
// full validation, and save a Graph back atomically. Every failure is a Status whose message
// names the file, node, op and value; hostile files never crash, hang or allocate beyond their
// size. kUnimplemented = valid ONNX that Whittle does not support (op, opset, dtype, subgraph);
// kInvalidArgument = malformed model; kNotFound/kIoError = file system problems.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"

namespace whittle {

// The ai.onnx opsets Whittle loads. Each op implements the semantics up to its OpDef::max_opset;
// a model of a newer opset loads when its ops did not change incompatibly since (ValidateNode).
constexpr int64_t kMinSupportedOpset = 7;
constexpr int64_t kMaxSupportedOpset = 28;

struct LoadOptions {
  // Check the ai.onnx opset range, every node against its OpDef (ValidateNode) and run
  // InferShapes. Off: structure only (names, types, data, topology), e.g. to inspect or convert
  // a model with ops Whittle cannot run.
  bool validate_ops = true;
  // Turn Constant nodes into initializers of the same name (exporters such as Paddle2ONNX write
  // every weight that way), so passes and kernels see constant weights as constants. A Constant
  // that is itself a graph output stays a node. Only with validate_ops.
  bool lift_constants = true;
};

struct SaveOptions {
  // Tensors (initializers and tensor attributes) of at least this many bytes are written to
  // `<model file name>.data` beside the model, at 64-byte-aligned offsets. < 0: automatic: all
  // inline, unless the tensors would take the model past protobuf's 2 GiB limit; then those of at
  // least kAutoExternalDataThreshold bytes go external.
  int64_t external_data_threshold = -1;
};
constexpr int64_t kAutoExternalDataThreshold = 1024;

// Reads and validates a model. External data is resolved relative to the model's folder.
StatusOr<Graph> LoadModel(const std::string& path, const LoadOptions& opts = {});
// Same from serialized bytes; external data is resolved under base_dir ("" refuses it).
StatusOr<Graph> ParseModel(const std::string& bytes, const std::string& base_dir, const LoadOptions& opts = {});
// Writes g (which must pass Verify()) atomically: on error nothing new is left at path. Attributes
// whose names start with '_' are runtime-internal and are not saved. StageModel, then Commit.
Status SaveModel(const Graph& g, const std::string& path, const SaveOptions& opts = {});

class AtomicFile;
// A model written but not yet in place, for a caller that commits it last, after other files
// (compress-model's reports): the model file and its external-data file are flushed to disk as
// AtomicFile temporaries beside `path`. Commit() renames them into place, the data file first;
// destroyed uncommitted, it removes them, and while it lives RemoveLiveTempFiles() can.
class StagedModel {
 public:
  ~StagedModel();
  StagedModel(const StagedModel&) = delete;
  StagedModel& operator=(const StagedModel&) = delete;
  Status Commit();
  // The size of the model file (without its external-data file), as it will be at path; of the
  // external-data file (0: none); and of both, what the model takes on disk.
  int64_t file_bytes() const { return file_bytes_; }
  int64_t data_bytes() const { return data_bytes_; }
  int64_t total_bytes() const { return file_bytes_ + data_bytes_; }

 private:
  friend StatusOr<std::unique_ptr<StagedModel>> StageModel(const Graph&, const std::string&, const SaveOptions&);
  StagedModel() = default;
  std::unique_ptr<AtomicFile> model_, data_;  // data_ null: no external data
  int64_t file_bytes_ = 0, data_bytes_ = 0;
  std::string context_;
};
StatusOr<std::unique_ptr<StagedModel>> StageModel(const Graph& g, const std::string& path,
                                                  const SaveOptions& opts = {});
// What the model at `path` takes on disk: its file and every distinct external-data file its
// tensors name (resolved beside it), in bytes. A model file past 256 MiB is taken to hold its
// tensors inline and counted alone (parsing it again only to look would double the memory).
StatusOr<int64_t> ModelBytesOnDisk(const std::string& path);
// Whether the model at path keeps tensors in external data files (false when unreadable). The
// tools write such a model's outputs with external data too, unless told otherwise.
bool HasExternalData(const std::string& path);
// Reads a serialized TensorProto (the ONNX backend tests' input_N.pb/output_N.pb); *name gets the
// tensor's name ("" when it has none).
StatusOr<Tensor> LoadTensorProtoFile(const std::string& path, std::string* name = nullptr);
// The same for a value of any kind: a TensorProto (kTensor), a SequenceProto of tensors
// (kSequence) or an OptionalProto (kOptional*), as the backend tests store sequences and optionals.
StatusOr<Tensor> LoadValueProtoFile(const std::string& path, ValueKind kind, std::string* name = nullptr);
// Runs onnx::checker::check_model on a saved file (for tests and passes, not for loading).
Status CheckModelWithOnnxChecker(const std::string& path);

}  // namespace whittle
