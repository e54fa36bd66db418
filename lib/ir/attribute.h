// Node attributes as ONNX defines them (float, int, string, tensor and their lists).
// Types are validated against the OpDef's attribute spec at load time, so kernel-side getters
// may assume the type is right; they return the default when the attribute is absent.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/ir/tensor.h"

namespace whittle {

class Graph;

// A graph-valued attribute (If's branches, Loop's and Scan's body), held by value: copying it
// copies the graph, so a pass that edits a copied node's body never edits the original's.
class GraphBox {
 public:
  GraphBox();
  explicit GraphBox(Graph g);
  GraphBox(const GraphBox& o);
  GraphBox(GraphBox&& o) noexcept;
  GraphBox& operator=(const GraphBox& o);
  GraphBox& operator=(GraphBox&& o) noexcept;
  ~GraphBox();
  Graph* get() const { return g_.get(); }
  explicit operator bool() const { return g_ != nullptr; }

 private:
  std::unique_ptr<Graph> g_;
};

enum class AttrType { kUndefined = 0, kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5,
                      kFloats = 6, kInts = 7, kStrings = 8, kTensors = 9, kGraphs = 10, kType = 13 };
const char* AttrTypeName(AttrType t);

struct Attribute {
  AttrType type = AttrType::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  GraphBox g;  // kGraph
  // kType (Optional's `type`): a tensor or a sequence of tensors, of element type type_dtype.
  ValueKind type_kind = ValueKind::kTensor;
  DType type_dtype = DType::kUndefined;

  static Attribute GraphValue(Graph v);
  static Attribute Float(float v) { Attribute a; a.type = AttrType::kFloat; a.f = v; return a; }
  static Attribute Type(ValueKind kind, DType dtype) {
    Attribute a;
    a.type = AttrType::kType;
    a.type_kind = kind;
    a.type_dtype = dtype;
    return a;
  }
  static Attribute Int(int64_t v) { Attribute a; a.type = AttrType::kInt; a.i = v; return a; }
  static Attribute String(std::string v) { Attribute a; a.type = AttrType::kString; a.s = std::move(v); return a; }
  static Attribute TensorValue(Tensor v) { Attribute a; a.type = AttrType::kTensor; a.t = std::move(v); return a; }
  static Attribute Floats(std::vector<float> v) { Attribute a; a.type = AttrType::kFloats; a.floats = std::move(v); return a; }
  static Attribute Ints(std::vector<int64_t> v) { Attribute a; a.type = AttrType::kInts; a.ints = std::move(v); return a; }
  static Attribute Strings(std::vector<std::string> v) { Attribute a; a.type = AttrType::kStrings; a.strings = std::move(v); return a; }
};

class AttributeMap {
 public:
  bool Has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* Find(const std::string& name) const {
    auto it = map_.find(name);
    return it == map_.end() ? nullptr : &it->second;
  }
  void Set(const std::string& name, Attribute a) { map_[name] = std::move(a); }
  void Erase(const std::string& name) { map_.erase(name); }

  float GetFloat(const std::string& name, float def) const {
    auto* a = Find(name); return a && a->type == AttrType::kFloat ? a->f : def;
  }
  int64_t GetInt(const std::string& name, int64_t def) const {
    auto* a = Find(name); return a && a->type == AttrType::kInt ? a->i : def;
  }
  std::string GetString(const std::string& name, const std::string& def) const {
    auto* a = Find(name); return a && a->type == AttrType::kString ? a->s : def;
  }
  std::vector<int64_t> GetInts(const std::string& name, std::vector<int64_t> def = {}) const {
    auto* a = Find(name); return a && a->type == AttrType::kInts ? a->ints : def;
  }
  std::vector<float> GetFloats(const std::string& name, std::vector<float> def = {}) const {
    auto* a = Find(name); return a && a->type == AttrType::kFloats ? a->floats : def;
  }
  const Tensor* GetTensor(const std::string& name) const {
    auto* a = Find(name); return a && a->type == AttrType::kTensor ? &a->t : nullptr;
  }
  // The subgraph held by a graph attribute, or nullptr.
  Graph* GetGraph(const std::string& name) const {
    auto* a = Find(name); return a && a->type == AttrType::kGraph ? a->g.get() : nullptr;
  }
  // Every graph attribute's subgraph, by attribute name.
  std::vector<std::pair<std::string, Graph*>> Subgraphs() const {
    std::vector<std::pair<std::string, Graph*>> r;
    for (const auto& [k, a] : map_)
      if (a.type == AttrType::kGraph && a.g) r.emplace_back(k, a.g.get());
    return r;
  }

  const std::map<std::string, Attribute>& all() const { return map_; }

 private:
  std::map<std::string, Attribute> map_;
};

}  // namespace whittle
