// Public ONNX entry points: read and parse with limits, convert, validate ops and shapes; save
// atomically (model and external-data file each written to an AtomicFile, fsynced, renamed).
#include "lib/onnx/model_io.h"

#include <onnx/onnx_pb.h>  // defines ONNX_API, which onnx-data.pb.h needs
#include <onnx/onnx-data.pb.h>

#include <onnx/checker.h>

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <set>

#include "lib/ir/atomic_file.h"
#include "lib/onnx/contrib_ops.h"
#include "lib/onnx/file_io.h"
#include "lib/onnx/proto_convert.h"
#include "lib/ops/op_def.h"

namespace whittle {
namespace {

Status CheckDefaultOpset(const Graph& g) {
  auto it = g.opset_imports.find("");
  if (it == g.opset_imports.end()) return Status::Ok();
  if (it->second < kMinSupportedOpset || it->second > kMaxSupportedOpset)
    return Unimplemented("ai.onnx opset " + std::to_string(it->second) + " is not supported; Whittle supports opsets " +
                         std::to_string(kMinSupportedOpset) + " to " + std::to_string(kMaxSupportedOpset));
  return Status::Ok();
}

// The value of a (validated) Constant node's attribute.
Tensor ConstantValue(const AttributeMap& a) {
  if (const Tensor* t = a.GetTensor("value")) return *t;
  if (a.Has("value_float")) return Tensor::Scalar<float>(a.GetFloat("value_float", 0.f));
  if (a.Has("value_floats")) {
    const std::vector<float> v = a.GetFloats("value_floats");
    return Tensor::FromVector<float>({static_cast<int64_t>(v.size())}, v);
  }
  if (a.Has("value_int")) return Tensor::Scalar<int64_t>(a.GetInt("value_int", 0));
  const std::vector<int64_t> v = a.GetInts("value_ints");
  return Tensor::FromVector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

// Constant nodes become initializers, and so does an Identity of a constant: TorchScript's
// exporter writes one initializer for tensors of equal value and gives each further reader an
// Identity of it (torchvision's resnet18 reads 16 of its 20 Conv biases that way), which the
// passes would otherwise see as a computed bias and skip. Each lifted Identity gets its own copy
// of the bytes, so a pass may rewrite one reader's tensor without changing another's.
void LiftConstantNodes(Graph& g) {
  std::set<int> lifted;
  auto lift = [&](size_t i, Tensor t) {
    Value& v = g.value(g.nodes()[i].outputs[0]);
    v.dtype = t.dtype();
    v.shape = ToSymShape(t.dims());
    v.initializer = std::move(t);
    lifted.insert(static_cast<int>(i));
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op_type != "Constant" || !n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] < 0) continue;
    if (g.IsGraphOutput(n.outputs[0])) continue;
    Tensor t = ConstantValue(n.attrs);
    if (t.defined()) lift(i, std::move(t));
  }
  // Identity chains in any node order: repeat until a sweep lifts nothing.
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      if (lifted.count(static_cast<int>(i)) || n.op_type != "Identity" || !n.domain.empty() || n.inputs.size() != 1 ||
          n.outputs.size() != 1 || n.inputs[0] < 0 || n.outputs[0] < 0 || g.IsGraphOutput(n.outputs[0]))
        continue;
      const Value& src = g.value(n.inputs[0]);
      if (!src.is_constant() || src.initializer->device() != DeviceType::kCpu) continue;
      lift(i, src.initializer->Clone());
      changed = true;
    }
  }
  if (!lifted.empty()) g.RemoveNodes(lifted);
}

// An outer value a subgraph reads that is a constant (an initializer of an enclosing graph, or a
// Constant node there, lifted) becomes an initializer of the subgraph itself, sharing the bytes:
// the passes then see the weights a Loop body or an If branch multiplies by as weights (TorchScript
// keeps a loop body's weights in the main graph; Silero VAD's nested branches read the LSTM
// weights their enclosing branch makes with Constant nodes). The node stops passing it in.
void InlineConstantCaptures(Graph& g) {
  for (Node& n : g.nodes()) {
    for (int j = n.implicit_inputs - 1; j >= 0; --j) {
      const size_t slot = n.explicit_inputs() + static_cast<size_t>(j);
      const int outer = n.inputs[slot];
      if (outer < 0 || !g.value(outer).is_constant()) continue;
      const Tensor& t = *g.value(outer).initializer;
      for (const auto& [name, sub] : n.attrs.Subgraphs()) {
        const size_t k = sub->formal_inputs() + static_cast<size_t>(j);
        Value& v = sub->value(sub->inputs()[k]);
        v.dtype = t.dtype();
        v.shape = ToSymShape(t.dims());
        v.initializer = t;
        sub->inputs().erase(sub->inputs().begin() + static_cast<std::ptrdiff_t>(k));
        --sub->outer_inputs;
      }
      n.inputs.erase(n.inputs.begin() + static_cast<std::ptrdiff_t>(slot));
      --n.implicit_inputs;
    }
  }
}

