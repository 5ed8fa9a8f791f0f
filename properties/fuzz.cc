#include "properties/fuzz.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <rapidcheck.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/case_json.h"
#include "core/files.h"
#include "core/fixture.h"
#include "core/model_case_json.h"
#include "properties/coverage.h"
#include "properties/device_errors.h"
#include "properties/fuzz_detail.h"
#include "properties/model_generators.h"

namespace flashcheck {
namespace detail {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::uint64_t chunk_seed(std::uint64_t seed, int chunk) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(chunk + 1);  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace detail

namespace {

namespace fs = std::filesystem;
using namespace detail;

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
  }
  fs::rename(tmp, path);
}

std::string inflight_path(const std::string& dir, const Kernel& k, const Property& p) {
  return (fs::path(dir) / fmt::format("inflight-{}-{}.json", k.name(), p.name())).string();
}

// Saves a finding as a fixture that `flashcheck replay` reproduces.
std::string save_finding(const std::string& dir, const Kernel& k, const Property& p, const FuzzOptions& o,
                         const Finding& f) {
  if (dir.empty()) return "";
  fs::create_directories(dir);
  Fixture fx;
  fx.path = (fs::path(dir) / (content_hash(f.minimized) + ".json")).string();
  fx.title = fmt::format("{} {} of {}: {}", p.name(), to_string(f.verdict.kind), k.name(), summary(f.minimized));
  fx.description = f.verdict.reason;
  fx.property = std::string(p.name());
  fx.found_by = fmt::format("flashcheck fuzz --kernel {} --property {} --seed {}", k.name(), p.name(), o.seed);
  fx.replay = fmt::format("flashcheck replay {} --kernel {}", fx.path, k.name());
  fx.rc_reproduce = f.reproduce;
  FixtureCase fc;
  fc.kcase = f.minimized;
  Expectation e;
  e.verdict = f.verdict.kind;
  e.run_outside_contract = f.verdict.kind == VerdictKind::kCrash || f.verdict.kind == VerdictKind::kTimeout;
  e.why = f.verdict.reason;
  fc.expect[std::string(k.name())] = e;
  fx.cases.push_back(fc);
  save_fixture(fx);
  return fx.path;
}

// Everything the property lambda updates while RapidCheck drives it.
struct RunState {
  Kernel& k;
  const Property& p;
  const FuzzOptions& o;
  Clock::time_point start = Clock::now();
  Clock::time_point last_progress = Clock::now();
  FuzzReport report;
  Coverage coverage;
  std::int64_t target_cases = 0;
  bool time_up = false;
  // Shrinking of the current failure.
  bool failing = false;
  Clock::time_point fail_start;
  int attempts = 0, steps = 0;
  bool exhausted = false;
  Finding current;
  std::string inflight;

  bool budget_left() {
    if (o.seconds > 0 && since(start) >= o.seconds) time_up = true;
    return !time_up && (target_cases == 0 || report.cases < target_cases);
  }
};

}  // namespace

namespace detail {

namespace {

std::int64_t case_size(const Finding& f) {
  if (f.model_case) {
    const ModelCase& m = *f.model_case;
    return m.batch * (m.q_len + m.past) + m.heads * m.head_dim;
  }
  const KernelCase& c = f.minimized;
  std::int64_t n = c.heads * (c.head_dim + c.v_head_dim);
  for (const Sequence& s : c.seqs) n += s.q_len + s.k_len + 1;
  return n;
}

}  // namespace

void add_finding(FuzzReport& r, Finding f, const std::function<std::string(const Finding&)>& save) {
  const std::string sig = failure_signature(r.property, f);
  for (Finding& g : r.findings) {
    if (failure_signature(r.property, g) != sig) continue;
    if (case_size(f) < case_size(g)) {
      if (!g.fixture.empty()) {
        remove_file(g.fixture);
        remove_file(std::filesystem::path(g.fixture).replace_extension(".safetensors").string());
      }
      f.fixture = save(f);
      g = std::move(f);
    }
    return;
  }
  f.fixture = save(f);
  r.findings.push_back(std::move(f));
}

}  // namespace detail

std::string failure_signature(const std::string& property, const Finding& f) {
  std::string s = property + "/" + std::string(to_string(f.verdict.kind));
  for (const std::string& feature : f.model_case ? classify(*f.model_case) : classify(f.minimized)) s += "/" + feature;
  return s;
}

