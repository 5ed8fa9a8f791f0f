// flashcheck: differential testing of flash-attention kernels. `flashcheck --help` lists the commands.
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace flashcheck::cli;
  CLI::App app{"flashcheck: differential testing and verification of flash-attention kernels"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Help for every command");

  ListOptions list;
  auto* cmd_list = app.add_subcommand("list", "List the kernels of this build and their contracts");
  cmd_list->add_flag("--json", list.json, "Machine-readable output");
  cmd_list->add_flag("--mutants", list.mutants, "List the deliberately broken kernels instead");

  ReplayOptions replay;
  auto* cmd_replay = app.add_subcommand(
      "replay", "Replay fixture files (or every *.json under a directory) on kernels; exit 0 when all behave as expected");
  cmd_replay->add_option("paths", replay.paths, "Fixture files or directories")->required();
  cmd_replay->add_option("--kernel,-k", replay.kernels, "Kernel to run (repeatable; default: every kernel under test)");
  cmd_replay->add_flag("--json", replay.json, "Machine-readable output");
  cmd_replay->add_flag("!--no-isolate", replay.isolate, "Run kernels in this process (for debuggers)");
  cmd_replay->add_option("--timeout", replay.timeout, "Seconds before a case counts as hung")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  if (*cmd_list) return run_list(list);
  if (*cmd_replay) return run_replay(replay);
  return kExitUsage;
}