// One graph's ops and, recursively, its subgraphs' (If branches, Loop and Scan bodies): each
// graph's constants are lifted and handed down before its subgraphs are read.
Status ValidateGraphOps(Graph& g, const LoadOptions& opts) {
  WH_RETURN_IF_ERROR(ExpandContribOps(g));  // ONNX Runtime's contrib ops, as standard ops
  for (const Node& n : g.nodes()) WH_RETURN_IF_ERROR(ValidateNode(n, static_cast<int>(g.OpsetFor(n.domain))));
  if (opts.lift_constants) LiftConstantNodes(g);
  InlineConstantCaptures(g);
  for (const Node& n : g.nodes())
    for (const auto& [name, sub] : n.attrs.Subgraphs())
      WH_RETURN_IF_ERROR(ValidateGraphOps(*sub, opts).WithContext(n.DebugName() + ": attribute '" + name + "'"));
  return Status::Ok();
}

Status ValidateOps(Graph& g, const LoadOptions& opts) {
  WH_RETURN_IF_ERROR(CheckDefaultOpset(g));
  RegisterAllOps();
  WH_RETURN_IF_ERROR(ValidateGraphOps(g, opts));
  return InferShapes(g);  // subgraphs too, with their inputs bound (OpDef::infer_subgraphs)
}

StatusOr<Graph> ParseWithContext(const std::string& bytes, const std::string& base_dir, const LoadOptions& opts,
                                 const std::string& context) {
  // Graphs nested past the limit (If inside If ...) are refused before protobuf's recursive parse.
  if (const int depth = onnx_io::GraphNestingDepth(bytes); depth > onnx_io::kMaxSubgraphDepth)
    return InvalidArgument(context + ": subgraphs nest more than " + std::to_string(onnx_io::kMaxSubgraphDepth) +
                           " deep (If/Loop/Scan bodies inside one another)");
  onnx::ModelProto m;
  if (!onnx_io::ParseProtoBytes(bytes, &m))
    return InvalidArgument(context + ": cannot parse the ONNX protobuf (" + std::to_string(bytes.size()) +
                           " bytes): the file is truncated, corrupted or not an ONNX model");
  onnx_io::RewriteSequenceLoops(&m);  // TorchScript's lists appended in loops: scan outputs
  auto g = onnx_io::GraphFromModelProto(m, base_dir);
  if (!g.ok()) return g.status().WithContext(context);
  if (opts.validate_ops) {
    Status st = ValidateOps(*g, opts);
    if (!st.ok()) return st.WithContext(context);
  }
  return g;
}

// The model's tensors in bytes as they would be written inline: initializers and tensor-valued
// attributes.
int64_t InlineTensorBytes(const Graph& g) {
  int64_t total = 0;
  for (const Value& v : g.values())
    if (v.initializer) total += static_cast<int64_t>(v.initializer->nbytes());
  for (const Node& n : g.nodes())
    for (const auto& [name, a] : n.attrs.all()) {
      if (a.type == AttrType::kTensor) total += static_cast<int64_t>(a.t.nbytes());
      if (a.type == AttrType::kGraph && a.g) total += InlineTensorBytes(*a.g.get());
    }
  return total;
}
// Past this many tensor bytes a model with no threshold set is written with external data: the
// 2 GiB protobuf limit less room for the graph itself.
constexpr int64_t kAutoExternalBytes = int64_t{0x7fffffff} - (int64_t{64} << 20);

// The external-data locations the tensors of gp (and of its subgraphs, up to the loader's depth)
// name, resolved under base_dir.
void CollectExternalFiles(const onnx::GraphProto& gp, const std::string& base_dir, int depth,
                          std::set<std::string>* files) {
  auto tensor = [&](const onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    for (const auto& kv : t.external_data())
      if (kv.key() == "location") files->insert(base_dir + "/" + kv.value());
  };
  for (const auto& t : gp.initializer()) tensor(t);
  for (const auto& n : gp.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t()) tensor(a.t());
      for (const auto& t : a.tensors()) tensor(t);
      if (depth >= 16) continue;
      if (a.has_g()) CollectExternalFiles(a.g(), base_dir, depth + 1, files);
      for (const auto& sg : a.graphs()) CollectExternalFiles(sg, base_dir, depth + 1, files);
    }
}

}  // namespace

