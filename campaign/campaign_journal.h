// A campaign's record of what it has done: DIR/journal.jsonl, one JSON object a line, only ever appended,
// each line written with one write() and fsync'd before the chunk counts as done. A campaign killed at any
// moment leaves every finished chunk in it and at most a torn last line, which reading ignores. Rerunning
// the campaign skips the chunks it finds here; `flashcheck merge` adds them up.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "search/case_stats.h"
#include "search/fuzz_report.h"

namespace flashcheck {

// One finished chunk: a worker's report of it, or, when the worker died in it, the crash with the cases
// judged before it.
struct ChunkRecord {
  int unit = 0, chunk = 0;
  std::string kernel, property;
  int session = 0;       // which run of the campaign command
  int worker = 0;        // the worker slot (one per GPU or CPU worker)
  std::string device;    // "GPU 0 (CUDA_VISIBLE_DEVICES=0)", "cpu 1"
  std::string host;
  double started = 0, finished = 0;  // Unix time, seconds
  bool crashed = false;  // the worker died in this chunk (crash, hang or sticky device error)
  FuzzReport report;
  CaseStats stats;
};

// A run of the campaign command starting or ending cleanly; the time a shard has used is the sum of its
// sessions' spans (a session killed without an end record ends at its last chunk).
struct SessionRecord {
  int session = 0;
  bool end = false;
  double time = 0;
  std::string host;
  std::vector<std::string> workers;  // start: the devices of the workers
};

nlohmann::json to_json(const ChunkRecord& r);
nlohmann::json to_json(const SessionRecord& r);

struct JournalContents {
  std::vector<ChunkRecord> chunks;
  std::vector<SessionRecord> sessions;
  int torn_lines = 0;  // a last line cut short by a kill (ignored)
  double seconds_used() const;
};

// Reads a journal; a missing file is empty. A malformed line other than the last is an error naming the
// file and line (std::runtime_error).
JournalContents read_journal(const std::string& path);

// Appends records to a journal, each durable before append() returns. Opening it cuts off a torn last line
// left by a killed run, so that every line before the new ones is whole.
class JournalWriter {
 public:
  explicit JournalWriter(const std::string& path);
  ~JournalWriter();
  JournalWriter(const JournalWriter&) = delete;
  JournalWriter& operator=(const JournalWriter&) = delete;
  void append(const nlohmann::json& record);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace flashcheck
