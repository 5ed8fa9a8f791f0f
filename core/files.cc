#include "core/files.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <ftw.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

namespace flashcheck {
namespace {

int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  std::remove(path);  // files and (now empty, depth-first) directories alike
  return 0;
}

std::string kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a folder";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// Closes a descriptor on every path out of a function.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string parent_of(const std::string& path) {
  const std::string p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

}  // namespace

std::string read_input_file(const std::string& path, std::int64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (f.fd < 0) {
    const int e = errno;
    if (e == ENOENT) throw InputError(path, "", "no such file");
    if (e == ELOOP) throw InputError(path, "", "too many levels of symbolic links (a symlink loop)");
    throw InputError(path, "", std::string("cannot open file: ") + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw InputError(path, "", std::string("cannot stat file: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw InputError(path, "", "not a regular file: it is " + kind_of(st.st_mode));
  if (st.st_size > max_bytes)
    throw InputError(path, "", fmt::format("file is {} bytes; the limit is {}", st.st_size, max_bytes));
  std::string bytes;
  bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      // A file that grew since fstat (or a /proc file that reports size 0): read on, within the limit.
      if (static_cast<std::int64_t>(bytes.size()) >= max_bytes) {
        char probe;
        const ssize_t n = ::read(f.fd, &probe, 1);
        if (n > 0) throw InputError(path, "", fmt::format("file is larger than the limit of {} bytes", max_bytes));
        break;
      }
      bytes.resize(std::min<std::size_t>(static_cast<std::size_t>(max_bytes), bytes.size() + 65536));
    }
    const ssize_t n = ::read(f.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw InputError(path, "", std::string("read failed: ") + std::strerror(errno));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

bool write_file_atomic(const std::string& path, std::string_view bytes, Overwrite mode, bool durable) {
  static std::atomic<unsigned> serial{0};
  const std::string tmp = fmt::format("{}.tmp-{}-{}", path, ::getpid(), serial++);
  auto fail = [&](const std::string& what, int e) -> bool {
    ::unlink(tmp.c_str());
    throw OutputError(path, fmt::format("{}: {}", what, std::strerror(e)));
  };
  {
    Fd f{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
    if (f.fd < 0) {
      const int e = errno;
      throw OutputError(path, fmt::format("cannot create a file in {}: {}", parent_of(path), std::strerror(e)));
    }
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::write(f.fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return fail("write failed", n < 0 ? errno : ENOSPC);
      done += static_cast<std::size_t>(n);
    }
    if (durable && ::fsync(f.fd) != 0) return fail("fsync failed", errno);
    const int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) return fail("close failed", errno);
  }
  if (mode == Overwrite::kReplace) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("rename failed", errno);
  } else {
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      const int e = errno;
      ::unlink(tmp.c_str());
      if (e == EEXIST) return false;
      throw OutputError(path, fmt::format("cannot create file: {}", std::strerror(e)));
    }
    ::unlink(tmp.c_str());
  }
  if (durable) {  // the rename itself survives a crash of the machine only once the folder is synced
    Fd dir{::open(parent_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (dir.fd >= 0) ::fsync(dir.fd);
  }
  return true;
}

void check_replaceable(const std::string& path, const std::function<bool(std::string_view head)>& ours, bool force) {
  if (force) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there
  const char* again = "; move it away, choose another --out, or pass --force to replace it";
  if (!S_ISREG(st.st_mode))
    throw OutputError(path, fmt::format("is {}, not a file this command wrote{}", S_ISLNK(st.st_mode) ? "a symbolic link" : kind_of(st.st_mode), again));
  std::string head(64 * 1024, '\0');
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)};
  ssize_t n = f.fd < 0 ? -1 : ::read(f.fd, head.data(), head.size());
  head.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  if (n < 0 || !ours(head)) throw OutputError(path, fmt::format("exists and was not written by this command{}", again));
}

FolderLock::FolderLock(const std::string& dir, const std::string& name, const std::string& what) {
  const std::string path = (std::filesystem::path(dir) / name).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) {
    const int e = errno;
    throw OutputError(path, fmt::format("cannot open the folder's lock: {}", std::strerror(e)));
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
    throw OutputError(dir, fmt::format("another {} is writing into this folder (it holds {}); give this one another --out", what, name));
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

void ensure_output_dir(const std::string& dir) {
  if (dir.empty()) throw OutputError(dir, "the output folder is an empty path");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int e = errno;
    throw OutputError(dir, fmt::format("cannot create the output folder: {}", ec ? ec.message() : std::strerror(e)));
  }
  if (!S_ISDIR(st.st_mode))
    throw OutputError(dir, fmt::format("the output folder is {}, not a folder", S_ISREG(st.st_mode) ? "a file" : kind_of(st.st_mode)));
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw OutputError(dir, fmt::format("the output folder is not writable: {}", std::strerror(errno)));
}

std::string move_aside(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return "";
  for (int n = 1; n < 100000; ++n) {
    const std::string to = fmt::format("{}.kept-{}", path, n);
    if (::link(path.c_str(), to.c_str()) == 0) {
      ::unlink(path.c_str());
      return to;
    }
    if (errno != EEXIST) throw OutputError(path, fmt::format("cannot keep the earlier file as {}: {}", to, std::strerror(errno)));
  }
  throw OutputError(path, "cannot find a free name to keep the earlier file");
}

std::string installed_path(const std::string& relative) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const std::filesystem::path p = exe.parent_path().parent_path() / relative;
  return std::filesystem::exists(p, ec) ? p.string() : "";
}

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void remove_file(const std::string& path) { std::remove(path.c_str()); }

void remove_tree(const std::string& path) { ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

}  // namespace flashcheck
