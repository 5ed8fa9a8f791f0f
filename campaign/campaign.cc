#include "campaign/campaign.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <poll.h>
#include <set>
#include <unistd.h>

#include "core/error.h"
#include "core/files.h"
#include "kernels/devices.h"
#include "campaign/campaign_journal.h"
#include "search/case_stats.h"
#include "search/found_cases.h"
#include "search/worker.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  return name;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t at = s.find(sep, from);
    out.push_back(s.substr(from, at - from));
    if (at == std::string::npos) return out;
    from = at + 1;
  }
}

// Holds DIR/lock while the campaign runs: two processes on one directory would both append to its journal.
std::unique_ptr<FolderLock> lock_campaign(const std::string& dir) {
  try {
    return std::make_unique<FolderLock>(dir, "lock", "flashcheck campaign");
  } catch (const OutputError& e) {
    throw CampaignError(e.what());
  }
}

// Writes campaign.json, or checks that the one there is this campaign (its time budget may change).
void settle_definition(const CampaignSpec& spec, const std::string& dir) {
  const fs::path path = fs::path(dir) / "campaign.json";
  if (fs::exists(path)) {
    std::ifstream in(path);
    nlohmann::json stored;
    try {
      stored = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      throw CampaignError(fmt::format("{}: not JSON: {}", path.string(), e.what()));
    }
    const nlohmann::json was = campaign_identity(campaign_spec_from_json(stored, path.string()));
    const nlohmann::json now = campaign_identity(spec);
    for (const auto& [field, value] : now.items())
      if (was.value(field, nlohmann::json()) != value)
        throw CampaignError(fmt::format("{}: {}: this directory holds a campaign with {} = {}, not {}; rerun it with the "
                                        "same options or give another --out",
                                        path.string(), field, field, was.value(field, nlohmann::json()).dump(), value.dump()));
  }
  write_file_atomic(path.string(), to_json(spec).dump(2) + "\n");
}

// The supervisor's view of one worker slot.
struct Slot {
  WorkerSlot where;
  std::unique_ptr<WorkerProcess> proc;
  std::optional<WorkItem> item;  // the chunk it is running
  double item_started = 0;
  CaseStats stats;  // of the cases of that chunk judged so far
  int startup_deaths = 0;
  bool done = false;
};

class Supervisor {
 public:
  Supervisor(const CampaignSpec& spec, const std::vector<std::pair<Kernel*, const Property*>>& units,
             const CampaignRunOptions& o)
      : spec_(spec), units_(units), o_(o), plan_(spec), found_dir_((fs::path(o.dir) / "found").string()),
        writer_((fs::path(o.dir) / "journal.jsonl").string()) {}

  CampaignOutcome run(const JournalContents& before) {
    out_.totals.resize(units_.size());
    for (std::size_t u = 0; u < units_.size(); ++u) {
      out_.totals[u].kernel = std::string(units_[u].first->name());
      out_.totals[u].property = units_[u].second->label();
      out_.totals[u].seed = spec_.seed;
      out_.totals[u].not_applicable = spec_.units[u].not_applicable;
    }
    for (const ChunkRecord& r : before.chunks) {
      if (r.unit < 0 || r.unit >= static_cast<int>(units_.size()) || spec_.units[r.unit].kernel != r.kernel ||
          spec_.units[r.unit].property != r.property)
        throw CampaignError(fmt::format("{}/journal.jsonl: chunk {} of {} / {} is not a unit of this campaign", o_.dir,
                                        r.chunk, r.kernel, r.property));
      done_.insert({r.unit, r.chunk});
      count(r);
    }
    out_.chunks_before = static_cast<int>(before.chunks.size());
    out_.torn_lines = before.torn_lines;
    session_ = 0;
    for (const SessionRecord& s : before.sessions) session_ = std::max(session_, s.session + 1);
    if (spec_.seconds > 0) deadline_ = unix_now() + (spec_.seconds - before.seconds_used());
    SessionRecord start{session_, false, unix_now(), host_name(), {}};
    for (const WorkerSlot& w : o_.slots) start.workers.push_back(w.device);
    writer_.append(to_json(start));
    session_start_ = start.time;

    for (std::size_t i = 0; i < o_.slots.size(); ++i) slots_.push_back(Slot{o_.slots[i], nullptr, {}, 0, {}, 0, false});
    for (std::size_t i = 0; i < slots_.size(); ++i) start_worker(i);
    loop();
    writer_.append(to_json(SessionRecord{session_, true, unix_now(), host_name(), {}}));
    out_.complete = !next_item().has_value();
    return out_;
  }

