#include "search/isolated_jobs.h"

#include <nlohmann/json.hpp>
#include <string>

#include "search/worker.h"

namespace flashcheck {
namespace {

// Fresh workers that may die between jobs before the next job is recorded as a crash.
constexpr int kDeathsBeforeGivingUp = 3;

std::vector<Verdict> run_guarded(const IsolatedJob& job, std::size_t i) {
  try {
    return job(i);
  } catch (const std::exception& e) {
    Verdict v;
    v.kind = VerdictKind::kError;
    v.reason = std::string("harness error: ") + e.what();
    return {v};
  }
}

}  // namespace

std::vector<std::vector<Verdict>> run_isolated(std::size_t jobs, const IsolatedJob& job, const JobLabel& label,
                                               const IsolationOptions& opt) {
  std::vector<std::vector<Verdict>> results(jobs);
  std::size_t next = 0;
  // Messages: "B <i>" and "E" frame job i; "R <i> <verdicts as a JSON array>" carries its result.
  const WorkerHandler on_message = [&](char tag, const std::string& payload) {
    if (tag != 'R') return;
    const std::size_t sp = payload.find(' ');
    std::size_t i = 0;
    std::vector<Verdict> got;
    try {
      i = static_cast<std::size_t>(std::stoul(payload.substr(0, sp)));
      for (const auto& v : nlohmann::json::parse(payload.substr(sp + 1))) got.push_back(verdict_from_json(v));
    } catch (const std::exception&) {
      return;  // a garbled line: the job counts as not reported, and is retried or recorded below
    }
    if (i >= jobs) return;
    results[i] = std::move(got);
    next = i + 1;
  };
  int deaths_before_next = 0;  // workers that died between jobs without getting past job `next`
  while (next < jobs) {
    const std::size_t from = next;
    const WorkerBody body = [&, from](WorkerChannel& ch) {
      for (std::size_t i = from; i < jobs; ++i) {
        ch.begin(std::to_string(i));
        nlohmann::json arr = nlohmann::json::array();
        for (const Verdict& v : run_guarded(job, i)) arr.push_back(to_json(v));
        // A kernel's message may hold bytes that are not UTF-8: replaced, so that the record still goes out.
        ch.send('R', std::to_string(i) + " " + arr.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        ch.end();
      }
    };
    const WorkerExit x =
        run_worker(body, on_message, {.isolate = opt.enabled, .item_timeout = opt.timeout_seconds, .memory_limit = opt.memory_limit});
    if (x.died_in) {
      const auto i = static_cast<std::size_t>(std::stoul(*x.died_in));
      Verdict v = label(i);
      v.kind = x.timed_out ? VerdictKind::kTimeout : VerdictKind::kCrash;
      v.reason = x.reason;
      results[i].push_back(v);
      next = i + 1;
      deaths_before_next = 0;
    } else if (!x.clean) {
      // The worker died (or its body threw) between jobs: no job was in flight, and the records so far are
      // kept. A fresh worker resumes at the next job; one that dies there again and again gets that job
      // recorded as a crash, so the list always ends.
      if (next > from) deaths_before_next = 0;
      if (++deaths_before_next >= kDeathsBeforeGivingUp) {
        Verdict v = label(next);
        v.kind = VerdictKind::kCrash;
        v.reason = "the worker died before the case started: " + (x.error.empty() ? x.reason : x.error);
        results[next].push_back(v);
        ++next;
        deaths_before_next = 0;
      }
    }
  }
  return results;
}

}  // namespace flashcheck