FuzzReport run_fuzz(Kernel& k, const Property& p, const FuzzOptions& o) {
  RunState st{k, p, o};
  st.report.kernel = std::string(k.name());
  st.report.property = std::string(p.name());
  st.report.seed = o.seed;
  st.target_cases = o.cases;
  st.report.not_applicable = p.unsupported_reason(k);
  const CaseRequirements req = p.requirements();
  if (st.report.not_applicable.empty()) st.report.not_applicable = requirements_unmet(k.contract(), req);
  if (!st.report.not_applicable.empty()) return st.report;
  if (!o.out_dir.empty()) {
    fs::create_directories(o.out_dir);
    st.inflight = inflight_path(o.out_dir, k, p);
  }
  const rc::Gen<KernelCase> gen = kernel_case_gen(k.contract(), req, o.limits);
  const std::string id = fmt::format("flashcheck/{}/{}", k.name(), p.name());

  const auto property = rc::detail::toProperty([&st, &gen]() {
    const KernelCase c = *gen;
    if (!st.failing) {
      if (!st.budget_left()) return;  // over budget: let RapidCheck finish its count without work
    } else {
      ++st.attempts;
      if (st.attempts > st.o.shrink.attempts || since(st.fail_start) > st.o.shrink.seconds) {
        st.exhausted = true;
        return;  // stop the greedy descent: every further candidate "passes"
      }
    }
    if (!st.inflight.empty()) write_atomically(st.inflight, nlohmann::json(case_to_json(c)).dump());
    if (st.o.on_case_start) st.o.on_case_start();
    const Verdict v = st.p.check(st.k, c);
    if (st.o.on_case_end) st.o.on_case_end();
    if (v.kind == VerdictKind::kUnsupported) {
      if (!st.failing) {
        ++st.report.unsupported;
        ++st.report.unsupported_reasons[v.reason];
      }
      RC_DISCARD(v.reason);
    }
    if (!st.failing) {
      ++st.report.cases;
      st.coverage.add(c);
      if (st.o.on_progress && since(st.last_progress) > 0.5) {
        st.last_progress = Clock::now();
        st.o.on_progress(st.report.cases, static_cast<std::int64_t>(st.report.findings.size()), since(st.start));
      }
    }
    if (v.kind == VerdictKind::kPass) {
      if (!st.failing && v.cmp) {
        const double r = v.cmp->ratio();
        if (std::isfinite(r)) st.report.worst_ratio = std::max(st.report.worst_ratio, r);
        const double u = v.cmp->bound_use();
        if (std::isfinite(u)) st.report.worst_bound_use = std::max(st.report.worst_bound_use, u);
      }
      return;
    }
    if (!st.failing) {
      st.failing = true;
      st.fail_start = Clock::now();
      st.current = Finding{};
      st.current.case_index = st.report.cases;
    } else {
      ++st.steps;
    }
    st.current.minimized = c;
    st.current.verdict = v;
    RC_FAIL(v.reason);
  });

  QuietListener listener;
  std::unordered_map<std::string, rc::detail::Reproduce> reproduce_map;
  if (!o.reproduce.empty()) {
    const rc::detail::Configuration cfg = rc::detail::configFromString(o.reproduce);
    for (const auto& [key, r] : cfg.reproduce) reproduce_map[id] = r;  // the string names one property
  }
  for (int chunk = o.first_chunk; st.budget_left(); ++chunk) {
    if (o.on_chunk) o.on_chunk(chunk);
    rc::detail::TestParams params;
    params.seed = chunk_seed(o.seed, chunk);
    params.maxSize = o.max_size;
    params.maxDiscardRatio = 20;
    const std::int64_t left = st.target_cases == 0 ? 500 : st.target_cases - st.report.cases;
    params.maxSuccess = static_cast<int>(std::min<std::int64_t>(left, 500));
    rc::detail::TestMetadata meta;
    meta.id = id;
    meta.description = id;
    st.failing = false;
    st.attempts = st.steps = 0;
    st.exhausted = false;
    const rc::detail::TestResult result = rc::detail::checkProperty(property, meta, params, listener, reproduce_map);
    rc::detail::FailureResult failure;
    if (result.match(failure) && st.failing) {
      Finding f = st.current;
      f.shrink_steps = st.steps;
      f.shrink_attempts = st.attempts;
      f.shrink_budget_exhausted = st.exhausted;
      rc::detail::Configuration cfg;
      cfg.reproduce[id] = failure.reproduce;
      f.reproduce = rc::detail::configToMinimalString(cfg);
      ++st.report.failures;
      add_finding(st.report, std::move(f), [&](const Finding& x) { return save_finding(o.out_dir, k, p, o, x); });
      if (o.stop_at_first_failure) break;
    }
    rc::detail::GaveUpResult gave_up;
    if (result.match(gave_up)) break;  // the generator cannot produce enough judgeable cases
    if (!o.reproduce.empty()) break;   // a reproduction runs once
  }
  st.report.seconds = since(st.start);
  st.report.coverage = st.coverage.counts;
  st.report.coverage_missing = st.coverage.missing(required_coverage(k.contract(), req));
  if (!st.inflight.empty()) remove_file(st.inflight);
  return st.report;
}

