// Campaigns: shards own disjoint chunks and together run exactly the cases of one unsharded run; the journal
// survives a torn last line; a supervisor replaces workers that crash, hang or lose their device, counting
// the cases judged before and saving the case in flight.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>
#include <sys/stat.h>
#include <unistd.h>

#include "core/files.h"
#include "campaign/campaign.h"
#include "campaign/campaign_journal.h"
#include "search/coverage.h"
#include "campaign/merge.h"

namespace flashcheck {
namespace {

namespace fs = std::filesystem;

std::string fresh_dir(const std::string& name) {
  const std::string d = (fs::temp_directory_path() / fmt::format("flashcheck-campaign-test-{}-{}", ::getpid(), name)).string();
  remove_tree(d);
  return d;
}

Kernel& tiled() { return *builtin_registry().find("tiled-cpu"); }
const Property& conformance() { return *find_property("conformance"); }

CampaignSpec spec_for(const std::vector<std::pair<Kernel*, const Property*>>& units, std::int64_t cases, Shard shard) {
  CampaignSpec s;
  s.seed = 9;
  s.cases = cases;
  s.limits.max_len = 80;  // short sequences: quick cases
  s.shard = shard;
  for (const auto& [k, p] : units)
    s.units.push_back({std::string(k->name()), p->label(), not_applicable_reason(*k, *p), required_coverage(*p, k->contract(), 1), 0});
  return s;
}

TEST(Shard, ParsesIOverNAndRejectsTheRestWithAReason) {
  std::string error;
  const auto s = parse_shard("2/4", error);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->index, 2);
  EXPECT_EQ(s->count, 4);
  for (const char* bad : {"4/4", "-1/4", "1/0", "1", "a/b", "1/2/3", "1/"}) {
    error.clear();
    EXPECT_FALSE(parse_shard(bad, error)) << bad;
    EXPECT_NE(error.find(bad), std::string::npos) << error;
  }
}

TEST(ShardPlan, ShardsOwnDisjointChunksThatTogetherMakeThePlan) {
  Kernel& k = tiled();
  const std::vector<std::pair<Kernel*, const Property*>> units{{&k, &conformance()}, {&k, find_property("determinism")}};
  const std::int64_t cases = 11 * kChunkCases + 7;  // 12 chunks per unit, the last of 7 cases
  std::set<WorkItem> seen;
  for (int i = 0; i < 5; ++i) {
    const CampaignSpec s = spec_for(units, cases, {i, 5});
    ShardPlan plan(s);
    while (const auto w = plan.next()) {
      EXPECT_EQ(w->chunk % 5, i);
      EXPECT_TRUE(seen.insert(*w).second) << "chunk " << w->chunk << " of unit " << w->unit << " owned twice";
    }
  }
  EXPECT_EQ(seen.size(), 24u);
  for (int u = 0; u < 2; ++u)
    for (int c = 0; c < 12; ++c) EXPECT_TRUE(seen.count({u, c})) << u << " " << c;
  const CampaignSpec s = spec_for(units, cases, {0, 1});
  EXPECT_EQ(s.chunk_cases(10), kChunkCases);
  EXPECT_EQ(s.chunk_cases(11), 7);
  EXPECT_EQ(s.chunk_cases(12), 0);
}

TEST(Journal, ATornLastLineIsDroppedAndCutOffBeforeTheNextAppend) {
  const std::string dir = fresh_dir("journal");
  fs::create_directories(dir);
  const std::string path = dir + "/journal.jsonl";
  {
    JournalWriter w(path);
    w.append(to_json(SessionRecord{0, false, 100, "h", {"cpu 0"}}));
    w.append(to_json(SessionRecord{0, true, 160, "h", {}}));
  }
  std::ofstream(path, std::ios::app) << "{\"type\": \"chunk\", \"unit\": 0, \"chu";  // a kill mid-write
  JournalContents j = read_journal(path);
  EXPECT_EQ(j.sessions.size(), 2u);
  EXPECT_EQ(j.torn_lines, 1);
  EXPECT_DOUBLE_EQ(j.seconds_used(), 60);
  {
    JournalWriter w(path);
    w.append(to_json(SessionRecord{1, false, 200, "h", {"cpu 0"}}));
  }
  j = read_journal(path);
  EXPECT_EQ(j.torn_lines, 0);
  EXPECT_EQ(j.sessions.size(), 3u);
  EXPECT_DOUBLE_EQ(j.seconds_used(), 60);  // session 1 has not finished a chunk yet

  std::ofstream(path, std::ios::app) << "not json\n" << to_json(SessionRecord{1, true, 210, "h", {}}).dump() << "\n";
  try {
    read_journal(path);
    FAIL() << "a malformed line before the last must be an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("journal.jsonl: line 4"), std::string::npos) << e.what();
  }
  remove_tree(dir);
}

// The union of the shards' cases is the unsharded fuzz run's: same case count and the same coverage counts.
TEST(Campaign, ShardsTogetherJudgeExactlyTheCasesOfOneFuzzRun) {
  Kernel& k = tiled();
  const std::vector<std::pair<Kernel*, const Property*>> units{{&k, &conformance()}};
  const std::int64_t cases = 2 * kChunkCases + 50;
  FuzzOptions fo = spec_for(units, cases, {0, 1}).chunk_options(0);
  fo.cases = cases;
  const FuzzReport whole = run_fuzz(k, conformance(), fo);
  ASSERT_TRUE(whole.findings.empty());

  std::vector<std::string> dirs;
  for (int i = 0; i < 2; ++i) {
    dirs.push_back(fresh_dir("shard" + std::to_string(i)));
    CampaignRunOptions o;
    o.dir = dirs.back();
    o.slots = cpu_slots(2);
    const CampaignOutcome r = run_campaign(spec_for(units, cases, {i, 2}), units, o);
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.chunks_run, i == 0 ? 2 : 1);  // chunks 0 and 2 (of 50 cases); chunk 1
  }
  const MergeResult m = merge_campaigns(dirs);
  ASSERT_EQ(m.units.size(), 1u);
  EXPECT_EQ(m.units[0].report.cases, whole.cases);
  EXPECT_EQ(m.units[0].report.coverage, whole.coverage);
  EXPECT_EQ(m.units[0].stats.cases, whole.cases);
  EXPECT_DOUBLE_EQ(m.units[0].report.worst_bound_use, whole.worst_bound_use);
  EXPECT_TRUE(m.warnings.empty()) << m.warnings.front();
  EXPECT_TRUE(m.ok());

