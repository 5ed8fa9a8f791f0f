// Every file the harness reads as input or writes as output goes through here: inputs are read only when
// they are regular files within a size limit (never /dev/zero, a FIFO or a folder), outputs are written
// atomically with every write checked, so that a full disk or a killed process leaves the previous file or
// the new one, never half of one, and nothing a user wrote is replaced unless the caller says so.
//
// File removal does not use std::filesystem::remove/remove_all: the CUDA build's libtorch.so exports its own
// copies of those symbols, and its remove_all jumps through a null pointer when our code binds to it (seen
// with torch 2.11.0+cu130). These go straight to libc.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace flashcheck {

// The bytes of the regular file `path`, of at most `max_bytes`. Throws InputError(path, "", reason) for a
// missing file, a folder, a device, a FIFO or socket (opened without blocking, so it cannot hang), a
// symlink loop, an unreadable file, or one larger than the limit.
std::string read_input_file(const std::string& path, std::int64_t max_bytes);

enum class Overwrite { kReplace, kKeep };

// Writes `bytes` to `path` through a temporary file in the same folder: every write checked, then fsync
// (when `durable`), then an atomic rename over `path` (kReplace) or a link that fails when `path` exists
// (kKeep: returns false and leaves the existing file alone). Throws OutputError naming the path and the
// system's reason (no space left, read-only, not a folder); the temporary is removed and `path` untouched.
bool write_file_atomic(const std::string& path, std::string_view bytes, Overwrite mode = Overwrite::kReplace,
                       bool durable = true);

// Refuses to replace what the command did not write: throws OutputError naming `path` when something is there that
// is not a regular file (a link, even to a file of ours; a folder, a FIFO) or is a file `ours` does not recognize from
// its first bytes (up to 64 KiB) -- a user's summary.md in the folder given as --out. Nothing there, or `force`: fine.
void check_replaceable(const std::string& path, const std::function<bool(std::string_view head)>& ours, bool force);

// Creates the output folder `dir` (and its parents). Throws OutputError when it cannot be a writable folder:
// the path is a file or a device (/dev/null), lies under a file, or is read-only.
void ensure_output_dir(const std::string& dir);

// Moves an existing file to a free name "<path>.kept-<n>" (never replacing anything) and returns that name;
// "" when there is no such file. Throws OutputError when it exists but cannot be moved.
std::string move_aside(const std::string& path);

// Holds an exclusive lock on DIR/`name` (flock, released when the process ends however it ends) while a command
// writes into DIR: two runs with one output folder would interleave their files (two fuzz runs saved crashes under
// each other's cases). Throws OutputError naming the folder when another process holds it; `what` says which
// command, for that message.
class FolderLock {
 public:
  FolderLock(const std::string& dir, const std::string& name, const std::string& what);
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_ = -1;
};

// Whether something (a file, a folder, a dangling link) exists at `path`.
bool path_exists(const std::string& path);

// A file or folder installed with the running executable: <prefix>/<relative> for <prefix>/bin/flashcheck (a
// `cmake --install` prefix, or the Python package's folder), or "" when it is not there (a build tree's executable).
std::string installed_path(const std::string& relative);

// Removes a file if it exists; never throws.
void remove_file(const std::string& path);
// Removes a directory tree if it exists; never throws.
void remove_tree(const std::string& path);

}  // namespace flashcheck
