#include "cli/python_worker.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace flashcheck::cli {

PythonWorker::PythonWorker(const std::vector<std::string>& argv) {
  int in[2], out[2];
  if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error(fmt::format("pipe: {}", std::strerror(errno)));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  for (int fd : {in[0], in[1], out[0], out[1]}) posix_spawn_file_actions_addclose(&fa, fd);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawnp(&pid_, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    throw std::runtime_error(fmt::format("cannot start {}: {}", argv[0], std::strerror(rc)));
  }
  to_ = ::fdopen(in[1], "w");
  from_ = ::fdopen(out[0], "r");
}

PythonWorker::~PythonWorker() {
  if (to_) std::fclose(to_);  // end of input: the program's loop ends
  if (from_) std::fclose(from_);
  if (pid_ > 0) {
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

std::optional<nlohmann::json> PythonWorker::read() {
  std::string line;
  for (int c; (c = std::fgetc(from_)) != EOF && c != '\n';) line.push_back(static_cast<char>(c));
  if (line.empty()) {
    error_ = "the worker exited without answering";
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    error_ = fmt::format("the worker printed something that is not JSON ({}): {:.200}", e.what(), line);
    return std::nullopt;
  }
}

std::optional<nlohmann::json> PythonWorker::request(const nlohmann::json& j) {
  const std::string line = j.dump() + "\n";
  if (std::fputs(line.c_str(), to_) < 0 || std::fflush(to_) != 0) {
    error_ = "the worker closed its input";
    return std::nullopt;
  }
  return read();
}

}  // namespace flashcheck::cli
