#include "cli/project_files.h"

#include <filesystem>

#include "core/files.h"

namespace flashcheck::cli {

std::string find_project_file(const std::string& installed, const std::string& in_source) {
  namespace fs = std::filesystem;
  if (std::string path = installed_path(installed); !path.empty()) return path;
  for (const fs::path& p : {fs::path(in_source), fs::path(FLASHCHECK_SOURCE_DIR) / in_source})
    if (fs::exists(p)) return p.string();
  return "";
}

}  // namespace flashcheck::cli
