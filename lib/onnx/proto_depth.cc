// GraphNestingDepth (proto_convert.h): a scan of the protobuf wire format that follows only the
// fields through which graphs nest, so the nesting depth of a model is known before protobuf's
// recursive parser (whose own limit, 100 message levels, would end in "cannot parse") and before
// anything that recurses over subgraphs.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/onnx/proto_convert.h"

namespace whittle::onnx_io {
namespace {

enum class Msg { kModel, kFunction, kGraph, kNode, kAttribute };

// The message a length-delimited field opens, or nullopt-like kModel (= not followed).
bool Follow(Msg in, uint32_t field, Msg* out) {
  switch (in) {
    case Msg::kModel:  // ModelProto.graph = 7, .functions = 25
      if (field == 7) return *out = Msg::kGraph, true;
      if (field == 25) return *out = Msg::kFunction, true;
      return false;
    case Msg::kFunction:  // FunctionProto.node = 7
      return field == 7 ? (*out = Msg::kNode, true) : false;
    case Msg::kGraph:  // GraphProto.node = 1
      return field == 1 ? (*out = Msg::kNode, true) : false;
    case Msg::kNode:  // NodeProto.attribute = 5
      return field == 5 ? (*out = Msg::kAttribute, true) : false;
    case Msg::kAttribute:  // AttributeProto.g = 6, .graphs = 11
      return field == 6 || field == 11 ? (*out = Msg::kGraph, true) : false;
  }
  return false;
}

bool ReadVarint(const uint8_t* p, size_t end, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= end) return false;
    const uint8_t b = p[(*pos)++];
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

}  // namespace

int GraphNestingDepth(const std::string& bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  struct Frame {
    Msg msg;
    size_t end;
    int graphs;  // subgraph levels open: the main graph is 0, an If branch in it 1
  };
  std::vector<Frame> stack{{Msg::kModel, bytes.size(), -1}};
  int deepest = 0;
  size_t pos = 0;
  while (true) {
    while (!stack.empty() && pos >= stack.back().end) {
      if (pos > stack.back().end) return -1;  // a field ran past its message
      stack.pop_back();
    }
    if (stack.empty()) return deepest;
    uint64_t key = 0, v = 0;
    if (!ReadVarint(p, stack.back().end, &pos, &key)) return -1;
    const uint32_t field = static_cast<uint32_t>(key >> 3);
    switch (key & 7) {
      case 0:  // varint
        if (!ReadVarint(p, stack.back().end, &pos, &v)) return -1;
        break;
      case 1:  // fixed64
        pos += 8;
        break;
      case 5:  // fixed32
        pos += 4;
        break;
      case 2: {  // length-delimited
        if (!ReadVarint(p, stack.back().end, &pos, &v) || v > stack.back().end - pos) return -1;
        Msg sub;
        if (Follow(stack.back().msg, field, &sub)) {
          const int graphs = stack.back().graphs + (sub == Msg::kGraph ? 1 : 0);
          deepest = std::max(deepest, graphs);
          if (deepest > kMaxSubgraphDepth) return deepest;
          stack.push_back({sub, pos + v, graphs});
        } else {
          pos += v;
        }
        break;
      }
      default:  // groups (deprecated, unused by ONNX) and invalid wire types
        return -1;
    }
  }
}

}  // namespace whittle::onnx_io
