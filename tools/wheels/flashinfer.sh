#!/usr/bin/env bash
# tools/wheels/flashinfer.sh [--dir DIR] [--aot] — downloads FlashInfer and the one package it imports beyond the GPU node's
# image (cp312, manylinux x86_64, no dependencies resolved) into DIR (default .whl), for an offline node that takes
# at most 64 MiB a visit. flashinfer-python is a 101 MB wheel of sources and headers for its JIT (716 MB unpacked);
# in one xz stream it is 25 MB, so it travels as NAME.whl.tar.xz (tools/wheels/xz_wheel.py), which ci/gpu.sh turns
# back into the wheel before installing. `import flashinfer` needs nothing else the node lacks: requests,
# nvidia-ml-py, einops, tqdm, tabulate and ninja are in its image (checked on the CPU: the import succeeds with only
# these; nvidia-cutlass-dsl, cuda-tile, nccl4py and the cuDNN frontend are needed by other backends only).
# --aot also compiles here, with nvcc and no GPU, the FlashInfer modules the adapter loads on an H200 (bf16, head dim
# 128: tools/wheels/flashinfer_aot.py; FLASHINFER_AOT_ARGS overrides its --arch/--dtype/--head-dim) into
# DIR/flashinfer-aot-sm90a.tar.xz, which ci/gpu.sh unpacks where FlashInfer looks before compiling: about 13 minutes
# on two cores against minutes of a GPU node's time. It uses FLASHCHECK_PYTHON (default build/venv/bin/python, which
# has torch) and a scratch install of FlashInfer for that Python.
# Needs pip and PyPI; nothing here runs at test time.
set -euo pipefail
dir=.whl
aot=
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --aot) aot=1; shift ;;
    *) echo "tools/wheels/flashinfer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 any; do
  platforms+=(--platform "$p")
done
mkdir -p "$dir"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
  -d "$dir" flashinfer-python==0.7.4 apache-tvm-ffi==0.1.15.post2
wheel="$dir/flashinfer_python-0.7.4-py3-none-any.whl"
if [ -n "$aot" ]; then
  py=${FLASHCHECK_PYTHON:-build/venv/bin/python}
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # FlashInfer's imports beyond torch, for this machine's Python (the node has them in its image)
  "$py" -m pip install -q --target "$scratch" --no-deps "$wheel" apache-tvm-ffi==0.1.15.post2
  "$py" -m pip install -q --target "$scratch" requests nvidia-ml-py einops tqdm tabulate ninja
  # shellcheck disable=SC2086
  PATH="$scratch/bin:$PATH" PYTHONPATH="$scratch" MAX_JOBS=$(nproc) "$py" "$here/flashinfer_aot.py" ${FLASHINFER_AOT_ARGS:-} \
    --out "$dir/flashinfer-aot-sm90a.tar.xz"
fi
python3 "$here/xz_wheel.py" pack "$wheel" "$wheel.tar.xz"
rm "$wheel"
du -sh "$dir"
