#include "lib/ops/schema_compat.h"

#include <vector>

namespace whittle {
namespace {

struct OpVersion {
  const char* op;
  int since;
  const char* change;  // from the previous version; "" = compatible
};

const OpVersion kHistory[] = {
#include "lib/ops/op_history.inc"
};

}  // namespace

bool OpUnchangedBetween(const std::string& op, int64_t from, int64_t to, std::string* why) {
  std::vector<const OpVersion*> versions;
  for (const OpVersion& v : kHistory)
    if (op == v.op) versions.push_back(&v);
  const OpVersion* prev = nullptr;
  for (const OpVersion* v : versions)
    if (v->since <= from) prev = v;
  if (!prev) {
    *why = op + ": no ONNX schema at opset " + std::to_string(from);
    return false;
  }
  for (const OpVersion* v : versions) {
    if (v->since <= from || v->since > to) continue;
    if (v->change[0] != '\0') {
      *why = op + " " + std::to_string(prev->since) + " -> " + std::to_string(v->since) + ": " + v->change;
      return false;
    }
    prev = v;
  }
  return true;
}

}  // namespace whittle
