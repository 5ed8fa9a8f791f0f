#!/usr/bin/env bash
# ci/asan.sh — the sanitizer lane: the `asan` preset (AddressSanitizer + UndefinedBehaviorSanitizer, -O1) builds
# the parts that read hostile input and run kernels in workers, and runs them: core_test (fixtures, safetensors,
# validation, files), input_fuzz_test (the structural fuzz test of the readers), kernels_test, search_test (the
# worker protocol, replay) and property_mutants_test (the properties against the mutants), then the hostile
# regression fixtures (fixtures/hostile) through the sanitized `flashcheck replay`. LibTorch itself is not
# instrumented; leaks are not checked in the tests that load it (its static registries outlive main).
# Sized to the CI budget: docs/HARDENING.md has the measured seconds.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash ci/setup.sh ${FLASHCHECK_DEB_DIR:+--deb-dir "$FLASHCHECK_DEB_DIR"}
cmake --preset asan > build/configure-asan.log 2>&1 || { cat build/configure-asan.log; exit 1; }
targets=(core_test input_fuzz_test kernels_test search_test property_mutants_test flashcheck)
cmake --build build/asan --target "${targets[@]}"

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
for t in core/core_test search/input_fuzz_test; do
  echo "[asan] $t"
  "build/asan/$t" --gtest_brief=1
done
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
for t in kernels/kernels_test search/search_test search/property_mutants_test; do
  echo "[asan] $t"
  "build/asan/$t" --gtest_brief=1
done
echo "[asan] hostile regression fixtures"
cmake -DEXE=build/asan/cli/flashcheck -DDIR=fixtures/hostile -DWORK=build/asan/hostile -P fixtures/hostile/replay_all.cmake