nlohmann::json to_json(const FuzzReport& r) {
  nlohmann::json findings = nlohmann::json::array();
  for (const Finding& f : r.findings)
    findings.push_back({{f.model_case ? "model_case" : "case", f.model_case ? model_case_to_json(*f.model_case) : case_to_json(f.minimized)},
                        {"summary", f.model_case ? summary(*f.model_case) : summary(f.minimized)},
                        {"verdict", to_json(f.verdict)},
                        {"case_index", f.case_index},
                        {"shrink_steps", f.shrink_steps},
                        {"shrink_attempts", f.shrink_attempts},
                        {"shrink_budget_exhausted", f.shrink_budget_exhausted},
                        {"reproduce", f.reproduce},
                        {"fixture", f.fixture}});
  return {{"kernel", r.kernel},
          {"property", r.property},
          {"seed", r.seed},
          {"cases", r.cases},
          {"unsupported", r.unsupported},
          {"unsupported_reasons", r.unsupported_reasons},
          {"crashes", r.crashes},
          {"failures", r.failures},
          {"findings", findings},
          {"seconds", r.seconds},
          {"worst_ratio", r.worst_ratio},
          {"worst_bound_use", r.worst_bound_use},
          {"coverage", r.coverage},
          {"coverage_missing", r.coverage_missing},
          {"not_applicable", r.not_applicable},
          {"known_divergences", r.known_divergences},
          {"ok", r.ok()}};
}

FuzzReport fuzz_report_from_json(const nlohmann::json& j) {
  FuzzReport r;
  r.kernel = j.at("kernel");
  r.property = j.at("property");
  r.seed = j.at("seed");
  r.cases = j.at("cases");
  r.unsupported = j.at("unsupported");
  r.unsupported_reasons = j.at("unsupported_reasons").get<std::map<std::string, std::int64_t>>();
  r.crashes = j.at("crashes");
  r.failures = j.at("failures");
  for (const auto& f : j.at("findings")) {
    Finding x;
    if (f.contains("model_case")) x.model_case = model_case_from_json(f.at("model_case"), "fuzz report", "findings");
    else x.minimized = case_from_json(f.at("case"), "fuzz report", "findings");
    x.verdict = verdict_from_json(f.at("verdict"));
    x.case_index = f.at("case_index");
    x.shrink_steps = f.at("shrink_steps");
    x.shrink_attempts = f.at("shrink_attempts");
    x.shrink_budget_exhausted = f.at("shrink_budget_exhausted");
    x.reproduce = f.at("reproduce");
    x.fixture = f.at("fixture");
    r.findings.push_back(std::move(x));
  }
  r.seconds = j.at("seconds");
  r.worst_ratio = j.at("worst_ratio");
  r.worst_bound_use = j.value("worst_bound_use", 0.0);
  r.coverage = j.at("coverage").get<std::map<std::string, std::int64_t>>();
  r.coverage_missing = j.at("coverage_missing").get<std::vector<std::string>>();
  r.not_applicable = j.at("not_applicable");
  r.known_divergences = j.value("known_divergences", std::map<std::string, std::int64_t>{});
  return r;
}

// --- the isolated runner ---------------------------------------------------------------------------

void merge_reports(FuzzReport& into, const FuzzReport& part) {
  into.cases += part.cases;
  into.unsupported += part.unsupported;
  for (const auto& [reason, n] : part.unsupported_reasons) into.unsupported_reasons[reason] += n;
  into.crashes += part.crashes;
  into.failures += part.failures;
  for (const Finding& f : part.findings) add_finding(into, f, [](const Finding& x) { return x.fixture; });
  into.worst_ratio = std::max(into.worst_ratio, part.worst_ratio);
  into.worst_bound_use = std::max(into.worst_bound_use, part.worst_bound_use);
  for (const auto& [f, n] : part.coverage) into.coverage[f] += n;
  if (into.not_applicable.empty()) into.not_applicable = part.not_applicable;
  for (const auto& [id, n] : part.known_divergences) into.known_divergences[id] += n;
}

