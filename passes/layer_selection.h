// Which layers a pass works on, the same for every pass: `exclude=NAME,...` leaves nodes alone,
// `layer=NAME:skip=1` does the same for one node (in the passes that take it), and
// `layer=NAME:key=value[:key=value]` overrides settings for one node (each pass reads its own
// override keys from PassOptions::layers()). This is the one parser of exclude= and skip=. Names
// are checked against the model when the pass runs, so a typo is an error naming every unknown
// name instead of a silent no-op.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ir/status.h"
#include "passes/pass_options.h"

namespace whittle {

class LayerSelection {
 public:
  enum class Skip { kRefused, kAllowed };
  // Reads exclude= (an empty name is an error), notes the names given with layer=, and with
  // Skip::kAllowed reads each layer=NAME:skip=0|1 (refused, skip= is an unknown option that the
  // pass's PassOptions::Finish() names).
  static StatusOr<LayerSelection> Parse(PassOptions& o, Skip skip = Skip::kRefused);

  bool excluded(const std::string& node) const { return exclude_set_.count(node) != 0; }
  const std::vector<std::string>& exclude() const { return exclude_; }
  // Given layer=NAME:skip=1.
  bool skipped(const std::string& node) const { return skip_set_.count(node) != 0; }
  // Why the pass leaves `node` alone by these options: "excluded by exclude=", "skip=1 for this
  // layer", or "" when it does not.
  std::string LeftAloneReason(const std::string& node) const;

  // Every exclude=/layer= name must be a node of g; with op_types, a node of one of those types.
  // The error names each unknown name with the option that gave it ("'fc9' (exclude=)") and,
  // when restricted to op types, lists the nodes that would qualify.
  Status Check(const Graph& g, const std::set<std::string>& op_types = {}) const;

 private:
  std::string pass_;
  std::vector<std::string> exclude_, layer_names_;
  std::set<std::string> exclude_set_, skip_set_;
};

}  // namespace whittle