 private:
  const CampaignSpec& spec_;
  const std::vector<std::pair<Kernel*, const Property*>>& units_;
  const CampaignRunOptions& o_;
  ShardPlan plan_;
  std::string found_dir_;
  JournalWriter writer_;
  CampaignOutcome out_;
  std::set<WorkItem> done_;
  std::deque<WorkItem> retry_;  // chunks whose worker died before starting them
  std::vector<Slot> slots_;
  int session_ = 0;
  double session_start_ = 0;
  std::optional<double> deadline_;
  std::int64_t session_cases_ = 0, failures_ = 0, crashes_ = 0;
  double last_progress_ = 0;

  std::string worker_dir(std::size_t i) const { return (fs::path(o_.dir) / "workers" / std::to_string(i)).string(); }

  void count(const ChunkRecord& r) {
    merge_reports(out_.totals[r.unit], r.report, true);
    failures_ += r.report.failures;
    crashes_ += r.report.crashes;
  }

  std::optional<WorkItem> next_item() {
    if (deadline_ && unix_now() >= *deadline_) return std::nullopt;
    if (!retry_.empty()) {
      const WorkItem w = retry_.front();
      retry_.pop_front();
      return w;
    }
    while (const std::optional<WorkItem> w = plan_.next())
      if (!done_.count(*w)) return w;
    return std::nullopt;
  }

  // The body of a worker: chunks, one per request, until the supervisor says quit.
  WorkerBody body(std::size_t i) const {
    return [this, i](WorkerChannel& ch) {
      for (;;) {
        ch.send('N', "");
        const std::optional<std::string> line = ch.receive();
        if (!line || *line == "quit") return;
        WorkItem w;
        double seconds = 0;
        if (std::sscanf(line->c_str(), "%d %d %lf", &w.unit, &w.chunk, &seconds) != 3)
          throw std::runtime_error("campaign worker: bad request '" + *line + "'");
        const auto& [k, p] = units_[w.unit];
        FuzzOptions fo = spec_.chunk_options(w.chunk);
        fo.seconds = seconds;
        fo.out_dir = found_dir_;
        fo.inflight_dir = worker_dir(i);
        FuzzHooks hooks;
        hooks.first_chunk = w.chunk;
        hooks.max_chunks = 1;
        hooks.on_case_start = [&ch] { ch.begin("case"); };
        hooks.on_case_end = [&ch] { ch.end(); };
        hooks.on_judged = [&ch](const AnyCase& c, const Verdict& v) { ch.send('J', to_json(case_sample(c, v)).dump()); };
        ch.send('R', to_json(run_fuzz(*k, *p, fo, hooks)).dump());
      }
    };
  }

  void start_worker(std::size_t i) {
    WorkerOptions wo;
    wo.item_timeout = spec_.case_timeout;
    wo.env = slots_[i].where.env;
    wo.memory_limit = slots_[i].where.memory_limit;
    slots_[i].proc = std::make_unique<WorkerProcess>(body(i), wo);
  }

  ChunkRecord record_of(std::size_t i) const {
    const Slot& s = slots_[i];
    ChunkRecord r;
    r.unit = s.item->unit;
    r.chunk = s.item->chunk;
    r.kernel = spec_.units[r.unit].kernel;
    r.property = spec_.units[r.unit].property;
    r.session = session_;
    r.worker = static_cast<int>(i);
    r.device = s.where.device;
    r.host = host_name();
    r.started = s.item_started;
    r.finished = unix_now();
    r.stats = s.stats;
    return r;
  }

  void finish_chunk(std::size_t i, ChunkRecord r) {
    // Fixture paths relative to the campaign directory: the directory may be merged from elsewhere.
    for (Finding& f : r.report.findings)
      if (!f.fixture.empty()) f.fixture = fs::path(f.fixture).lexically_relative(o_.dir).string();
    writer_.append(to_json(r));
    done_.insert(*slots_[i].item);
    count(r);
    ++out_.chunks_run;
    slots_[i].item.reset();
  }

