// The subcommands of the `flashcheck` executable. main.cc parses the command line (CLI11) into these
// option structs; each command lives in its own file and returns the process exit code:
// 0 success, 1 a check failed, 2 bad usage or input.
#pragma once

#include "core/input_limits.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "search/limits.h"
#include "search/root_causes.h"

namespace flashcheck {
class Kernel;
class Property;
}

namespace flashcheck::cli {

// Printed commands (replay, reproduce) invoke flashcheck as this run was invoked when that was a path (a build
// tree's build/cpu/cli/flashcheck is not on PATH), else as "flashcheck" (cli/report.cc).
void set_command_name(const char* argv0);
// The kernel-level property names, comma-separated, for --help (cli/report.cc).
std::string property_name_list();

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// The bugs the fixtures under `given` record (search/root_causes.h), to label findings with. Without `given`, those of
// ./fixtures when it exists, and none (with a note on stderr) when it cannot be read; a `given` path that cannot be
// read is an InputError.
std::vector<KnownDefect> load_known_defects(const std::vector<std::string>& given, const char* command);

struct ListOptions {
  bool json = false;
  bool mutants = false;
  bool profiles = false;             // the HF profiles and the releases each claims, instead of kernels
  std::vector<std::string> kernels;  // these (e.g. py: kernels, resolved on demand) instead of the registry's
};
int run_list(const ListOptions& o);

struct ReplayOptions {
  std::vector<std::string> paths;
  std::vector<std::string> kernels;  // empty: every kernel under test
  std::string junit;                 // also write JUnit XML here (report/junit.h)
  bool verbose = false;              // a line for every record, not only the unexpected and the known bugs
  bool json = false;
  bool isolate = true;
  double timeout = 300;
  double max_work = limits::kDefaultMaxCaseWork;  // refuse a case whose fp64 reference needs more multiply-adds
  double worker_memory = -1;  // GiB for the worker when every kernel runs on the host (0: no limit; -1: 3/4 of the memory)
};
int run_replay(const ReplayOptions& o);

// Case sizes (search/limits.h GenLimits); GPU campaigns raise them to realistic lengths.
struct CaseSizeOptions {
  int max_size = 100;  // RapidCheck size ceiling
  std::int64_t max_len = 192;
  std::int64_t max_batch = 4;
  std::int64_t max_heads = 16;
  double work_budget = 3e6;
  std::vector<std::string> dtypes;      // --dtype: narrow the kernel's contract (empty: all its dtypes)
  std::vector<std::int64_t> head_dims;  // --head-dim: likewise
};
void apply_case_sizes(const CaseSizeOptions& s, int& max_size, GenLimits& limits, ModelGenLimits& model_limits);

// --property/--profile: the integration property once per profile (owned by `owned`), then the kernel-level
// properties. Prints the problem (as `command`) and returns false on an unknown name.
bool resolve_runs(const std::vector<std::string>& properties, const std::vector<std::string>& profiles,
                  const std::string& command, std::vector<std::unique_ptr<Property>>& owned,
                  std::vector<const Property*>& runs);

struct FuzzCommandOptions {
  std::string kernel;
  std::vector<std::string> properties{"conformance"};  // or "all", or "integration" (model level)
  std::vector<std::string> profiles{"hf-main"};        // integration: HF flash-path profiles
  std::int64_t cases = 0;
  double time = 0;
  std::uint64_t seed = 1;
  std::string out = "out/fuzz";
  int shrink_attempts = 400;
  double shrink_seconds = 60;
  CaseSizeOptions sizes;
  std::string require;  // "gqa=3,leftpad,causal": features every case must have
  std::string junit;    // also write JUnit XML here
  std::string reproduce;
  std::vector<std::string> known;  // fixtures whose recorded bugs label the root causes (default: ./fixtures)
  bool json = false;
  bool isolate = true;
  double timeout = 120;
  double worker_memory = -1;  // GiB for each host-kernel worker (0: no limit; -1: 3/4 of the memory, shared)
};
int run_fuzz_command(const FuzzCommandOptions& o);
// The names `fuzz --require` takes, for its help.
std::string feature_name_list();

// `fixture new`: one kernel-level case from flags into a new fixture file (cli/cmd_fixture.cc).
struct FixtureNewOptions {
  std::string out, title, source, description, note, name = "case";
  std::string property = "conformance";
  std::string seqs;              // "1x7,3x3": queries x keys per sequence
  std::string leftpad, seqused;  // per sequence, or one value for all
  std::string dtype = "bf16";
  std::int64_t heads = 1, kv_heads = 0, head_dim = 64, v_head_dim = 0;  // 0: as heads / head_dim
  bool causal = false, top_left = false, backward = false;
  std::string window;            // "LEFT,RIGHT"
  double softcap = 0;
  std::uint64_t seed = 1;
  std::vector<std::string> expect;  // "KERNEL=VERDICT[:WHY]"
};
int run_fixture_new(const FixtureNewOptions& o);

struct BisectOptions {
  std::string fixture, transformers, case_name, releases, out;
};
int run_bisect(const BisectOptions& o);

struct ReproOptions {
  std::string fixture, kernel, case_name, out;
  bool force = false;        // replace files of the folder that repro did not write
  std::string generated_by;  // "flashcheck 0.1.0 (commit ...)", for the script's header
};
int run_repro(const ReproOptions& o);

// --junit PATH: the XML written atomically at PATH (a link there is replaced, not followed); throws OutputError.
void write_junit_file(const std::string& path, const std::string& xml);

struct CampaignCommandOptions {
  std::string out;                                     // the campaign directory (its state)
  std::vector<std::string> kernels;
  std::vector<std::string> properties{"conformance"};  // as for fuzz
  std::vector<std::string> profiles{"hf-main"};
  std::int64_t cases = 0;  // per kernel and property, all shards together
  double time = 0;         // seconds for this shard, all its runs together
  std::uint64_t seed = 1;
  std::string shard = "0/1";
  std::string gpus;  // "all" or "0,1,...": one worker per GPU ("": CPU workers)
  int workers_per_gpu = 1;
  int workers = 0;   // CPU workers (0: one)
  double timeout = 120;
  double worker_memory = -1;  // GiB for each host-kernel worker (0: no limit; -1: 3/4 of the memory, shared)
  int shrink_attempts = 400;
  double shrink_seconds = 60;
  CaseSizeOptions sizes;
};
int run_campaign_command(const CampaignCommandOptions& o);

struct MergeOptions {
  std::vector<std::string> dirs;
  std::vector<std::string> known;  // fixtures whose recorded bugs label the root causes (default: ./fixtures)
  std::string out = "merged";
  std::string junit;   // also write the JUnit XML here
  bool force = false;  // replace a summary.md, junit.xml or report.json in --out that merge did not write
  bool html = true;
};
int run_merge(const MergeOptions& o);

struct GateOptions {
  std::string fixtures = "fixtures";
  std::vector<std::string> kernels;  // empty: every kernel under test
  std::int64_t cases = 0;            // per kernel and property; 0: the gate's default
  std::uint64_t seed = 1;
  std::string out = "out/gate";
  std::string junit;   // also write the JUnit XML here
  bool force = false;  // replace a summary.md, junit.xml or report.json in --out that the gate did not write
  bool mutants = true;
  bool json = false;
};
int run_gate(const GateOptions& o);

struct MutantsOptions {
  std::vector<std::string> mutants;     // empty: the whole catalog
  std::vector<std::string> properties;  // empty: every property
  std::int64_t budget = 120;            // cases per mutant and property (the gate's budget)
  std::uint64_t seed = 1;
  bool json = false;
};
int run_mutants(const MutantsOptions& o);

struct ExportOptions {
  std::string out = "build/hf-export";
  std::vector<std::string> fixtures{"fixtures"};  // model cases of these fixtures, then generated ones
  std::int64_t generated = 200;
  std::uint64_t seed = 1;
  std::string profile = "hf-main";
  bool force = false;  // replace files in --out that an earlier export did not write
};
int run_export(const ExportOptions& o);

struct HfLiveOptions {
  std::string python;                             // the interpreter whose transformers is checked
  std::vector<std::string> fixtures{"fixtures"};  // model cases of these fixtures, then generated ones
  std::int64_t generated = 200;
  std::uint64_t seed = 1;
  std::string out = "out/hf-live";
  std::string kernel = "auto";                    // auto | reference | torch-fa2 (tools/hf_live/fa_kernels.py)
  std::vector<std::string> paths{"flash", "sdpa"};
  bool backward = false;                          // also "<path>-backward" (training-shaped cases) and "model-backward"
  std::string script;                             // default: tools/hf_live/live.py
  std::string profile;                            // judge by this profile, not the release's (its claim still checked)
  int shrink_rounds = 40;
  bool json = false;
};
int run_hf_live(const HfLiveOptions& o);

struct BenchOptions {
  std::string kernel;
  std::string property = "conformance";
  std::string pass = "forward";  // "backward": grad-conformance unless `property` names another gradient property
  std::string mix = "standard";  // "standard" (the varlen mix of docs/PERFORMANCE.md), "fuzz" (the kernel's generator)
                                 // or "realistic" (fixed large shapes, per-stage times: search/samples.h realistic_mix)
  std::int64_t cases = 2000;
  std::int64_t warmup = 50;
  std::uint64_t seed = 1;
  std::int64_t in_flight = 1;  // threads, each with its own stream, each keeping one case in flight
  bool json = false;
};
int run_bench(const BenchOptions& o);
// --mix realistic (cli/bench_realistic.cc): per shape, --cases timed runs (at most 20) after --warmup (at most 2).
int run_bench_realistic(const BenchOptions& o, Kernel& k, const Property& p);

}  // namespace flashcheck::cli
