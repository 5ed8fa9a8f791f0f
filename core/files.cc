#include "core/files.h"

#include <cstdio>
#include <ftw.h>

namespace flashcheck {
namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  std::remove(path);  // files and (now empty, depth-first) directories alike
  return 0;
}

}  // namespace

void remove_file(const std::string& path) { std::remove(path.c_str()); }

void remove_tree(const std::string& path) { ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

}  // namespace flashcheck