  void on_message(std::size_t i, char tag, const std::string& payload) {
    Slot& s = slots_[i];
    if (tag == 'N') {
      s.item = next_item();
      s.stats = CaseStats{};
      s.item_started = unix_now();
      if (!s.item) {
        s.proc->tell("quit");
        return;
      }
      const double seconds = deadline_ ? std::max(0.01, *deadline_ - unix_now()) : 0.0;
      s.proc->tell(fmt::format("{} {} {}", s.item->unit, s.item->chunk, seconds));
    } else if (tag == 'J') {
      s.stats.add(case_sample_from_json(nlohmann::json::parse(payload)));
      ++session_cases_;
    } else if (tag == 'R') {
      ChunkRecord r = record_of(i);
      r.report = fuzz_report_from_json(nlohmann::json::parse(payload));
      finish_chunk(i, std::move(r));
    }
  }

  // The worker died in its chunk: the chunk is a crash whose case is the in-flight descriptor.
  void record_crash(std::size_t i, const WorkerExit& x) {
    Slot& s = slots_[i];
    const auto& [k, p] = units_[s.item->unit];
    ChunkRecord r = record_of(i);
    r.crashed = true;
    FuzzReport& rep = r.report;
    rep.kernel = std::string(k->name());
    rep.property = p->label();
    rep.seed = spec_.seed;
    rep.cases = s.stats.cases;
    for (const auto& [feature, cell] : s.stats.by_feature) rep.coverage[feature] = cell.cases;
    rep.crashes = 1;
    rep.failures = 1;
    rep.seconds = r.finished - r.started;
    Finding f;
    f.case_index = s.stats.cases + 1;
    f.verdict.kernel = rep.kernel;
    f.verdict.property = rep.property;
    f.verdict.kind = x.timed_out ? VerdictKind::kTimeout : VerdictKind::kCrash;
    f.verdict.reason = x.died_in ? x.reason : "worker died between cases: " + x.reason;
    const std::string inflight = inflight_path(worker_dir(i), *k, *p);
    if (const std::optional<AnyCase> c = read_inflight(inflight)) {
      set_finding_case(f, *c);
      f.fixture = save_finding(found_dir_, *k, *p, spec_.seed, f);
    }
    remove_file(inflight);
    rep.findings.push_back(std::move(f));
    finish_chunk(i, std::move(r));
  }

  void on_exit(std::size_t i) {
    Slot& s = slots_[i];
    const WorkerExit x = s.proc->finish();
    s.proc.reset();
    if (!x.error.empty()) throw std::runtime_error(fmt::format("campaign worker on {}: {}", s.where.device, x.error));
    if (x.clean) {
      s.done = true;  // it was told to quit
      return;
    }
    ++out_.restarts;
    if (s.item) {
      record_crash(i, x);
    } else if (++s.startup_deaths >= 3) {
      out_.retired.push_back(fmt::format("worker on {} died {} times before taking a chunk (last: {})", s.where.device,
                                         s.startup_deaths, x.reason));
      s.done = true;
      return;
    }
    start_worker(i);
  }

  void progress() {
    const double now = unix_now();
    if (!o_.on_progress || now - last_progress_ < 1) return;
    last_progress_ = now;
    CampaignProgress p;
    for (const FuzzReport& r : out_.totals) p.cases += r.cases;
    for (const Slot& s : slots_) p.cases += s.item ? s.stats.cases : 0;
    p.failures = failures_;
    p.crashes = crashes_;
    p.chunks_done = static_cast<int>(done_.size());
    p.seconds = now - session_start_;
    p.cases_per_second = session_cases_ / std::max(p.seconds, 1e-9);
    for (const Slot& s : slots_) p.workers += !s.done;
    o_.on_progress(p);
  }

  void loop() {
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<std::size_t> who;
      int wait_ms = 1000;
      for (std::size_t i = 0; i < slots_.size(); ++i) {
        if (slots_[i].done) continue;
        fds.push_back({slots_[i].proc->fd(), POLLIN, 0});
        who.push_back(i);
        if (const std::optional<double> left = slots_[i].proc->item_time_left())
          wait_ms = std::min(wait_ms, static_cast<int>(*left * 1000) + 1);
      }
      if (fds.empty()) return;
      const int ready = ::poll(fds.data(), fds.size(), wait_ms);
      if (ready < 0 && errno != EINTR) throw std::runtime_error(fmt::format("poll failed: {}", std::strerror(errno)));
      for (std::size_t n = 0; n < fds.size() && ready > 0; ++n) {
        if (!(fds[n].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const std::size_t i = who[n];
        if (!slots_[i].proc->pump([&](char tag, const std::string& payload) { on_message(i, tag, payload); })) on_exit(i);
      }
      for (const std::size_t i : who)
        if (slots_[i].proc && slots_[i].proc->item_time_left() == 0.0) slots_[i].proc->kill_hung();
      progress();
    }
  }
};

}  // namespace

