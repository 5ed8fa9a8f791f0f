// The subcommands of the `flashcheck` executable. main.cc parses the command line (CLI11) into these
// option structs; each command lives in its own file and returns the process exit code:
// 0 success, 1 a check failed, 2 bad usage or input.
#pragma once

#include <string>
#include <vector>

namespace flashcheck::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct ListOptions {
  bool json = false;
  bool mutants = false;
};
int run_list(const ListOptions& o);

struct ReplayOptions {
  std::vector<std::string> paths;
  std::vector<std::string> kernels;  // empty: every kernel under test
  bool json = false;
  bool isolate = true;
  double timeout = 300;
};
int run_replay(const ReplayOptions& o);

}  // namespace flashcheck::cli
