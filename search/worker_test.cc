#include "search/isolated_jobs.h"
#include "search/worker.h"

#include "kernels/device_errors.h"

#include <cmath>
#include <fstream>
#include <new>
#include <cstdlib>
#include <memory>
#include <csignal>
#include <limits>
#include <gtest/gtest.h>
#include <stdexcept>
#include <thread>
#include <unistd.h>

namespace flashcheck {
namespace {

Verdict named(const std::string& kernel, VerdictKind kind = VerdictKind::kPass) {
  Verdict v;
  v.kernel = kernel;
  v.kind = kind;
  return v;
}

const JobLabel kLabel = [](std::size_t i) { return named("job" + std::to_string(i)); };

TEST(IsolatedJobs, CrashOfOneJobIsRecordedAndTheRestStillRun) {
  const auto r = run_isolated(
      4,
      [](std::size_t i) -> std::vector<Verdict> {
        if (i == 1) std::raise(SIGSEGV);
        if (i == 2) std::abort();
        return {named("job" + std::to_string(i))};
      },
      kLabel, {});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].at(0).kind, VerdictKind::kPass);
  EXPECT_EQ(r[1].at(0).kind, VerdictKind::kCrash);
  EXPECT_EQ(r[1].at(0).kernel, "job1");
  EXPECT_NE(r[1].at(0).reason.find("signal 11"), std::string::npos) << r[1].at(0).reason;
  EXPECT_EQ(r[2].at(0).kind, VerdictKind::kCrash);
  EXPECT_NE(r[2].at(0).reason.find("signal 6"), std::string::npos) << r[2].at(0).reason;
  EXPECT_EQ(r[3].at(0).kind, VerdictKind::kPass);
}

TEST(IsolatedJobs, HungJobBecomesATimeout) {
  IsolationOptions opt;
  opt.timeout_seconds = 0.5;
  const auto r = run_isolated(
      2,
      [](std::size_t i) -> std::vector<Verdict> {
        if (i == 0) std::this_thread::sleep_for(std::chrono::seconds(30));
        return {named("job" + std::to_string(i))};
      },
      kLabel, opt);
  EXPECT_EQ(r[0].at(0).kind, VerdictKind::kTimeout);
  EXPECT_EQ(r[1].at(0).kind, VerdictKind::kPass);
}

TEST(IsolatedJobs, ExceptionsBecomeErrorVerdicts) {
  const auto r = run_isolated(
      1, [](std::size_t) -> std::vector<Verdict> { throw std::runtime_error("boom"); }, kLabel, {});
  EXPECT_EQ(r[0].at(0).kind, VerdictKind::kError);
  EXPECT_NE(r[0].at(0).reason.find("boom"), std::string::npos);
}

TEST(IsolatedJobs, VerdictDetailsSurviveTheProcessBoundary) {
  const auto r = run_isolated(
      1,
      [](std::size_t) -> std::vector<Verdict> {
        Verdict v = named("k", VerdictKind::kFail);
        Comparison c;
        c.err_max = std::numeric_limits<double>::infinity();
        c.base_max = 0.25;
        c.worst = {1, 2, 3, 4, std::numeric_limits<double>::quiet_NaN(), 0.5, 0.75};
        v.cmp = c;
        v.reason = "why";
        return {v, named("k2")};
      },
      kLabel, {});
  ASSERT_EQ(r[0].size(), 2u);
  const Verdict& v = r[0][0];
  EXPECT_EQ(v.kind, VerdictKind::kFail);
  EXPECT_EQ(v.reason, "why");
  ASSERT_TRUE(v.cmp.has_value());
  EXPECT_TRUE(std::isinf(v.cmp->err_max));
  EXPECT_TRUE(std::isnan(v.cmp->worst.out));
  EXPECT_EQ(v.cmp->worst.d, 4);
  EXPECT_EQ(r[0][1].kernel, "k2");
}

TEST(Worker, MessagesArriveInOrderAndACrashNamesTheItemInFlight) {
  std::vector<std::string> got;
  const WorkerExit x = run_worker(
      [](WorkerChannel& ch) {
        ch.send('P', "one");
        ch.begin("case-7");
        ch.send('P', "two");
        std::raise(SIGSEGV);
      },
      [&](char tag, const std::string& payload) { got.push_back(std::string(1, tag) + payload); }, {});
  EXPECT_EQ(got, (std::vector<std::string>{"Pone", "Ptwo"}));
  EXPECT_FALSE(x.clean);
  ASSERT_TRUE(x.died_in.has_value());
  EXPECT_EQ(*x.died_in, "case-7");
  EXPECT_NE(x.reason.find("signal 11"), std::string::npos) << x.reason;
}

TEST(Worker, ADeathBetweenItemsIsNotBlamedOnAnItem) {
  const WorkerExit x = run_worker(
      [](WorkerChannel& ch) {
        ch.begin("a");
        ch.end();
        std::abort();
      },
      [](char, const std::string&) {}, {});
  EXPECT_FALSE(x.clean);
  EXPECT_FALSE(x.died_in.has_value());
  EXPECT_NE(x.reason.find("signal 6"), std::string::npos) << x.reason;
}