std::vector<WorkerSlot> gpu_slots(const std::string& gpus, std::string& error) {
  const int n = cuda_device_count();
  if (n == 0) {
    error = cuda_build() ? "--gpus: no CUDA device is visible to this process" +
                               std::string(std::getenv("CUDA_VISIBLE_DEVICES")
                                               ? fmt::format(" (CUDA_VISIBLE_DEVICES={})", std::getenv("CUDA_VISIBLE_DEVICES"))
                                               : "")
                         : "--gpus: this flashcheck is a CPU build (cpu preset) and runs no GPU; build the cuda preset, "
                           "or give --workers N for CPU workers";
    return {};
  }
  std::vector<std::string> visible;
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES"); env && *env) visible = split(env, ',');
  else
    for (int i = 0; i < n; ++i) visible.push_back(std::to_string(i));
  visible.resize(std::min<std::size_t>(visible.size(), static_cast<std::size_t>(n)));
  std::vector<int> chosen;
  if (gpus == "all") {
    for (int i = 0; i < static_cast<int>(visible.size()); ++i) chosen.push_back(i);
  } else {
    for (const std::string& part : split(gpus, ',')) {
      std::size_t used = 0;
      int i = -1;
      try {
        i = std::stoi(part, &used);
      } catch (const std::exception&) {
      }
      if (used != part.size() || i < 0 || i >= static_cast<int>(visible.size())) {
        error = fmt::format("--gpus {}: '{}' is not one of the {} visible GPUs (0..{})", gpus, part, visible.size(),
                            visible.size() - 1);
        return {};
      }
      if (std::find(chosen.begin(), chosen.end(), i) != chosen.end()) {
        error = fmt::format("--gpus {}: GPU {} is listed twice", gpus, i);
        return {};
      }
      chosen.push_back(i);
    }
  }
  std::vector<WorkerSlot> slots;
  for (const int i : chosen)
    slots.push_back({fmt::format("GPU {} (CUDA_VISIBLE_DEVICES={})", i, visible[i]), {{"CUDA_VISIBLE_DEVICES", visible[i]}}});
  return slots;
}

std::vector<WorkerSlot> shared_slots(const std::vector<WorkerSlot>& slots, int per_slot) {
  if (per_slot <= 1) return slots;
  std::vector<WorkerSlot> out;
  for (const WorkerSlot& s : slots)
    for (int w = 0; w < per_slot; ++w) out.push_back({fmt::format("{} worker {}", s.device, w), s.env});
  return out;
}

std::vector<WorkerSlot> cpu_slots(int workers) {
  std::vector<WorkerSlot> slots;
  for (int i = 0; i < workers; ++i) slots.push_back({fmt::format("cpu {}", i), {}});
  return slots;
}

CampaignOutcome run_campaign(const CampaignSpec& spec, const std::vector<std::pair<Kernel*, const Property*>>& units,
                             const CampaignRunOptions& options) {
  if (units.size() != spec.units.size()) throw std::logic_error("run_campaign: one kernel and property per unit");
  if (options.slots.empty()) throw std::logic_error("run_campaign: no worker");
  CampaignRunOptions o = options;
  o.dir = fs::path(o.dir).lexically_normal().string();
  while (o.dir.size() > 1 && o.dir.back() == '/') o.dir.pop_back();
  fs::create_directories(o.dir);
  const std::unique_ptr<FolderLock> lock = lock_campaign(o.dir);
  settle_definition(spec, o.dir);
  remove_tree((fs::path(o.dir) / "workers").string());  // in-flight descriptors of a killed run are stale
  const JournalContents before = read_journal((fs::path(o.dir) / "journal.jsonl").string());
  Supervisor s(spec, units, o);
  return s.run(before);
}

}  // namespace flashcheck