bool HasExternalData(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  auto total = ModelBytesOnDisk(path);
  return total.ok() && *total > static_cast<int64_t>(st.st_size);
}

StatusOr<int64_t> ModelBytesOnDisk(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return IoError("'" + path + "': " + std::strerror(errno));
  int64_t total = static_cast<int64_t>(st.st_size);
  if (st.st_size > (int64_t{256} << 20)) return total;
  auto bytes = onnx_io::ReadWholeFile(path, onnx_io::kMaxProtoBytes);
  if (!bytes.ok()) return bytes.status();
  onnx::ModelProto m;
  if (!onnx_io::ParseProtoBytes(*bytes, &m)) return InvalidArgument("'" + path + "' is not an ONNX model");
  std::set<std::string> files;
  CollectExternalFiles(m.graph(), onnx_io::DirName(path), 0, &files);
  for (const std::string& f : files)
    if (::stat(f.c_str(), &st) == 0) total += static_cast<int64_t>(st.st_size);
  return total;
}

StatusOr<Graph> LoadModel(const std::string& path, const LoadOptions& opts) {
  const std::string context = "loading '" + path + "'";
  auto bytes = onnx_io::ReadWholeFile(path, onnx_io::kMaxProtoBytes);
  if (!bytes.ok()) return bytes.status().WithContext(context);
  return ParseWithContext(*bytes, onnx_io::DirName(path), opts, context);
}

StatusOr<Graph> ParseModel(const std::string& bytes, const std::string& base_dir, const LoadOptions& opts) {
  return ParseWithContext(bytes, base_dir, opts, "parsing an in-memory model");
}

StatusOr<Tensor> LoadTensorProtoFile(const std::string& path, std::string* name) {
  const std::string context = "loading tensor '" + path + "'";
  auto bytes = onnx_io::ReadWholeFile(path, onnx_io::kMaxProtoBytes);
  if (!bytes.ok()) return bytes.status().WithContext(context);
  onnx::TensorProto tp;
  if (!onnx_io::ParseProtoBytes(*bytes, &tp))
    return InvalidArgument(context + ": cannot parse the TensorProto (" + std::to_string(bytes->size()) +
                           " bytes): the file is truncated, corrupted or not a tensor");
  auto t = onnx_io::TensorFromProto(tp, onnx_io::DirName(path), "tensor '" + tp.name() + "'");
  if (!t.ok()) return t.status().WithContext(context);
  if (name) *name = tp.name();
  return t;
}

namespace {

StatusOr<Tensor> SequenceFromProto(const onnx::SequenceProto& sp, const std::string& dir, const std::string& what) {
  if (sp.elem_type() != onnx::SequenceProto::TENSOR && sp.tensor_values_size() == 0 &&
      sp.elem_type() != onnx::SequenceProto::UNDEFINED)
    return Unimplemented(what + ": only sequences of tensors are supported");
  std::vector<Tensor> items;
  DType dt = DType::kUndefined;
  for (const onnx::TensorProto& tp : sp.tensor_values()) {
    WH_ASSIGN_OR_RETURN(Tensor t, onnx_io::TensorFromProto(tp, dir, what));
    if (dt != DType::kUndefined && t.dtype() != dt) return InvalidArgument(what + ": its elements differ in type");
    dt = t.dtype();
    items.push_back(std::move(t));
  }
  return Tensor::Sequence(dt, std::move(items));
}

}  // namespace

StatusOr<Tensor> LoadValueProtoFile(const std::string& path, ValueKind kind, std::string* name) {
  if (kind == ValueKind::kTensor) return LoadTensorProtoFile(path, name);
  const std::string context = "loading value '" + path + "'";
  auto bytes = onnx_io::ReadWholeFile(path, onnx_io::kMaxProtoBytes);
  if (!bytes.ok()) return bytes.status().WithContext(context);
  const std::string dir = onnx_io::DirName(path);
  if (kind == ValueKind::kSequence) {
    onnx::SequenceProto sp;
    if (!onnx_io::ParseProtoBytes(*bytes, &sp)) return InvalidArgument(context + ": cannot parse the SequenceProto");
    if (name) *name = sp.name();
    auto t = SequenceFromProto(sp, dir, "sequence '" + sp.name() + "'");
    if (!t.ok()) return t.status().WithContext(context);
    return t;
  }
  onnx::OptionalProto op;
  if (!onnx_io::ParseProtoBytes(*bytes, &op)) return InvalidArgument(context + ": cannot parse the OptionalProto");
  if (name) *name = op.name();
  StatusOr<Tensor> t = Tensor::NoValue();
  if (op.has_tensor_value()) t = onnx_io::TensorFromProto(op.tensor_value(), dir, "optional '" + op.name() + "'");
  else if (op.has_sequence_value()) t = SequenceFromProto(op.sequence_value(), dir, "optional '" + op.name() + "'");
  if (!t.ok()) return t.status().WithContext(context);
  return t;
}