TEST(Worker, AnExceptionOfTheBodyIsAHarnessErrorInBothModes) {
  for (bool isolate : {true, false}) {
    const WorkerExit x = run_worker([](WorkerChannel&) { throw std::runtime_error("bad\nthing"); },
                                    [](char, const std::string&) {}, {isolate, 10});
    EXPECT_FALSE(x.clean) << isolate;
    EXPECT_NE(x.error.find("bad"), std::string::npos) << isolate << ": " << x.error;
  }
}

// Issue 29, item 7: an allocation past the worker's memory limit fails inside the worker, which lives on and says
// which limit it met; the parent is not limited.
TEST(Worker, AnAllocationPastTheMemoryLimitFailsInsideTheWorker) {
  std::int64_t pages = 0;
  std::ifstream("/proc/self/statm") >> pages;
  const std::int64_t limit = pages * ::sysconf(_SC_PAGE_SIZE) + (std::int64_t{256} << 20);  // what is mapped, and 256 MiB
  std::vector<std::string> got;
  WorkerOptions o;
  o.memory_limit = limit;
  const WorkerExit x = run_worker(
      [](WorkerChannel& ch) {
        ch.send('L', std::to_string(worker_memory_limit()));
        try {
          std::unique_ptr<char[]> big(new char[std::size_t{2} << 30]);
          big[0] = 1;
          ch.send('A', "allocated");
        } catch (const std::bad_alloc& e) {
          ch.send('A', kernel_error_reason(e));
        }
        std::unique_ptr<char[]> small(new char[std::size_t{16} << 20]);  // still room below the limit
        small[0] = 1;
        ch.send('S', "ok");
      },
      [&](char tag, const std::string& payload) { got.push_back(std::string(1, tag) + payload); }, o);
  EXPECT_TRUE(x.clean) << x.reason << x.error;
  ASSERT_EQ(got.size(), 3u);
  if (got[0] == "L0") GTEST_SKIP() << "no limit in this build (AddressSanitizer reserves more address space)";
  EXPECT_EQ(got[0], "L" + std::to_string(limit));
  EXPECT_NE(got[1].find("under the worker's memory limit of"), std::string::npos) << got[1];
  EXPECT_NE(got[1].find("--worker-memory"), std::string::npos) << got[1];
  EXPECT_EQ(got[2], "Sok");
  EXPECT_EQ(worker_memory_limit(), 0);
}

TEST(Worker, TheDefaultMemoryLimitSharesThreeQuartersOfTheMachine) {
  const std::int64_t one = default_worker_memory(1);
  ASSERT_GT(one, std::int64_t{1} << 20);
  EXPECT_NEAR(static_cast<double>(default_worker_memory(4)), static_cast<double>(one) / 4, 1.0);
  EXPECT_EQ(worker_memory_bytes(0), 0);  // --worker-memory 0: no limit
  EXPECT_EQ(worker_memory_bytes(1.5), std::int64_t{3} << 29);
  EXPECT_EQ(worker_memory_bytes(-1, 2), default_worker_memory(2));
}

TEST(Worker, AnItemPastItsLimitIsKilled) {
  const WorkerExit x = run_worker(
      [](WorkerChannel& ch) {
        ch.begin("slow");
        std::this_thread::sleep_for(std::chrono::seconds(30));
      },
      [](char, const std::string&) {}, {true, 0.3});
  EXPECT_TRUE(x.timed_out);
  ASSERT_TRUE(x.died_in.has_value());
  EXPECT_EQ(*x.died_in, "slow");
}

TEST(WorkerProcess, TheChildStartsWithItsEnvironmentAndServesRequestsUntilTheParentStops) {
  WorkerOptions o;
  o.env = {{"FLASHCHECK_TEST_DEVICE", "3"}};
  const WorkerBody body = [](WorkerChannel& ch) {
    const char* device = std::getenv("FLASHCHECK_TEST_DEVICE");
    ch.send('D', device ? device : "unset");
    while (const std::optional<std::string> request = ch.receive()) {
      if (*request == "quit") return;
      ch.send('A', *request + "!");
    }
  };
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  workers.push_back(std::make_unique<WorkerProcess>(body, o));
  workers.push_back(std::make_unique<WorkerProcess>(body, WorkerOptions{}));
  workers[0]->tell("ping");
  workers[1]->tell("pong");
  std::vector<std::vector<std::string>> got(2);
  for (std::size_t i = 0; i < 2; ++i) {
    while (got[i].size() < 2)
      ASSERT_TRUE(workers[i]->pump([&](char tag, const std::string& p) { got[i].push_back(std::string(1, tag) + p); }));
  }
  EXPECT_EQ(got[0], (std::vector<std::string>{"D3", "Aping!"}));
  EXPECT_EQ(got[1], (std::vector<std::string>{"Dunset", "Apong!"}));
  EXPECT_EQ(std::getenv("FLASHCHECK_TEST_DEVICE"), nullptr);  // set in the child only
  workers.pop_back();  // killed and reaped by its destructor
  workers[0]->tell("quit");
  while (workers[0]->pump([](char, const std::string&) {})) {
  }
  const WorkerExit x = workers[0]->finish();
  EXPECT_TRUE(x.clean) << x.reason;
}

}  // namespace
}  // namespace flashcheck
