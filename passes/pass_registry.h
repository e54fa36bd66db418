// The passes compress-model offers, by flag name: one table (pass_registry.cc), one row per pass.
// Adding a pass is its own folder plus one row; the CLI builds its flags and help from
// PassNames()/PassHelp().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

// A registry row: the flag name, its --help text, and the factory from parsed options.
struct PassEntry {
  const char* name;
  const char* (*help)();
  StatusOr<std::unique_ptr<Pass>> (*make)(PassOptions options);
};

// Flag names in the order --help lists them ("svd", "prune", ...).
std::vector<std::string> PassNames();
const char* PassHelp(const std::string& name);
// Builds the named pass from its (merged) options; NotFound for an unknown name.
StatusOr<std::unique_ptr<Pass>> MakePass(const std::string& name, PassOptions options);

}  // namespace whittle
