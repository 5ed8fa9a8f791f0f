#!/usr/bin/env bash
# tools/wheels/fa4.sh [--first DIR] [--second DIR] [--part-mb N] — downloads FlashAttention-4 and the packages it
# needs beyond the GPU node's image (cp312, manylinux x86_64, no dependencies resolved: the versions below are the
# ones run on the H200, results/RESULTS.md) and splits them for an offline node that accepts a limited size per visit.
# The CuTe DSL's cu13 library wheel alone is 92 MB; it is cut into NAME.whl.part-00, -01 (split -d), the first part
# going with the small wheels into --first (default .whl), the rest into --second (default .whl2). On the node, put
# the second folder's files into the first and point FLASHCHECK_WHEEL_DIR at it: ci/gpu.sh joins the parts and
# installs the wheels into build/site. Needs pip and PyPI; nothing here runs at test time.
set -euo pipefail
first=.whl second=.whl2 part_mb=50
while [ $# -gt 0 ]; do
  case "$1" in
    --first) first=$2; shift 2 ;;
    --second) second=$2; shift 2 ;;
    --part-mb) part_mb=$2; shift 2 ;;
    *) echo "tools/wheels/fa4.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
packages=(flash-attn-4==4.0.0b36 quack-kernels==0.6.5 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
          nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 apache-tvm-ffi==0.1.15.post2
          torch-c-dlpack-ext==0.1.5)
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any; do
  platforms+=(--platform "$p")
done
mkdir -p "$first" "$second"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d "$first" "${packages[@]}"
limit=$(( part_mb * 1000 * 1000 ))
for w in "$first"/*.whl; do
  [ "$(stat -c %s "$w")" -gt "$limit" ] || continue
  split -d -b "$limit" "$w" "$w.part-"
  rm "$w"
  for p in "$w".part-*; do [ "${p##*.part-}" = 00 ] || mv "$p" "$second/"; done
done
du -sh "$first" "$second"
