#!/usr/bin/env bash
# ci/plugins.sh — kernels from outside flashcheck, end to end as a user runs them (docs/PLUGINS.md,
# docs/PYTHON_KERNELS.md): install flashcheck into a prefix, build the example CPU plugin out of tree
# against it with find_package(flashcheck), fuzz it through every applicable property, and prove that its
# deliberately broken build is caught; then the same for a Python kernel and its broken twin, the FlexAttention
# adapter on the CPU (also past Dynamo's recompile limit), the FlashInfer adapter's arguments, and the xz transport
# of large wheels to an offline GPU node. Expects build/cpu (ci/build.sh cpu). Exit 0 only if the good kernels pass
# and the broken ones fail.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
prefix=$root/build/install
work=$root/build/plugins-check
rm -rf "$work" && mkdir -p "$work"
cmake --install build/cpu --prefix "$prefix" > "$work/install.log"
fc=$prefix/bin/flashcheck
passed=0 failed=0

# judge NAME CODE PATTERN RC SECONDS: a finished check passes if it exited with CODE and printed PATTERN.
judge() {
  local name=$1 code=$2 pattern=$3 rc=$4 seconds=$5
  if [ "$rc" = "$code" ] && grep -qE -- "$pattern" "$work/$name.log"; then
    echo "[plugins] ok    $name (exit $rc, $seconds s)"; passed=$((passed + 1))
  else
    echo "[plugins] FAIL  $name: exit $rc, wanted $code and /$pattern/"; tail -30 "$work/$name.log"; failed=$((failed + 1))
  fi
}
# expect NAME CODE PATTERN -- command...: runs the check and judges it.
expect() {
  local name=$1 code=$2 pattern=$3; shift 4
  local rc=0 start=$SECONDS
  "$@" > "$work/$name.log" 2>&1 || rc=$?
  judge "$name" "$code" "$pattern" "$rc" $(( SECONDS - start ))
}
# expect_later NAME CODE PATTERN -- command...: the same, started in the background beside the checks that follow (CI
# has two cores and most checks use one); expect_wait judges it.
declare -A later_pid later_code later_pattern
expect_later() {
  local name=$1
  later_code[$name]=$2 later_pattern[$name]=$3
  shift 4
  ( start=$SECONDS rc=0; "$@" > "$work/$name.log" 2>&1 || rc=$?; echo "$rc $(( SECONDS - start ))" > "$work/$name.rc" ) &
  later_pid[$name]=$!
}
expect_wait() {
  local name=$1 rc seconds
  wait "${later_pid[$name]}"
  read -r rc seconds < "$work/$name.rc"
  judge "$name" "${later_code[$name]}" "${later_pattern[$name]}" "$rc" "$seconds"
}

for variant in good broken broken-backward; do
  flags=(-DEXAMPLE_BROKEN=OFF -DEXAMPLE_BROKEN_BACKWARD=OFF)
  [ $variant = broken ] && flags[0]=-DEXAMPLE_BROKEN=ON
  [ $variant = broken-backward ] && flags[1]=-DEXAMPLE_BROKEN_BACKWARD=ON
  cmake -S examples/plugins/cpu_attention -B "$work/cpu-$variant" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" "${flags[@]}" \
    > "$work/cpu-$variant-configure.log" 2>&1 || { cat "$work/cpu-$variant-configure.log"; exit 1; }
  cmake --build "$work/cpu-$variant" > "$work/cpu-$variant-build.log" 2>&1 || { cat "$work/cpu-$variant-build.log"; exit 1; }
done
good=$work/cpu-good/libexample_cpu_attention.so broken=$work/cpu-broken/libexample_cpu_attention.so
broken_backward=$work/cpu-broken-backward/libexample_cpu_attention.so

expect plugin-listed 0 'example-cpu-attention' -- "$fc" --plugin "$good" list --json
# The longest check (every property, 400 cases: fewer miss a case length that is a multiple of 64 on this seed).
expect_later plugin-good-passes 0 'example-cpu-attention / conformance: 400 cases' -- \
  "$fc" --plugin "$good" fuzz --kernel example-cpu-attention --property all --cases 400 --seed 11 --out "$work/found-good"
expect plugin-broken-is-caught 1 'FOUND at case' -- \
  "$fc" --plugin "$broken" fuzz --kernel example-cpu-attention --property conformance --cases 400 --seed 11 --out "$work/found-broken"
expect plugin-good-backward-passes 0 'example-cpu-attention / grad-fd: 300 cases in .*0 failing' -- \
  "$fc" --plugin "$good" fuzz --kernel example-cpu-attention --property grad-conformance --property grad-gqa \
  --property grad-fd --cases 300 --seed 12 --out "$work/found-good-backward"
