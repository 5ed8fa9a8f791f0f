#!/usr/bin/env bash
# ci/asan.sh [--full] — the sanitizer lane: the `asan` preset (AddressSanitizer + UndefinedBehaviorSanitizer, -O1) builds
# the parts that read hostile input and run kernels in workers, and runs them: core_test (fixtures, safetensors,
# validation, files, the hostile-input tests), input_fuzz_test (the structural fuzz test of the readers),
# kernels_test, search_test (the worker protocol, replay) and property_mutants_test (every property against the
# mutants, in this process). The CLI is left out (a quarter of the build): its readers are core's. LibTorch itself
# is not instrumented; leaks are not checked in the tests that load it (its static registries outlive main).
# Sized to the CI budget: docs/HARDENING.md has the measured seconds.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash ci/setup.sh ${FLASHCHECK_DEB_DIR:+--deb-dir "$FLASHCHECK_DEB_DIR"}
cmake --preset asan > build/configure-asan.log 2>&1 || { cat build/configure-asan.log; exit 1; }
# CI (the default) builds the readers' tests and the kernels' (contracts, output buffers, flash args); `--full` (the
# nightly run, ci/nightly.sh) adds the worker protocol and every property against the mutants, which need the whole
# library stack (LibTorch's headers in every unit) and more than double the lane.
full=
[ "${1:-}" = --full ] && full=1
targets=(core_test input_fuzz_test kernels_test)
[ -n "$full" ] && targets+=(search_test property_mutants_test)
cmake --build build/asan --target "${targets[@]}"

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
for t in core/core_test search/input_fuzz_test; do
  echo "[asan] $t"
  "build/asan/$t" --gtest_brief=1
done
# The worker tests crash their children on purpose (SIGSEGV, SIGABRT) and expect those signals: the sanitizer
# must not turn them into its own reports.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0
tests=(kernels/kernels_test)
[ -n "$full" ] && tests+=(search/search_test search/property_mutants_test)
for t in "${tests[@]}"; do
  echo "[asan] $t"
  "build/asan/$t" --gtest_brief=1
done