namespace {

void write_line(int fd, const std::string& s) {
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(3);
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

FuzzReport run_fuzz_isolated(Kernel& k, const Property& p, const FuzzOptions& o, double case_timeout_seconds) {
  FuzzReport total;
  total.kernel = std::string(k.name());
  total.property = std::string(p.name());
  total.seed = o.seed;
  const std::string dir = o.out_dir.empty() ? (fs::temp_directory_path() / fmt::format("flashcheck-{}", ::getpid())).string()
                                            : o.out_dir;
  fs::create_directories(dir);
  const auto start = Clock::now();
  int next_chunk = o.first_chunk;
  for (;;) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    const std::int64_t done_cases = total.cases;
    FuzzOptions child = o;
    child.first_chunk = next_chunk;
    child.out_dir = dir;
    if (o.cases > 0) child.cases = o.cases - done_cases;
    if (o.seconds > 0) child.seconds = std::max(0.01, o.seconds - since(start));
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::close(fds[0]);
      const int fd = fds[1];
      set_device_error_note(inflight_path(dir, k, p) + ".error");
      child.on_progress = [fd](std::int64_t c, std::int64_t f, double) { write_line(fd, fmt::format("P {} {}\n", c, f)); };
      child.on_chunk = [fd](int chunk) { write_line(fd, fmt::format("C {}\n", chunk)); };
      child.on_case_start = [fd] { write_line(fd, "B\n"); };
      child.on_case_end = [fd] { write_line(fd, "E\n"); };
      try {
        FuzzReport r = run_fuzz(k, p, child);
        // Fixtures were written by the child; only the report travels.
        write_line(fd, "R " + to_json(r).dump() + "\n");
      } catch (const std::exception& e) {
        write_line(fd, std::string("X ") + e.what() + "\n");
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    std::string buffer, error;
    bool in_case = false, timed_out = false, reported = false;
    std::int64_t child_cases = 0, child_failures = 0;
    auto case_start = Clock::now();
    for (;;) {
      int wait_ms = -1;
      if (in_case && case_timeout_seconds > 0) {
        const double left = case_timeout_seconds - since(case_start);
        wait_ms = left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
      }
      pollfd pf{fds[0], POLLIN, 0};
      const int ready = ::poll(&pf, 1, wait_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        ::kill(pid, SIGKILL);
        timed_out = true;
        break;
      }
      char chunk[65536];
      const ssize_t n = ::read(fds[0], chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      buffer.append(chunk, static_cast<std::size_t>(n));
      std::size_t eol;
      while ((eol = buffer.find('\n')) != std::string::npos) {
        const std::string line = buffer.substr(0, eol);
        buffer.erase(0, eol + 1);
        if (line == "B") {
          in_case = true;
          case_start = Clock::now();
        } else if (line == "E") {
          in_case = false;
        } else if (line.rfind("C ", 0) == 0) {
          next_chunk = std::stoi(line.substr(2));
        } else if (line.rfind("P ", 0) == 0) {
          std::sscanf(line.c_str(), "P %ld %ld", &child_cases, &child_failures);
          if (o.on_progress)
            o.on_progress(done_cases + child_cases, static_cast<std::int64_t>(total.findings.size()) + child_failures,
                          since(start));
        } else if (line.rfind("R ", 0) == 0) {
          merge_reports(total, fuzz_report_from_json(nlohmann::json::parse(line.substr(2))));
          reported = true;
        } else if (line.rfind("X ", 0) == 0) {
          error = line.substr(2);
        }
      }
    }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!error.empty()) throw std::runtime_error("fuzz worker: " + error);
    if (reported) break;
    // The worker died (or hung) inside a case: that case is the in-flight descriptor.
    total.cases += child_cases;
    ++total.crashes;
    Finding f;
    f.case_index = done_cases + child_cases + 1;
    f.verdict.kernel = std::string(k.name());
    f.verdict.property = std::string(p.name());
    f.verdict.kind = timed_out ? VerdictKind::kTimeout : VerdictKind::kCrash;
    f.verdict.reason = timed_out ? fmt::format("no result within {} s", case_timeout_seconds)
                       : WIFSIGNALED(status) ? fmt::format("process killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)))
                                             : fmt::format("process exited with status {}", WEXITSTATUS(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) == kStickyDeviceErrorExit) {
      std::ifstream note(inflight_path(dir, k, p) + ".error");
      std::string line;
      std::getline(note, line);
      f.verdict.reason = line.empty() ? "sticky device error" : line;
    }
    ++total.failures;
    const std::string inflight = inflight_path(dir, k, p);
    try {
      std::ifstream in(inflight);
      f.minimized = case_from_json(nlohmann::json::parse(in), inflight, "");
      add_finding(total, f, [&](const Finding& x) { return save_finding(o.out_dir, k, p, o, x); });
    } catch (const std::exception& e) {
      total.findings.push_back(f);  // no descriptor: still a recorded crash
    }
    if (o.stop_at_first_failure) break;
    if ((o.cases > 0 && total.cases >= o.cases) || (o.seconds > 0 && since(start) >= o.seconds)) break;
    ++next_chunk;  // resume after the chunk that crashed, with a fresh seed
  }
  total.seconds = since(start);
  Coverage cov;
  cov.counts = total.coverage;
  total.coverage_missing = total.not_applicable.empty() ? cov.missing(required_coverage(k.contract(), p.requirements()))
                                                        : std::vector<std::string>{};
  if (o.out_dir.empty()) remove_tree(dir);
  return total;
}

}  // namespace flashcheck