  // A shard rerun in its directory finds its chunks done; another shard's directory is refused.
  CampaignRunOptions again;
  again.dir = dirs[1];
  again.slots = cpu_slots(1);
  const CampaignOutcome r = run_campaign(spec_for(units, cases, {1, 2}), units, again);
  EXPECT_EQ(r.chunks_run, 0);
  EXPECT_EQ(r.chunks_before, 1);
  EXPECT_EQ(r.totals[0].cases, kChunkCases);
  EXPECT_THROW(run_campaign(spec_for(units, cases, {0, 2}), units, again), CampaignError);
  // Merging one shard twice would count it twice.
  EXPECT_THROW(merge_campaigns({dirs[0], dirs[1], dirs[1]}), MergeError);
  for (const std::string& d : dirs) remove_tree(d);
}

// merge sums what the journal says, so it checks the journal first: a chunk recorded twice, a count no campaign
// writes, a chunk of another shard or past the plan, a finding's fixture outside the folder are refused, naming the
// file and chunk; a deleted fixture is a warning; a journal that is not a regular file (a FIFO) is refused unread.
TEST(Campaign, MergeDoesNotTrustTheJournal) {
  Kernel& mutant = *builtin_registry().find("mutant-top-left-causal");
  const std::vector<std::pair<Kernel*, const Property*>> units{{&mutant, &conformance()}};
  const std::string dir = fresh_dir("forged");
  CampaignRunOptions o;
  o.dir = dir;
  o.slots = cpu_slots(1);
  run_campaign(spec_for(units, 2 * kChunkCases, {0, 1}), units, o);
  const std::string path = dir + "/journal.jsonl";
  std::vector<std::string> lines;
  {
    std::ifstream in(path);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  std::size_t chunk_line = 0;
  for (std::size_t i = 0; i < lines.size() && !chunk_line; ++i)
    if (nlohmann::json::parse(lines[i])["type"] == "chunk" && !nlohmann::json::parse(lines[i])["report"]["findings"].empty()) chunk_line = i;
  ASSERT_NE(chunk_line, 0u) << "the mutant's campaign found nothing to forge";
  const nlohmann::json original = nlohmann::json::parse(lines[chunk_line]);
  ASSERT_TRUE(merge_campaigns({dir}).warnings.empty());
  const auto write = [&](const std::vector<std::string>& ls) {
    std::ofstream out(path, std::ios::trunc);
    for (const std::string& l : ls) out << l << "\n";
  };
  const auto refused = [&](const std::vector<std::string>& ls, const std::string& why) {
    write(ls);
    try {
      merge_campaigns({dir});
      ADD_FAILURE() << "merged a journal with " << why;
    } catch (const MergeError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  const auto forged = [&](const std::function<void(nlohmann::json&)>& change) {
    std::vector<std::string> ls = lines;
    nlohmann::json j = original;
    change(j);
    ls[chunk_line] = j.dump();
    ls.push_back(ls.back());  // a whole last line: not a torn one
    return ls;
  };
  std::vector<std::string> twice = lines;
  twice.insert(twice.begin() + static_cast<std::ptrdiff_t>(chunk_line), lines[chunk_line]);
  refused(twice, "recorded twice");
  refused(forged([](nlohmann::json& j) { j["report"]["cases"] = -1000; }), "impossible chunk record");
  refused(forged([](nlohmann::json& j) { j["report"]["failures"] = 1000000; }), "impossible chunk record");
  refused(forged([](nlohmann::json& j) { j["chunk"] = 7; }), "not a chunk of shard 0/1 (of 2 chunks)");
  refused(forged([](nlohmann::json& j) { j["kernel"] = "tiled-cpu"; }), "the unit is mutant-top-left-causal");
  refused(forged([](nlohmann::json& j) { j["report"]["findings"][0]["fixture"] = "../../outside.json"; }), "outside the campaign folder");
  refused(forged([](nlohmann::json& j) { j["report"]["findings"][0]["fixture"] = "/etc/passwd"; }), "outside the campaign folder");

  write(lines);
  fs::remove(dir + "/" + original["report"]["findings"][0]["fixture"].get<std::string>());
  const MergeResult m = merge_campaigns({dir});
  ASSERT_FALSE(m.warnings.empty());
  EXPECT_NE(m.warnings.front().find("is missing"), std::string::npos) << m.warnings.front();

  fs::remove(path);
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_THROW(merge_campaigns({dir}), MergeError);
  remove_tree(dir);
}

// Workers sharing a GPU keep its pinning and get labels of their own (reports count cases per worker).
TEST(Campaign, SharedSlotsRepeatEachSlotWithItsEnvironment) {
  const std::vector<WorkerSlot> gpus{{"GPU 0 (CUDA_VISIBLE_DEVICES=3)", {{"CUDA_VISIBLE_DEVICES", "3"}}},
                                     {"GPU 1 (CUDA_VISIBLE_DEVICES=5)", {{"CUDA_VISIBLE_DEVICES", "5"}}}};
  EXPECT_EQ(shared_slots(gpus, 1).size(), 2u);
  const std::vector<WorkerSlot> s = shared_slots(gpus, 3);
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].device, "GPU 0 (CUDA_VISIBLE_DEVICES=3) worker 0");
  EXPECT_EQ(s[2].device, "GPU 0 (CUDA_VISIBLE_DEVICES=3) worker 2");
  EXPECT_EQ(s[3].device, "GPU 1 (CUDA_VISIBLE_DEVICES=5) worker 0");
  EXPECT_EQ(s[4].env, gpus[1].env);
}

// tiled-cpu, except on cases with a key length of 33, 65, ...: there it crashes, hangs, or loses its
// "device" (a sticky error: it throws and reports the context lost).
class PlantedFault : public Kernel {
 public:
  enum class Mode { kCrash, kHang, kSticky };
  PlantedFault(std::string name, Mode m) : name_(std::move(name)), mode_(m) {}
  std::string_view name() const override { return name_; }
  const Contract& contract() const override { return tiled().contract(); }
  std::string sticky_error() const override { return sticky_ ? "an illegal memory access was encountered (planted)" : ""; }
  void run(const KernelCase& c, const CaseTensors& in, OutputBuffer& out) override {
    for (const Sequence& s : c.seqs)
      if (s.k_len > 32 && s.k_len % 32 == 1) {
        if (mode_ == Mode::kCrash) std::raise(SIGSEGV);
        if (mode_ == Mode::kHang) std::this_thread::sleep_for(std::chrono::seconds(60));
        sticky_ = true;
        throw std::runtime_error("CUDA error: an illegal memory access was encountered");
      }
    tiled().run(c, in, out);
  }

 private:
  std::string name_;
  Mode mode_;
  bool sticky_ = false;
};

TEST(Campaign, WorkersThatCrashHangOrLoseTheDeviceAreReplacedAndTheirCasesSaved) {
  PlantedFault crash("planted-crash", PlantedFault::Mode::kCrash), hang("planted-hang", PlantedFault::Mode::kHang),
      sticky("planted-sticky", PlantedFault::Mode::kSticky);
  const std::vector<std::pair<Kernel*, const Property*>> units{
      {&crash, &conformance()}, {&hang, &conformance()}, {&sticky, &conformance()}, {&tiled(), &conformance()}};
  CampaignSpec spec = spec_for(units, kChunkCases, {0, 1});
  spec.limits = GenLimits{};  // lengths up to 192: a few cases pass before a key length of 33, 65, ... comes
  spec.case_timeout = 1;
  const std::string dir = fresh_dir("faults");
  CampaignRunOptions o;
  o.dir = dir;
  o.slots = cpu_slots(2);
  const CampaignOutcome r = run_campaign(spec, units, o);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.restarts, 3);
  const std::vector<std::pair<VerdictKind, std::string>> expect{{VerdictKind::kCrash, "signal 11"},
                                                                {VerdictKind::kTimeout, "no result within 1 s"},
                                                                {VerdictKind::kCrash, "illegal memory access was encountered (planted)"}};
  for (std::size_t u = 0; u < 3; ++u) {
    const FuzzReport& t = r.totals[u];
    EXPECT_EQ(t.crashes, 1) << t.kernel;
    ASSERT_EQ(t.findings.size(), 1u) << t.kernel;
    const Finding& f = t.findings[0];
    EXPECT_EQ(f.verdict.kind, expect[u].first) << t.kernel;
    EXPECT_NE(f.verdict.reason.find(expect[u].second), std::string::npos) << f.verdict.reason;
    EXPECT_EQ(f.case_index, t.cases + 1) << t.kernel;  // the cases judged before it are counted
    EXPECT_GT(t.cases, 0) << t.kernel;
    bool long_key = false;
    for (const Sequence& s : f.minimized.seqs) long_key = long_key || (s.k_len > 32 && s.k_len % 32 == 1);
    EXPECT_TRUE(long_key) << t.kernel << ": the saved case is not the one that faulted: " << summary(f.minimized);
    EXPECT_TRUE(fs::exists(fs::path(dir) / f.fixture)) << f.fixture;
  }
  EXPECT_EQ(r.totals[3].cases, kChunkCases);  // the healthy kernel's chunk ran whole beside them
  EXPECT_TRUE(r.totals[3].ok());
  remove_tree(dir);
}

}  // namespace
}  // namespace flashcheck