StatusOr<std::unique_ptr<StagedModel>> StageModel(const Graph& g, const std::string& path, const SaveOptions& opts) {
  const std::string context = "saving '" + path + "'";
  const std::string base = onnx_io::BaseName(path);
  if (base.empty() || base == "." || base == "..") return InvalidArgument(context + ": not a file path");
  onnx_io::ExternalDataPlan plan;
  plan.location = base + ".data";
  plan.threshold = opts.external_data_threshold;
  if (plan.threshold < 0 && InlineTensorBytes(g) > kAutoExternalBytes) plan.threshold = kAutoExternalDataThreshold;
  onnx::ModelProto m;
  WH_RETURN_IF_ERROR(onnx_io::GraphToModelProto(g, &plan, &m).WithContext(context));
  if (m.ByteSizeLong() > onnx_io::kMaxProtoBytes)
    return InvalidArgument(context + ": the model would be " + std::to_string(m.ByteSizeLong()) +
                           " bytes, over the 2 GiB protobuf limit; write its tensors as external data "
                           "(a lower external_data_threshold, compress-model --external-data-threshold)");

  std::unique_ptr<StagedModel> staged(new StagedModel());
  staged->context_ = context;
  if (!plan.pieces.empty()) {
    staged->data_ = std::make_unique<AtomicFile>(onnx_io::DirName(path) + "/" + plan.location);
    AtomicFile& data = *staged->data_;
    WH_RETURN_IF_ERROR(data.Open().WithContext(context));
    int64_t pos = 0;
    for (const auto& piece : plan.pieces) {
      WH_RETURN_IF_ERROR(data.WriteZeros(static_cast<size_t>(piece.offset - pos)).WithContext(context));
      WH_RETURN_IF_ERROR(data.Write(piece.tensor->raw_data(), piece.tensor->nbytes()).WithContext(context));
      pos = piece.offset + static_cast<int64_t>(piece.tensor->nbytes());
    }
    staged->data_bytes_ = pos;
    WH_RETURN_IF_ERROR(data.Sync().WithContext(context));
  }
  staged->model_ = std::make_unique<AtomicFile>(path);
  AtomicFile& model = *staged->model_;
  WH_RETURN_IF_ERROR(model.Open().WithContext(context));
  {
    google::protobuf::io::FileOutputStream os(model.fd());
    if (!m.SerializeToZeroCopyStream(&os) || !os.Flush()) {
      errno = os.GetErrno();
      return model.ErrnoStatus("write").WithContext(context);
    }
    staged->file_bytes_ = os.ByteCount();
  }
  WH_RETURN_IF_ERROR(model.Sync().WithContext(context));
  return staged;
}

StagedModel::~StagedModel() = default;

Status StagedModel::Commit() {
  // The data file is renamed into place before the model so that a model at the target never
  // references data that is not there yet.
  if (data_) WH_RETURN_IF_ERROR(data_->Commit().WithContext(context_));
  Status st = model_->Commit();
  if (!st.ok()) {
    if (data_) ::unlink(data_->path().c_str());
    return st.WithContext(context_);
  }
  return Status::Ok();
}

Status SaveModel(const Graph& g, const std::string& path, const SaveOptions& opts) {
  WH_ASSIGN_OR_RETURN(std::unique_ptr<StagedModel> staged, StageModel(g, path, opts));
  return staged->Commit();
}

Status CheckModelWithOnnxChecker(const std::string& path) {
  try {
    onnx::checker::check_model(path);
  } catch (const std::exception& e) {
    return InvalidArgument("onnx::checker rejects '" + path + "': " + e.what());
  } catch (...) {
    return InvalidArgument("onnx::checker rejects '" + path + "' (unknown exception)");
  }
  return Status::Ok();
}

}  // namespace whittle
