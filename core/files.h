// File removal without std::filesystem::remove/remove_all: the CUDA build's libtorch.so exports its own
// copies of those symbols, and its remove_all jumps through a null pointer when our code binds to it
// (seen with torch 2.11.0+cu130). These go straight to libc.
#pragma once

#include <string>

namespace flashcheck {

// Removes a file if it exists; never throws.
void remove_file(const std::string& path);
// Removes a directory tree if it exists; never throws.
void remove_tree(const std::string& path);

}  // namespace flashcheck
