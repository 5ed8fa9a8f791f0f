// For tests: a folder of the test's own, named after the test and the process (parallel ctest runs each test in
// its own process), emptied before use and removed after.
#pragma once

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <unistd.h>

#include "core/files.h"

namespace flashcheck::testing {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& prefix)
      : path(std::filesystem::temp_directory_path() /
             (prefix + "_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    remove_tree(path.string());
    std::filesystem::create_directories(path);
  }
  ~TempDir() { remove_tree(path.string()); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path.string(); }
  // Writes `text` to the file `name` in the folder; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

}  // namespace flashcheck::testing
