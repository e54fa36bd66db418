// Which layers a pass works on, the same for every pass: `exclude=NAME,...` leaves nodes alone and
// `layer=NAME:key=value[:key=value]` overrides settings for one node (each pass reads its own
// override keys from PassOptions::layers()). Names are checked against the model when the pass
// runs, so a typo is an error naming every unknown name instead of a silent no-op.
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
  // Reads exclude= (an empty name is an error) and notes the names given with layer=.
  static StatusOr<LayerSelection> Parse(PassOptions& o);

  bool excluded(const std::string& node) const { return exclude_set_.count(node) != 0; }
  const std::vector<std::string>& exclude() const { return exclude_; }

  // Every exclude=/layer= name must be a node of g; with op_types, a node of one of those types.
  // The error names each unknown name with the option that gave it ("'fc9' (exclude=)") and,
  // when restricted to op types, lists the nodes that would qualify.
  Status Check(const Graph& g, const std::set<std::string>& op_types = {}) const;

 private:
  std::string pass_;
  std::vector<std::string> exclude_, layer_names_;
  std::set<std::string> exclude_set_;
};

}  // namespace whittle
