// A structure-aware mutator for the model targets (fuzz_model_load_run, fuzz_passes): libFuzzer
// calls LLVMFuzzerCustomMutator for every new input. Half the time, or when the bytes are not a
// ModelProto, it leaves the work to libFuzzer's byte mutations (LLVMFuzzerMutate); otherwise it
// parses the model and makes one to three edits that byte flips rarely make and that a hostile
// model would: a dim set to 0, -1, 2^31 or 2^40 (inputs, outputs, value_info, initializers), a
// dtype changed, an attribute's value, type or presence changed (ints to huge or negative, floats
// to NaN or infinity, lists grown or emptied), a node input pointed at another value (cycles,
// self-loops, graph outputs, names that do not exist) or an op type swapped, a tensor's data
// truncated or its values changed (the shape tensors of Reshape/Expand/Tile/ConstantOfShape),
// a subgraph attached (the main graph as an If branch, nested), and initializers moved to
// external data with hostile entries (locations outside the folder, a symlink, a folder,
// offsets and lengths past the end). The targets give the loader a scratch folder with files
// these locations name (fuzz_util.h, ScratchModelDir).
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::mt19937;

template <typename T>
T Pick(Rng& rng, const std::vector<T>& v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}
size_t Below(Rng& rng, size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

int64_t InterestingInt(Rng& rng) {
  static const std::vector<int64_t> v = {0,  1,  2,  3,  -1, -2, 7, 64, 255, 1 << 16, int64_t{1} << 31,
                                         (int64_t{1} << 31) - 1, int64_t{1} << 32, int64_t{1} << 40,
                                         int64_t{1} << 62, std::numeric_limits<int64_t>::max(),
                                         std::numeric_limits<int64_t>::min()};
  return Pick(rng, v);
}

float InterestingFloat(Rng& rng) {
  static const std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-30f, 1e30f, 3.4e38f,
                                       std::numeric_limits<float>::infinity(),
                                       -std::numeric_limits<float>::infinity(),
                                       std::numeric_limits<float>::quiet_NaN(), 1e-45f};
  return Pick(rng, v);
}

// Every value name the graph mentions (inputs, outputs, initializers, node outputs).
std::vector<std::string> ValueNames(const onnx::GraphProto& g) {
  std::vector<std::string> names;
  for (const auto& v : g.input()) names.push_back(v.name());
  for (const auto& v : g.output()) names.push_back(v.name());
  for (const auto& t : g.initializer()) names.push_back(t.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) names.push_back(o);
  return names;
}

onnx::TensorShapeProto* AnyShape(onnx::GraphProto& g, Rng& rng) {
  std::vector<onnx::ValueInfoProto*> vis;
  for (auto& v : *g.mutable_input()) vis.push_back(&v);
  for (auto& v : *g.mutable_output()) vis.push_back(&v);
  for (auto& v : *g.mutable_value_info()) vis.push_back(&v);
  if (vis.empty()) return nullptr;
  onnx::ValueInfoProto* v = vis[Below(rng, vis.size())];
  return v->mutable_type()->mutable_tensor_type()->mutable_shape();
}

void MutateDims(onnx::GraphProto& g, Rng& rng) {
  if (g.initializer_size() > 0 && rng() % 3 == 0) {
    onnx::TensorProto& t = *g.mutable_initializer(static_cast<int>(Below(rng, g.initializer_size())));
    if (t.dims_size() == 0 || rng() % 4 == 0) t.add_dims(InterestingInt(rng));
    else t.set_dims(static_cast<int>(Below(rng, t.dims_size())), InterestingInt(rng));
    return;
  }
  onnx::TensorShapeProto* s = AnyShape(g, rng);
  if (s == nullptr) return;
  switch (rng() % 4) {
    case 0: s->add_dim()->set_dim_value(InterestingInt(rng)); break;
    case 1: if (s->dim_size() > 0) s->mutable_dim()->RemoveLast(); break;
    case 2: if (s->dim_size() > 0) s->mutable_dim(static_cast<int>(Below(rng, s->dim_size())))->set_dim_param("N"); break;
    default:
      if (s->dim_size() > 0) s->mutable_dim(static_cast<int>(Below(rng, s->dim_size())))->set_dim_value(InterestingInt(rng));
  }
}

void MutateDtype(onnx::GraphProto& g, Rng& rng) {
  const int32_t code = static_cast<int32_t>(rng() % 26) - 1;  // -1 .. 24: every code and a few bad ones
  if (g.initializer_size() > 0 && rng() % 2 == 0) {
    g.mutable_initializer(static_cast<int>(Below(rng, g.initializer_size())))->set_data_type(code);
    return;
  }
  std::vector<onnx::ValueInfoProto*> vis;
  for (auto& v : *g.mutable_input()) vis.push_back(&v);
  for (auto& v : *g.mutable_output()) vis.push_back(&v);
  if (!vis.empty()) vis[Below(rng, vis.size())]->mutable_type()->mutable_tensor_type()->set_elem_type(code);
}

