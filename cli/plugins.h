// Kernels from outside: plugins named with --plugin or FLASHCHECK_PLUGINS, and kernels resolved by name
// on first use (`py:package.module:function` through the Python bridge, or any plugin with a resolver).
#pragma once

#include <string>
#include <vector>

namespace flashcheck::cli {

// Loads the plugins (the command line's, then the environment's) into the registry and registers the
// resolvers. Prints the problem and returns false on a bad plugin.
bool load_plugins(const std::vector<std::string>& paths);

// Where the Python bridge imports kernels from: FLASHCHECK_PYTHONPATH as load_plugins() leaves it (the project's own
// kernels first), then the working directory.
std::vector<std::string> python_kernel_search_path();

}  // namespace flashcheck::cli
