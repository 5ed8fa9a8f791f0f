// A Python program started as a child process and spoken to one JSON object per line: requests on its stdin,
// replies on its stdout (its stderr passes through). `flashcheck hf-live` drives tools/hf_live/live.py with it.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace flashcheck::cli {

class PythonWorker {
 public:
  // Starts `argv` (argv[0] is looked up on PATH when it has no '/'); throws std::runtime_error when it cannot.
  explicit PythonWorker(const std::vector<std::string>& argv);
  ~PythonWorker();
  PythonWorker(const PythonWorker&) = delete;
  PythonWorker& operator=(const PythonWorker&) = delete;

  // The next line the program prints, parsed; nullopt when it exits or prints something that is not JSON
  // (`error` then says what happened).
  std::optional<nlohmann::json> read();
  // Sends one request and waits for its reply.
  std::optional<nlohmann::json> request(const nlohmann::json& j);
  const std::string& error() const { return error_; }

 private:
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
  std::string error_;
};

}  // namespace flashcheck::cli
