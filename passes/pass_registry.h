// The passes compress-model offers, by flag name. Adding a pass touches only this registry
// (and its own folder): the CLI builds its flags and help from PassNames()/PassHelp().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pass_options.h"

namespace whittle {

// Flag names in the order --help lists them ("svd", "prune", ...).
std::vector<std::string> PassNames();
const char* PassHelp(const std::string& name);
// Builds the named pass from its (merged) options; NotFound for an unknown name.
StatusOr<std::unique_ptr<Pass>> MakePass(const std::string& name, PassOptions options);

}  // namespace whittle