void MutateAttribute(onnx::GraphProto& g, Rng& rng) {
  if (g.node_size() == 0) return;
  onnx::NodeProto& n = *g.mutable_node(static_cast<int>(Below(rng, g.node_size())));
  if (n.attribute_size() == 0 || rng() % 8 == 0) {
    static const std::vector<std::string> names = {"axis", "axes", "perm", "pads", "strides", "kernel_shape",
                                                   "dilations", "group", "to", "value", "keepdims", "alpha",
                                                   "epsilon", "mode", "block_size", "split", "num_outputs"};
    onnx::AttributeProto* a = n.add_attribute();
    a->set_name(Pick(rng, names));
    a->set_type(onnx::AttributeProto::INTS);
    for (int i = 0, k = static_cast<int>(rng() % 5); i < k; ++i) a->add_ints(InterestingInt(rng));
    return;
  }
  onnx::AttributeProto& a = *n.mutable_attribute(static_cast<int>(Below(rng, n.attribute_size())));
  switch (rng() % 7) {
    case 0: a.set_i(InterestingInt(rng)); break;
    case 1: a.set_f(InterestingFloat(rng)); break;
    case 2:
      if (a.ints_size() > 0) a.set_ints(static_cast<int>(Below(rng, a.ints_size())), InterestingInt(rng));
      else a.add_ints(InterestingInt(rng));
      break;
    case 3: if (a.ints_size() > 0) a.mutable_ints()->RemoveLast(); else a.add_ints(InterestingInt(rng)); break;
    case 4: a.set_type(static_cast<onnx::AttributeProto::AttributeType>(rng() % 15)); break;
    case 5: n.mutable_attribute()->DeleteSubrange(static_cast<int>(Below(rng, n.attribute_size())), 1); break;
    default:
      if (a.has_t() && a.t().dims_size() > 0) a.mutable_t()->set_dims(0, InterestingInt(rng));
      else if (a.has_t()) a.mutable_t()->add_dims(InterestingInt(rng));
      else a.add_floats(InterestingFloat(rng));
  }
}

void MutateNodeInputs(onnx::GraphProto& g, Rng& rng) {
  if (g.node_size() == 0) return;
  onnx::NodeProto& n = *g.mutable_node(static_cast<int>(Below(rng, g.node_size())));
  const std::vector<std::string> names = ValueNames(g);
  switch (rng() % 6) {
    case 0:  // another value, possibly a later node's output (a cycle) or its own (a self-loop)
      if (n.input_size() > 0 && !names.empty()) n.set_input(static_cast<int>(Below(rng, n.input_size())), Pick(rng, names));
      break;
    case 1: if (n.input_size() > 0) n.set_input(static_cast<int>(Below(rng, n.input_size())), rng() % 2 ? "" : "no_such_value"); break;
    case 2: if (n.input_size() > 0) n.mutable_input()->RemoveLast(); break;
    case 3: if (!names.empty()) n.add_input(Pick(rng, names)); break;
    case 4: n.set_op_type(g.node(static_cast<int>(Below(rng, g.node_size()))).op_type()); break;
    default:  // an output renamed to an existing name (two producers) or an input's
      if (n.output_size() > 0 && !names.empty()) n.set_output(static_cast<int>(Below(rng, n.output_size())), Pick(rng, names));
  }
}

void MutateTensorData(onnx::GraphProto& g, Rng& rng) {
  std::vector<onnx::TensorProto*> ts;
  for (auto& t : *g.mutable_initializer()) ts.push_back(&t);
  for (auto& n : *g.mutable_node())
    for (auto& a : *n.mutable_attribute())
      if (a.has_t()) ts.push_back(a.mutable_t());
  if (ts.empty()) return;
  onnx::TensorProto& t = *ts[Below(rng, ts.size())];
  if (t.has_raw_data() && !t.raw_data().empty()) {
    std::string& raw = *t.mutable_raw_data();
    switch (rng() % 3) {
      case 0: raw.resize(Below(rng, raw.size())); break;  // truncated
      case 1: raw.append(Below(rng, 64) + 1, '\x7f'); break;  // too long
      default: {  // an int64 or float element set to an interesting value
        if (raw.size() >= 8 && rng() % 2) {
          const int64_t v = InterestingInt(rng);
          std::memcpy(&raw[Below(rng, raw.size() / 8) * 8], &v, 8);
        } else if (raw.size() >= 4) {
          const float f = InterestingFloat(rng);
          std::memcpy(&raw[Below(rng, raw.size() / 4) * 4], &f, 4);
        }
      }
    }
    return;
  }
  if (t.int64_data_size() > 0) t.set_int64_data(static_cast<int>(Below(rng, t.int64_data_size())), InterestingInt(rng));
  else if (t.float_data_size() > 0) t.set_float_data(static_cast<int>(Below(rng, t.float_data_size())), InterestingFloat(rng));
  else if (t.int32_data_size() > 0) t.set_int32_data(static_cast<int>(Below(rng, t.int32_data_size())), static_cast<int32_t>(InterestingInt(rng)));
  else t.add_int64_data(InterestingInt(rng));
}

