#include "campaign/campaign_journal.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

namespace flashcheck {

nlohmann::json to_json(const ChunkRecord& r) {
  return {{"type", "chunk"},       {"unit", r.unit},         {"chunk", r.chunk},       {"kernel", r.kernel},
          {"property", r.property}, {"session", r.session},  {"worker", r.worker},     {"device", r.device},
          {"host", r.host},         {"started", r.started},  {"finished", r.finished}, {"crashed", r.crashed},
          {"report", to_json(r.report)}, {"stats", to_json(r.stats)}};
}

nlohmann::json to_json(const SessionRecord& r) {
  nlohmann::json j{{"type", r.end ? "end" : "session"}, {"session", r.session}, {"time", r.time}, {"host", r.host}};
  if (!r.end) j["workers"] = r.workers;
  return j;
}

namespace {

// What no campaign writes: a line with these is damaged or forged, and summing it would report work not done.
void check_counts(const ChunkRecord& r) {
  const FuzzReport& p = r.report;
  const auto bad = [](const std::string& what) { throw std::runtime_error("impossible chunk record: " + what); };
  if (r.unit < 0 || r.chunk < 0 || r.session < 0 || r.worker < 0) bad("a negative unit, chunk, session or worker");
  if (!std::isfinite(r.started) || !std::isfinite(r.finished) || r.finished < r.started) bad("it finished before it started");
  if (p.cases < 0 || p.failures < 0 || p.crashes < 0 || p.unsupported < 0) bad("a negative count of cases");
  if (!(p.seconds >= 0)) bad("negative seconds");
  if (p.failures > p.cases + p.crashes) bad(fmt::format("{} failures in {} cases", p.failures, p.cases + p.crashes));
  if (static_cast<std::int64_t>(p.findings.size()) > p.failures)
    bad(fmt::format("{} findings for {} failures", p.findings.size(), p.failures));
  for (const auto& [feature, n] : p.coverage)
    if (n < 0 || n > p.cases + p.unsupported + p.crashes) bad(fmt::format("coverage of {} is {} in {} cases", feature, n, p.cases));
}

ChunkRecord chunk_from_json(const nlohmann::json& j) {
  ChunkRecord r;
  r.unit = j.at("unit");
  r.chunk = j.at("chunk");
  r.kernel = j.at("kernel");
  r.property = j.at("property");
  r.session = j.at("session");
  r.worker = j.at("worker");
  r.device = j.at("device");
  r.host = j.at("host");
  r.started = j.at("started");
  r.finished = j.at("finished");
  r.crashed = j.at("crashed");
  r.report = fuzz_report_from_json(j.at("report"));
  r.stats = case_stats_from_json(j.at("stats"));
  check_counts(r);
  return r;
}

SessionRecord session_from_json(const nlohmann::json& j) {
  SessionRecord r;
  r.end = j.at("type") == "end";
  r.session = j.at("session");
  r.time = j.at("time");
  r.host = j.at("host");
  if (!r.end) r.workers = j.at("workers").get<std::vector<std::string>>();
  return r;
}

}  // namespace

double JournalContents::seconds_used() const {
  std::map<int, std::pair<double, double>> span;  // session -> (start, last time seen)
  for (const SessionRecord& s : sessions) {
    if (!s.end) span[s.session] = {s.time, s.time};
    else span[s.session].second = std::max(span[s.session].second, s.time);
  }
  for (const ChunkRecord& c : chunks)
    if (span.count(c.session)) span[c.session].second = std::max(span[c.session].second, c.finished);
  double total = 0;
  for (const auto& [session, s] : span) total += s.second - s.first;
  return total;
}

JournalContents read_journal(const std::string& path) {
  JournalContents out;
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(path, ec);
  if (ec || status.type() == std::filesystem::file_type::not_found) return out;
  // A FIFO or device would block the read (or never end): only a regular file is a journal.
  if (status.type() != std::filesystem::file_type::regular)
    throw std::runtime_error(fmt::format("{}: not a regular file (a journal is one, written by the campaign)", path));
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot be read", path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(lines[i]);
    } catch (const std::exception& e) {
      if (i + 1 == lines.size()) {  // cut short by a kill mid-write: the chunk did not count
        ++out.torn_lines;
        continue;
      }
      throw std::runtime_error(fmt::format("{}: line {}: {}", path, i + 1, e.what()));
    }
    try {
      const std::string type = j.at("type");
      if (type == "chunk") out.chunks.push_back(chunk_from_json(j));
      else if (type == "session" || type == "end") out.sessions.push_back(session_from_json(j));
      else throw std::runtime_error("unknown record type '" + type + "'");
    } catch (const std::exception& e) {  // whole JSON, yet not a record a campaign writes
      throw std::runtime_error(fmt::format("{}: line {}: {}", path, i + 1, e.what()));
    }
  }
  return out;
}

JournalWriter::JournalWriter(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  ::fstat(fd_, &st);
  off_t keep = st.st_size;
  char ch = '\n';
  while (keep > 0 && ::pread(fd_, &ch, 1, keep - 1) == 1 && ch != '\n') --keep;
  if (keep != st.st_size && ::ftruncate(fd_, keep) != 0)
    throw std::runtime_error(fmt::format("{}: cannot cut off a torn last line: {}", path, std::strerror(errno)));
}

JournalWriter::~JournalWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void JournalWriter::append(const nlohmann::json& record) {
  const std::string line = record.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd_) != 0) throw std::runtime_error(fmt::format("{}: fsync failed: {}", path_, std::strerror(errno)));
}

}  // namespace flashcheck
