// flashcheck: differential testing of flash-attention kernels. `flashcheck --help` lists the commands.
#include <CLI/CLI.hpp>
#include <charconv>
#include <csignal>
#include <fmt/format.h>
#include <new>
#include <string_view>

#include "cli/commands.h"
#include "build_info.h"
#include "cli/plugins.h"
#include "core/error.h"
#include "core/hf_profiles.h"
#include "flashcheck/plugin.h"

namespace {

// The case-size options that fuzz and campaign share.
// --worker-memory, as fuzz, campaign and replay take it; `workers` says who shares the default.
void add_worker_memory_option(CLI::App* cmd, double& gib, const char* workers) {
  cmd->add_option("--worker-memory", gib,
                  fmt::format("GiB of address space for {}, so that a case too large fails inside it (0: no limit; "
                              "default: three quarters of the machine's memory{})",
                              workers, std::string_view(workers).starts_with("each") ? ", shared between the workers" : ""))
      ->check(CLI::Range(0.0, 1e6));
}

void add_case_size_options(CLI::App* cmd, flashcheck::cli::CaseSizeOptions& s) {
  cmd->add_option("--max-size", s.max_size, "RapidCheck size ceiling (1..100)")->capture_default_str()->check(CLI::Range(1, 100));
  cmd->add_option("--max-len", s.max_len, "Longest sequence the generator draws")->capture_default_str();
  cmd->add_option("--max-batch", s.max_batch, "Most sequences per case")->capture_default_str();
  cmd->add_option("--max-heads", s.max_heads, "Most query heads per case")->capture_default_str();
  cmd->add_option("--work-budget", s.work_budget, "Ceiling of sum(Lq * Lk * H * (d + dv)) per case; lengths shrink to fit it")
      ->capture_default_str();
  cmd->add_option("--dtype", s.dtypes, "Only these dtypes of the kernel's contract (repeatable)")
      ->check(CLI::IsMember({"fp16", "bf16", "fp32"}));
  cmd->add_option("--head-dim", s.head_dims,
                  "Only these head dims (repeatable): e.g. the ones a JIT-compiled kernel should compile")
      ->check(CLI::Range(1, 1024));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace flashcheck::cli;
  set_command_name(argc > 0 ? argv[0] : nullptr);
  // Past a file size limit (ulimit -f) a write fails with EFBIG, which the writers report with the previous file
  // intact, instead of SIGXFSZ killing the command with partial files left.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"flashcheck: differential testing and verification of flash-attention kernels"};
  app.require_subcommand(1);
  app.fallthrough();  // --plugin may follow the command
  app.set_help_all_flag("--help-all", "Help for every command");
  app.set_version_flag("--version", fmt::format("flashcheck {} (commit {}; {}; plugin ABI {})", FLASHCHECK_VERSION,
                                                FLASHCHECK_COMMIT, FLASHCHECK_BUILT_WITH, FLASHCHECK_PLUGIN_ABI_VERSION));
  std::vector<std::string> plugins;
  app.add_option("--plugin", plugins,
                 "Shared library with kernels (include/flashcheck/plugin.h), repeatable; also FLASHCHECK_PLUGINS")
      ->expected(1)
      ->take_all();

  ListOptions list;
  auto* cmd_list = app.add_subcommand("list", "List the kernels of this build and their contracts");
  cmd_list->add_flag("--json", list.json, "Machine-readable output");
  cmd_list->add_flag("--mutants", list.mutants, "List the deliberately broken kernels instead");
  cmd_list->add_flag("--profiles", list.profiles,
                     "List the transformers profiles instead: the releases each claims (flash path and eager; SDPA)");
  cmd_list->add_option("--kernel,-k", list.kernels, "List these kernels (repeatable; py: kernels are resolved)")
      ->expected(1)
      ->take_all();

  ReplayOptions replay;
  auto* cmd_replay = app.add_subcommand(
      "replay", "Replay fixture files (or every *.json under a directory) on kernels; exit 0 when all behave as expected");
  cmd_replay->add_option("paths", replay.paths, "Fixture files or directories")->required();
  cmd_replay->add_option("--kernel,-k", replay.kernels, "Kernel to run (repeatable; default: every kernel under test)")
      ->expected(1)
      ->take_all();
  cmd_replay->add_flag("--json", replay.json, "Machine-readable output");
  cmd_replay->add_flag("--verbose,-v", replay.verbose,
                       "A line for every case x kernel (default: only those that did not go as recorded, then the table)");
  cmd_replay->add_option("--junit", replay.junit, "Also write the results as JUnit XML to this file");
  cmd_replay->add_flag("!--no-isolate", replay.isolate, "Run kernels in this process (for debuggers)");
  cmd_replay->add_option("--timeout", replay.timeout, "Seconds before a case counts as hung")->capture_default_str();
  cmd_replay->add_option("--max-work", replay.max_work,
                         "Refuse a case whose fp64 reference needs more multiply-adds than this (sum of q_len * k_len * "
                         "heads * (d + dv)); past 1e10 a case is named before it runs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_worker_memory_option(cmd_replay, replay.worker_memory, "the worker when every kernel runs on the host");

  FuzzCommandOptions fuzz;
  auto* cmd_fuzz = app.add_subcommand("fuzz", "Generate cases for one kernel, judge them with properties, shrink and save failures");
  cmd_fuzz->add_option("--kernel,-k", fuzz.kernel, "Kernel to fuzz")->required();
  cmd_fuzz->add_option("--property,-p", fuzz.properties,
                       "Property (repeatable, or 'all'; default conformance): " + property_name_list() +
                           "; 'integration' (transformers' flash path) and 'integration-sdpa' (its SDPA path) judge "
                           "model-level cases")
      ->expected(1)
      ->take_all();
  cmd_fuzz->add_option("--profile", fuzz.profiles,
                       "HF profile for --property integration / integration-sdpa (repeatable): " +
                           std::string(flashcheck::hf::profile_name_list()))
      ->expected(1)
      ->take_all()
      ->capture_default_str();
  cmd_fuzz->add_option("--cases,-n", fuzz.cases, "Cases to judge per property");
  cmd_fuzz->add_option("--time,-t", fuzz.time, "Seconds to run per property");
  cmd_fuzz->add_option("--seed,-s", fuzz.seed, "Campaign seed (every chunk's RapidCheck seed derives from it)")->capture_default_str();
  cmd_fuzz->add_option("--out,-o", fuzz.out, "Directory for found fixtures and the in-flight case")->capture_default_str();
  cmd_fuzz->add_option("--shrink-attempts", fuzz.shrink_attempts, "Shrink candidates tried per failure")->capture_default_str();
  cmd_fuzz->add_option("--shrink-seconds", fuzz.shrink_seconds, "Seconds of shrinking per failure")->capture_default_str();
  cmd_fuzz->add_option("--require", fuzz.require,
                       "Features every case must have, comma-separated (kernel-level properties): gqa=N (N query heads "
                       "per KV head), " + feature_name_list());
  cmd_fuzz->add_option("--reproduce", fuzz.reproduce, "Replay one failure from its RapidCheck reproduce string");
  cmd_fuzz->add_option("--known", fuzz.known,
                       "Fixture files or folders whose recorded bugs label the root causes (repeatable; default: ./fixtures)");
  cmd_fuzz->add_flag("--json", fuzz.json, "Machine-readable report");
  cmd_fuzz->add_option("--junit", fuzz.junit, "Also write the results as JUnit XML to this file");
  cmd_fuzz->add_flag("!--no-isolate", fuzz.isolate, "Run in this process (a crash then ends the run)");
  cmd_fuzz->add_option("--timeout", fuzz.timeout, "Seconds before one case counts as hung")->capture_default_str();
  add_worker_memory_option(cmd_fuzz, fuzz.worker_memory, "each worker of a host kernel");
  add_case_size_options(cmd_fuzz, fuzz.sizes);

  CampaignCommandOptions campaign;
  auto* cmd_campaign = app.add_subcommand(
      "campaign", "Fuzz kernels x properties with one worker per GPU (or CPU worker), sharded and resumable; state in --out");
  cmd_campaign->add_option("--out,-o", campaign.out, "Campaign directory: its state; rerun the same command to resume")->required();
  cmd_campaign->add_option("--kernel,-k", campaign.kernels, "Kernel (repeatable)")->required()->expected(1)->take_all();
  cmd_campaign->add_option("--property,-p", campaign.properties,
                           "Property (repeatable, or 'all'; default conformance): " + property_name_list() +
                               "; 'integration' (transformers' flash path) and 'integration-sdpa' (its SDPA path) judge "
                               "model-level cases")
      ->expected(1)
      ->take_all();
  cmd_campaign->add_option("--profile", campaign.profiles, "HF profile for --property integration / integration-sdpa (repeatable)")
      ->expected(1)
      ->take_all()
      ->capture_default_str();
  cmd_campaign->add_option("--cases,-n", campaign.cases, "Cases per kernel and property, all shards together");
  cmd_campaign->add_option("--time,-t", campaign.time, "Seconds for this shard, all its runs together");
  cmd_campaign->add_option("--seed,-s", campaign.seed, "Campaign seed (chunk c of every run is seeded from it)")->capture_default_str();
  cmd_campaign->add_option("--shard", campaign.shard, "This shard, i/N: it runs chunks i, i+N, i+2N, ... of every run")
      ->capture_default_str();
  cmd_campaign->add_option("--gpus", campaign.gpus, "'all' or GPU indices '0,1,...': one worker per GPU, pinned to it");
  cmd_campaign->add_option("--workers", campaign.workers, "CPU workers (without --gpus; default 1)")->check(CLI::Range(1, 1024));
  cmd_campaign->add_option("--workers-per-gpu", campaign.workers_per_gpu,
                           "Workers sharing each GPU (with --gpus): for kernels that spend a case mostly on the host, as "
                           "Python kernels do")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd_campaign->add_option("--timeout", campaign.timeout, "Seconds before one case counts as hung")->capture_default_str();
  add_worker_memory_option(cmd_campaign, campaign.worker_memory, "each worker of a host kernel");
  cmd_campaign->add_option("--shrink-attempts", campaign.shrink_attempts, "Shrink candidates tried per failure")->capture_default_str();
  cmd_campaign->add_option("--shrink-seconds", campaign.shrink_seconds, "Seconds of shrinking per failure")->capture_default_str();
  add_case_size_options(cmd_campaign, campaign.sizes);

  MergeOptions merge;
  auto* cmd_merge = app.add_subcommand(
      "merge", "Merge campaign directories (shards, resumed runs) into one report: summary.md, report.json, junit.xml, report.html");
  cmd_merge->add_option("dirs", merge.dirs, "Campaign directories")->required();
  cmd_merge->add_option("--out,-o", merge.out, "Directory for the merged reports")->capture_default_str();
  cmd_merge->add_flag("--force", merge.force, "Replace report files in --out that merge did not write (or links in their place)");
  cmd_merge->add_flag("!--no-html", merge.html, "Skip report.html (the plots)");
  cmd_merge->add_option("--junit", merge.junit, "Also write junit.xml's content to this file");
  cmd_merge->add_option("--known", merge.known,
                        "Fixture files or folders whose recorded bugs label the root causes (repeatable; default: ./fixtures)");

  GateOptions gate;
  auto* cmd_gate = app.add_subcommand(
      "gate", "CI gate: replay the fixture corpus, then a bounded run of every property on every kernel; JUnit + markdown");
  cmd_gate->add_option("--fixtures", gate.fixtures, "Fixture corpus to replay first")->capture_default_str();
  cmd_gate->add_option("--kernel,-k", gate.kernels, "Kernel (repeatable; default: every kernel under test)")
      ->expected(1)
      ->take_all();
  cmd_gate->add_option("--cases,-n", gate.cases, "Cases per kernel and property (default: sized for CI)");
  cmd_gate->add_option("--seed,-s", gate.seed, "Seed of the property runs")->capture_default_str();
  cmd_gate->add_option("--junit", gate.junit, "Also write junit.xml's content to this file");
  cmd_gate->add_flag("--force", gate.force, "Replace report files in --out that the gate did not write (or links in their place)");
  cmd_gate->add_option("--out,-o", gate.out, "Directory for junit.xml, summary.md, report.json and found fixtures")
      ->capture_default_str();
  cmd_gate->add_flag("!--no-mutants", gate.mutants, "Skip the mutant kill run");
  cmd_gate->add_flag("--json", gate.json, "Print the report as JSON");

  MutantsOptions mutants;
  auto* cmd_mutants = app.add_subcommand(
      "mutants", "Run every property against every deliberately broken kernel and print the kill matrix; exit 1 if one survives");
  cmd_mutants->add_option("--mutant,-m", mutants.mutants, "Mutant (repeatable; default: the whole catalog)")
      ->expected(1)
      ->take_all();
  cmd_mutants->add_option("--property,-p", mutants.properties, "Property (repeatable; default: all)")->expected(1)->take_all();
  cmd_mutants->add_option("--budget,-n", mutants.budget, "Cases per mutant and property")->capture_default_str();
  cmd_mutants->add_option("--seed,-s", mutants.seed, "Seed")->capture_default_str();
  cmd_mutants->add_flag("--json", mutants.json, "Machine-readable matrix");

  BenchOptions bench;
  auto* cmd_bench = app.add_subcommand("bench", "Throughput of a property on a kernel (cases/s) over pre-generated cases");
  cmd_bench->add_option("--kernel,-k", bench.kernel, "Kernel")->required();
  cmd_bench->add_option("--property,-p", bench.property, "Property")->capture_default_str();
  cmd_bench->add_option("--pass", bench.pass,
                        "forward | backward: the pass to time; backward takes grad-conformance unless --property names "
                        "another gradient property")
      ->capture_default_str()
      ->check(CLI::IsMember({"forward", "backward"}));
  cmd_bench->add_option("--mix", bench.mix, "standard | fuzz | realistic (fixed large shapes, per-stage times; --cases runs per shape, at most 20)")
      ->capture_default_str()
      ->check(CLI::IsMember({"standard", "fuzz", "realistic"}));
  cmd_bench->add_option("--cases,-n", bench.cases, "Timed cases")->capture_default_str();
  cmd_bench->add_option("--warmup", bench.warmup, "Untimed cases first")->capture_default_str();
  cmd_bench->add_option("--seed,-s", bench.seed, "Seed of the case generator")->capture_default_str();
  cmd_bench->add_option("--in-flight", bench.in_flight,
                        "Cases in flight on the GPU: threads, each with its own CUDA stream (conformance on a CUDA kernel, "
                        "or its backward with --pass backward)")
      ->capture_default_str();
  cmd_bench->add_flag("--json", bench.json, "Machine-readable result");

  ExportOptions exp;
  auto* cmd_export = app.add_subcommand(
      "export", "Write model-level cases with the HF-eager oracle's output and the flash-path plan (for tools/hf_crosscheck/crosscheck.py)");
  cmd_export->add_option("--out,-o", exp.out, "Directory for manifest.json and the tensors")->capture_default_str();
  cmd_export->add_option("--fixtures", exp.fixtures, "Fixture files or folders whose model cases to export")
      ->expected(1)
      ->take_all()
      ->capture_default_str();
  cmd_export->add_option("--generated,-n", exp.generated, "Generated model cases to add")->capture_default_str();
  cmd_export->add_option("--seed,-s", exp.seed, "Seed of the generated cases")->capture_default_str();
  cmd_export->add_option("--profile", exp.profile, "Flash-path profile to plan with")->capture_default_str();
  cmd_export->add_flag("--force", exp.force, "Replace files in --out that an earlier export did not write");

  // Integers as written: a seed is unsigned ("-1" is an error, not 2^64 - 1) and no count saturates or
  // wraps (CLI11 reads "99999999999999999999" as INT64_MAX). Ranges are each command's (cli/option_checks.h).
  const auto integer_text = [](bool is_unsigned) {
    return CLI::Validator(
        [is_unsigned](std::string& s) -> std::string {
          std::int64_t i;
          std::uint64_t u;
          const char* end = s.data() + s.size();
          const auto r = is_unsigned ? std::from_chars(s.data(), end, u) : std::from_chars(s.data(), end, i);
          if (r.ec == std::errc::result_out_of_range) return "integer out of range: " + s;
          if (r.ec != std::errc() || r.ptr != end)
            return (is_unsigned ? "expected a non-negative integer, found " : "expected an integer, found ") + s;
          return "";
        },
        is_unsigned ? "UINT64" : "INT64");
  };
  for (CLI::App* sub : app.get_subcommands({}))
    for (CLI::Option* opt : sub->get_options()) {
      const std::string n = opt->get_name();
      if (n == "--seed") opt->check(integer_text(true));
      else if (n == "--cases" || n == "--budget" || n == "--generated" || n == "--warmup" || n == "--max-len" ||
               n == "--max-batch" || n == "--max-heads" || n == "--shrink-attempts")
        opt->check(integer_text(false));
    }

  HfLiveOptions live;
  auto* cmd_live = app.add_subcommand(
      "hf-live", "Check the transformers installed for a Python interpreter: its flash and SDPA paths against its eager attention");
  cmd_live->add_option("--python", live.python, "Interpreter with torch and the transformers to check")->required();
  cmd_live->add_option("--fixtures", live.fixtures, "Fixture files or folders whose model cases to run")
      ->expected(1)
      ->take_all()
      ->capture_default_str();
  cmd_live->add_option("--generated,-n", live.generated, "Generated model cases to add")->capture_default_str();
  cmd_live->add_option("--seed,-s", live.seed, "Seed of the generated cases")->capture_default_str();
  cmd_live->add_option("--out,-o", live.out, "Directory for the cases and found fixtures")->capture_default_str();
  cmd_live->add_option("--kernel", live.kernel, "auto | reference (CPU, fp64) | torch-fa2 (CUDA)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "reference", "torch-fa2"}));
  cmd_live->add_option("--path", live.paths, "Path to check (repeatable): flash, sdpa")->expected(1)->take_all()->capture_default_str();
  cmd_live->add_option("--script", live.script, "tools/hf_live/live.py elsewhere");
  cmd_live->add_option("--profile", live.profile,
                       "Judge the release by this profile instead of the one whose range holds it; the release is still "
                       "checked against it (exit 1 when they disagree)");
  cmd_live->add_flag("--backward", live.backward,
                     "Also check the gradients of training-shaped cases (flash-backward, sdpa-backward) and a tiny "
                     "model's training step (model-backward)");
  cmd_live->add_option("--shrink-rounds", live.shrink_rounds, "Shrink rounds per finding")->capture_default_str();
  cmd_live->add_flag("--json", live.json, "Machine-readable report (as fuzz --json)");

  FixtureNewOptions fixture_new;
  auto* cmd_fixture = app.add_subcommand("fixture", "Make fixture files (a reported issue as a replayable case)");
  cmd_fixture->require_subcommand(1);
  auto* cmd_fixture_new = cmd_fixture->add_subcommand(
      "new", "Write a new fixture with one kernel-level case given by flags (fixtures/README.md has every field)");
  cmd_fixture_new->add_option("--out,-o", fixture_new.out, "The fixture file to create (.json; never overwritten)")->required();
  cmd_fixture_new->add_option("--title", fixture_new.title, "What the fixture reproduces, in one line")->required();
  cmd_fixture_new->add_option("--seqs", fixture_new.seqs, "Sequences as QxK, comma-separated: 1x7,3x3")->required();
  cmd_fixture_new->add_option("--source", fixture_new.source, "Link to the report (an issue, a pull request)");
  cmd_fixture_new->add_option("--description", fixture_new.description, "The analysis: what goes wrong and why");
  cmd_fixture_new->add_option("--note", fixture_new.note, "A note on the case");
  cmd_fixture_new->add_option("--name", fixture_new.name, "The case's name")->capture_default_str();
  cmd_fixture_new->add_option("--property,-p", fixture_new.property, "What replay checks: " + property_name_list())
      ->capture_default_str();
  cmd_fixture_new->add_option("--dtype", fixture_new.dtype, "fp32, fp16 or bf16")->capture_default_str();
  cmd_fixture_new->add_option("--heads", fixture_new.heads, "Query heads")->capture_default_str();
  cmd_fixture_new->add_option("--kv-heads", fixture_new.kv_heads, "KV heads (default: --heads; fewer: GQA)");
  cmd_fixture_new->add_option("--head-dim", fixture_new.head_dim, "Head dim of Q and K")->capture_default_str();
  cmd_fixture_new->add_option("--v-head-dim", fixture_new.v_head_dim, "Head dim of V (default: --head-dim)");
  cmd_fixture_new->add_flag("--causal", fixture_new.causal, "Causal mask (bottom-right aligned unless --top-left)");
  cmd_fixture_new->add_flag("--top-left", fixture_new.top_left, "Top-left causal/window alignment");
  cmd_fixture_new->add_option("--window", fixture_new.window, "Sliding window LEFT,RIGHT (-1: unbounded)");
  cmd_fixture_new->add_option("--softcap", fixture_new.softcap, "Logit softcap (0: none)");
  cmd_fixture_new->add_option("--leftpad", fixture_new.leftpad, "Left padding of the keys, per sequence or one for all");
  cmd_fixture_new->add_option("--seqused-k", fixture_new.seqused, "Keys used, per sequence or one for all");
  cmd_fixture_new->add_flag("--backward", fixture_new.backward, "A backward case (a normal upstream gradient dO)");
  cmd_fixture_new->add_option("--seed", fixture_new.seed, "Seed of the case's data")->capture_default_str();
  cmd_fixture_new->add_option("--expect", fixture_new.expect,
                              "KERNEL=VERDICT[:WHY], repeatable (VERDICT: pass, fail, error, crash, timeout, unsupported)")
      ->expected(1)
      ->take_all();

  ReproOptions repro;
  repro.generated_by = fmt::format("flashcheck {} (commit {})", FLASHCHECK_VERSION, FLASHCHECK_COMMIT);
  auto* cmd_repro = app.add_subcommand(
      "repro", "Write a fixture's case as a standalone Python reproducer and an issue body, for upstream (the script "
               "needs torch and the kernel's own package, or transformers for a model case)");
  cmd_repro->add_option("fixture", repro.fixture, "The fixture file")->required();
  cmd_repro->add_option("--out,-o", repro.out, "Folder for repro.py, case.safetensors and ISSUE.md")->required();
  cmd_repro->add_option("--kernel,-k", repro.kernel,
                        "The kernel (default: the first one a case records a failure of)");
  cmd_repro->add_option("--case", repro.case_name,
                        "The case, by name or number; a model case by name or m<i> (default: the first recording a "
                        "failure)");
  cmd_repro->add_flag("--force", repro.force, "Replace files in --out that repro did not write");

  BisectOptions bisect;
  auto* cmd_bisect = app.add_subcommand(
      "bisect", "The first transformers release where a fixture's model cases fail on the flash path, and the first "
                "that fixes them (releases installed side by side, each judged by hf-live)");
  cmd_bisect->add_option("fixture", bisect.fixture, "A fixture with model-level cases")->required();
  cmd_bisect->add_option("--transformers", bisect.transformers, "The releases to search: FROM..TO, e.g. 4.53.0..5.25.0")
      ->required();
  cmd_bisect->add_option("--case", bisect.case_name, "Only this model case of the fixture");
  cmd_bisect->add_option("--releases", bisect.releases,
                         "The candidate releases, comma-separated (default: every final release PyPI lists)");
  cmd_bisect->add_option("--out,-o", bisect.out, "Folder for the probes' hf-live output (default: a temporary one)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (!load_plugins(plugins)) return kExitUsage;
  // The boundary: bad input, an unwritable output and any other error end the command with exit 2 and a
  // message, never with an uncaught exception (an abort that loses the records so far).
  const std::string name = app.get_subcommands().empty() ? "" : app.get_subcommands().front()->get_name();
  try {
    if (*cmd_list) return run_list(list);
    if (*cmd_replay) return run_replay(replay);
    if (*cmd_fuzz) return run_fuzz_command(fuzz);
    if (*cmd_campaign) return run_campaign_command(campaign);
    if (*cmd_merge) return run_merge(merge);
    if (*cmd_gate) return run_gate(gate);
    if (*cmd_mutants) return run_mutants(mutants);
    if (*cmd_bench) return run_bench(bench);
    if (*cmd_export) return run_export(exp);
    if (*cmd_live) return run_hf_live(live);
    if (*cmd_fixture_new) return run_fixture_new(fixture_new);
    if (*cmd_repro) return run_repro(repro);
    if (*cmd_bisect) return run_bisect(bisect);
  } catch (const flashcheck::InputError& e) {
    fmt::print(stderr, "flashcheck {}: {}\n", name, e.what());
  } catch (const flashcheck::OutputError& e) {
    fmt::print(stderr, "flashcheck {}: cannot write: {}\n", name, e.what());
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "flashcheck {}: out of memory\n", name);
  } catch (const std::exception& e) {
    fmt::print(stderr, "flashcheck {}: error: {}\n", name, flashcheck::printable(e.what(), 800));
  }
  return kExitUsage;
}