// Attaches the graph itself (as it is now) as a branch of a new If node, once or nested.
void AddSubgraph(onnx::GraphProto& g, Rng& rng) {
  onnx::GraphProto body = g;
  for (int level = 0, levels = 1 + static_cast<int>(rng() % 3); level < levels; ++level) {
    onnx::GraphProto outer;
    onnx::NodeProto* n = outer.add_node();
    n->set_op_type(rng() % 4 ? "If" : (rng() % 2 ? "Loop" : "Scan"));
    n->add_input(g.input_size() > 0 ? g.input(0).name() : "cond");
    n->add_output(body.output_size() > 0 ? body.output(0).name() : "y");
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(rng() % 2 ? "then_branch" : "body");
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body;
    *outer.mutable_output() = body.output();
    body = outer;
  }
  *g.add_node() = body.node(0);
}

// Moves an initializer's bytes to "external data" with hostile entries. The target's scratch
// folder holds w.bin (4096 bytes), sub/w.bin (64 bytes), a folder dir/ and a symlink link.bin.
void MakeExternal(onnx::GraphProto& g, Rng& rng) {
  if (g.initializer_size() == 0) return;
  onnx::TensorProto& t = *g.mutable_initializer(static_cast<int>(Below(rng, g.initializer_size())));
  static const std::vector<std::string> locations = {"w.bin", "sub/w.bin", "./w.bin", "dir", "link.bin", "missing.bin",
                                                     "../w.bin", "/etc/passwd", "/dev/zero", "sub/../w.bin", "", "w.bin\n"};
  static const std::vector<std::string> numbers = {"0", "4", "16", "4096", "4097", "-1", "18446744073709551615",
                                                   "9223372036854775807", "1e3", " 4", "0x10"};
  if (rng() % 4 != 0) t.clear_raw_data(), t.clear_float_data(), t.clear_int64_data(), t.clear_int32_data();
  if (rng() % 8 != 0) t.set_data_location(onnx::TensorProto::EXTERNAL);
  t.clear_external_data();
  auto add = [&](const std::string& k, const std::string& v) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  if (rng() % 8 != 0) add("location", Pick(rng, locations));
  if (rng() % 2) add("offset", Pick(rng, numbers));
  if (rng() % 2) add("length", Pick(rng, numbers));
  if (rng() % 8 == 0) add(rng() % 2 ? "location" : "checksum", Pick(rng, locations));
}

size_t Structured(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  onnx::ModelProto m;
  if (!m.ParseFromArray(data, static_cast<int>(size)) || !m.has_graph()) return 0;
  Rng rng(seed);
  onnx::GraphProto& g = *m.mutable_graph();
  for (int i = 0, edits = 1 + static_cast<int>(rng() % 3); i < edits; ++i) {
    switch (rng() % 16) {
      case 0: case 1: case 2: MutateDims(g, rng); break;
      case 3: MutateDtype(g, rng); break;
      case 4: case 5: case 6: MutateAttribute(g, rng); break;
      case 7: case 8: MutateNodeInputs(g, rng); break;
      case 9: case 10: case 11: MutateTensorData(g, rng); break;
      case 12: AddSubgraph(g, rng); break;
      case 13: MakeExternal(g, rng); break;
      case 14:
        if (m.opset_import_size() > 0) m.mutable_opset_import(0)->set_version(InterestingInt(rng) % 30);
        break;
      default:
        if (g.node_size() > 1) g.mutable_node()->SwapElements(static_cast<int>(Below(rng, g.node_size())),
                                                             static_cast<int>(Below(rng, g.node_size())));
    }
  }
  std::string out;
  if (!m.SerializeToString(&out) || out.size() > max_size) return 0;
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  if (seed % 2 == 0) {
    if (const size_t n = Structured(data, size, max_size, seed)) return n;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}
