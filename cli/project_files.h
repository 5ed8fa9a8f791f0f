// Files the project ships beside the executable (scripts, templates): where an installed flashcheck keeps them, or
// the checkout a build runs from.
#pragma once

#include <string>

namespace flashcheck::cli {

// `installed` under the install prefix (share/flashcheck/...) when this executable is installed, else `in_source`
// relative to the working directory or to this build's source tree; "" when none exists.
std::string find_project_file(const std::string& installed, const std::string& in_source);

}  // namespace flashcheck::cli