expect plugin-broken-backward-is-caught 1 'grad-gqa: 100 cases in .*, [1-9][0-9]* failing cases' -- \
  "$fc" --plugin "$broken_backward" fuzz --kernel example-cpu-attention --property grad-gqa --cases 100 --seed 11 \
  --shrink-seconds 3 --out "$work/found-broken-backward"
expect plugin-through-environment 0 'example-cpu-attention' -- env FLASHCHECK_PLUGINS="$good" "$fc" list
expect python-good-passes 0 'py:flashcheck_kernels.reference:attention / conformance: 150 cases' -- \
  "$fc" fuzz --kernel py:flashcheck_kernels.reference:attention --property all --cases 150 --seed 11 --out "$work/found-py-good"
expect python-broken-is-caught 1 'FOUND at case' -- \
  "$fc" fuzz --kernel py:flashcheck_kernels.reference:attention_top_left --property conformance --cases 300 --seed 11 --out "$work/found-py-broken"
# Its backward through autograd passes the gradient properties (the run above, --property all); a twin whose softcap
# passes gradients straight through (its derivative dropped) must be caught.
expect python-broken-backward-is-caught 1 'FOUND at case' -- \
  "$fc" fuzz --kernel py:flashcheck_kernels.reference:attention_softcap_no_derivative --property grad-conformance \
  --cases 300 --seed 11 --out "$work/found-py-broken-backward"
# The FlexAttention adapter's own translation of a case (document masks, windows, seqused_k, GQA, softcap, LSE,
# paged K/V through torch's PagedAttention helper), on the CPU through Dynamo's eager backend: a GPU campaign's
# finding is then about the kernel, not the adapter.
expect flex-adapter-on-cpu 0 'attention_cpu / conformance: 40 cases' -- \
  "$fc" fuzz --kernel py:flashcheck_kernels.flex_attention:attention_cpu --property conformance --cases 40 --seed 11 \
  --out "$work/found-flex-cpu"
expect flex-adapter-paged-on-cpu 0 'attention_cpu / paged-contiguous: 40 cases' -- \
  "$fc" fuzz --kernel py:flashcheck_kernels.flex_attention:attention_cpu --property paged-contiguous --cases 40 --seed 11 \
  --out "$work/found-flex-cpu-paged"
# A long-lived worker past Dynamo's recompile limit (128 graphs in the adapter; a realistic-size GPU worker reached it):
# with the limit at 2 every few cases cross it, and each must still be judged on a compiled graph, not end in an error.
expect flex-adapter-past-recompile-limit 0 'attention_cpu / conformance: 40 cases' -- \
  env FLASHCHECK_FLEX_RECOMPILE_LIMIT=2 "$fc" fuzz --kernel py:flashcheck_kernels.flex_attention:attention_cpu \
  --property conformance --cases 40 --seed 13 --out "$work/found-flex-cpu-recompile"
# The transport of a large wheel of sources to an offline GPU node (FlashInfer's, tools/wheels/xz_wheel.py): packed
# into one xz stream and back, it installs and imports unchanged, and a truncated archive is refused.
python=$(cat build/python-for-torch 2>/dev/null || echo build/venv/bin/python)
expect wheel-xz-round-trip 0 '^round trip ok$' -- "$python" tools/wheels/xz_wheel_test.py
# The FlashInfer adapter's plan()/run() arguments with a recording stand-in for flashinfer: masked and unmasked
# batches on separate wrappers (FlashInfer 0.7.4's ragged wrapper keeps an old mask), masks, indptrs, pages.
expect flashinfer-adapter-arguments 0 '^flashinfer adapter ok$' -- "$python" kernels/python/flashcheck_kernels/flashinfer_test.py
# The Python package from the installed prefix (PYTHONPATH=<prefix>/share/flashcheck/python; pip is ci/python.sh):
# it finds the prefix's executable, and the prefix's hf-live finds its Python half without the source tree.
expect python-package-from-prefix 0 'prefix ok' -- env PYTHONPATH="$prefix/share/flashcheck/python" "$python" -c "
import flashcheck, flashcheck._engine as e
assert str(e.binary()) == '$fc', e.binary()
assert flashcheck.check('tiled-cpu', properties='conformance', cases=20, seed=1, out='$work/prefix-check').passed
print('prefix ok')"
# (build/venv has no transformers: the worker fails to start, in the prefix's live.py)
expect hf-live-script-from-prefix 2 "$prefix/share/flashcheck/hf_live/live.py.*No module named 'transformers'" -- \
  bash -c "cd '$work' && '$fc' hf-live --python '$python' --fixtures '$root/fixtures/issues/hf-F1-decode-position-ids.json' \
           --generated 1 --out '$work/hf-live-prefix' 2>&1 | tr '\n' ' '; exit \${PIPESTATUS[0]}"

expect_wait plugin-good-passes
echo "plugins: $passed passed, $failed failed"
[ "$failed" = 0 ]
