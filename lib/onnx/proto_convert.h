// Conversions between ONNX protobuf messages and the Whittle IR (internal to lib/onnx; the only
// header that exposes protobuf types). Loading validates everything that comes from the file:
// dtypes, dims, data sizes, external-data paths, attribute types. Saving writes tensors as
// little-endian raw_data, optionally moving large ones to one external-data file.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lib/ir/attribute.h"
#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "lib/onnx/model_io.h"

namespace whittle::onnx_io {

// Parses a serialized message with a 2 GiB total-bytes limit; false on truncated/garbage bytes.
bool ParseProtoBytes(const std::string& bytes, google::protobuf::MessageLite* msg);

// How deep subgraphs nest in a serialized ModelProto (0: the main graph has none; an If in it
// makes 1, an If in that If's branch 2, ...; any graph-valued attribute counts), found by walking
// the wire format with an explicit stack: no recursion, so a hostile 10,000-deep file costs a
// bounded scan, not the stack. Stops counting past kMaxSubgraphDepth. -1 when the bytes are not
// well-formed protobuf (ParseProtoBytes then says so). 16 levels are about 50 message levels,
// inside protobuf's own recursion limit of 100.
constexpr int kMaxSubgraphDepth = 16;
int GraphNestingDepth(const std::string& bytes);

// ONNX TensorProto.DataType -> DType. `what` names the tensor or value in messages.
// Unimplemented for string/complex; InvalidArgument for UNDEFINED or unknown codes.
StatusOr<DType> DTypeFromOnnx(int32_t onnx_type, const std::string& what);

// Converts a TensorProto (raw_data, typed fields or external data under base_dir).
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& p, const std::string& base_dir, const std::string& what);

// Converts an attribute; `where` names the node.
StatusOr<Attribute> AttributeFromProto(const onnx::AttributeProto& p, const std::string& base_dir,
                                       const std::string& where);

// Collects the tensors that go to the external-data file while a model is being built.
struct ExternalDataPlan {
  std::string location;    // file name relative to the model's folder
  int64_t threshold = -1;  // tensors with at least this many bytes go external; < 0: none
  struct Piece {
    const Tensor* tensor;
    int64_t offset;
  };
  std::vector<Piece> pieces;
  int64_t total_bytes = 0;
};

// Writes t as raw_data (or as an external reference recorded in plan when it qualifies).
Status TensorToProto(const Tensor& t, const std::string& name, ExternalDataPlan* plan, onnx::TensorProto* p);
Status AttributeToProto(const std::string& name, const Attribute& a, ExternalDataPlan* plan,
                        onnx::AttributeProto* p);

// TorchScript writes a Python list appended in a loop, from opset 13 on, as a loop-carried
// sequence: SequenceEmpty before the Loop, one SequenceInsert at the end of the body, and
// ConcatFromSequence(axis 0) after it. Whittle has no sequence type; that pattern is exactly a scan
// output (stacked along axis 0; ConcatFromSequence with new_axis 0 merges the first two dims), as
// the same exporter writes it below opset 13, and is rewritten so. Any other use of a sequence is
// left as it is, for the loader to refuse.
void RewriteSequenceLoops(onnx::ModelProto* m);

// ModelProto -> Graph with structural validation (names, producers, dangling references, cycles,
// domains imported). Op-level validation (ValidateNode, InferShapes) is done by the caller.
StatusOr<Graph> GraphFromModelProto(const onnx::ModelProto& m, const std::string& base_dir);

// Graph -> ModelProto; the graph must pass Verify().
Status GraphToModelProto(const Graph& g, ExternalDataPlan* plan, onnx::ModelProto* m);

}  // namespace whittle::onnx_io
