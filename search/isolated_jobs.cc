#include "search/isolated_jobs.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "search/worker.h"

namespace flashcheck {
namespace {

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
    const auto i = static_cast<std::size_t>(std::stoul(payload.substr(0, sp)));
    for (const auto& v : nlohmann::json::parse(payload.substr(sp + 1))) results[i].push_back(verdict_from_json(v));
    next = i + 1;
  };
  while (next < jobs) {
    const std::size_t from = next;
    const WorkerBody body = [&, from](WorkerChannel& ch) {
      for (std::size_t i = from; i < jobs; ++i) {
        ch.begin(std::to_string(i));
        nlohmann::json arr = nlohmann::json::array();
        for (const Verdict& v : run_guarded(job, i)) arr.push_back(to_json(v));
        ch.send('R', std::to_string(i) + " " + arr.dump());
        ch.end();
      }
    };
    const WorkerExit x = run_worker(body, on_message, {opt.enabled, opt.timeout_seconds});
    if (x.died_in) {
      const auto i = static_cast<std::size_t>(std::stoul(*x.died_in));
      Verdict v = label(i);
      v.kind = x.timed_out ? VerdictKind::kTimeout : VerdictKind::kCrash;
      v.reason = x.reason;
      results[i].push_back(v);
      next = i + 1;
    } else if (!x.clean) {
      throw std::runtime_error("worker process failed between cases: " + (x.error.empty() ? x.reason : x.error));
    }
  }
  return results;
}

}  // namespace flashcheck
