#!/usr/bin/env bash
# Prepares a machine for building flashcheck. Idempotent: a second run only checks.
#
#   ci/setup.sh                 Debian packages through apt (as root), LibTorch from PyPI into build/venv
#   ci/setup.sh --deb-dir DIR   offline node: unpack the .deb files of DIR into build/deps (no apt, no root)
#
# LibTorch comes from the PyPI `torch` wheel, pinned to the GPU nodes' version, installed into a virtual
# environment inside the build area and never into the system Python. A machine whose python3 already
# has that torch (a GPU node) uses it as is; FLASHCHECK_PYTHON names another interpreter that has it.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="$root/build"
torch_version=2.11.0
deb_dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --deb-dir) deb_dir=$(cd "$2" && pwd); shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "ci/setup.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

packages=(cmake ninja-build g++ libgtest-dev libgmock-dev librapidcheck-dev libfmt-dev
          nlohmann-json3-dev libcli11-dev libdlpack-dev libpugixml-dev python3-jsonschema pybind11-dev)
mkdir -p "$build"

log() { printf '[setup] %s\n' "$*" >&2; }

# --- Debian packages ---------------------------------------------------------------------------
if [ -n "$deb_dir" ]; then
  # Offline node: headers and CMake configs go to a private prefix that CMakeLists.txt picks up.
  mkdir -p "$build/deps"
  for f in "$deb_dir"/*.deb; do
    [ -e "$f" ] || { echo "ci/setup.sh: no .deb files in $deb_dir" >&2; exit 2; }
    stamp="$build/deps/.$(basename "$f").unpacked"
    [ -e "$stamp" ] || { dpkg -x "$f" "$build/deps" && touch "$stamp"; }
  done
  log "unpacked $(ls "$deb_dir"/*.deb | wc -l) packages into build/deps"
else
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# --- LibTorch ----------------------------------------------------------------------------------
has_torch() { "$1" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$torch_version' else 1)" 2>/dev/null; }

python_for_torch=""
if [ -n "${FLASHCHECK_PYTHON:-}" ]; then
  has_torch "$FLASHCHECK_PYTHON" || { echo "ci/setup.sh: FLASHCHECK_PYTHON=$FLASHCHECK_PYTHON has no torch $torch_version" >&2; exit 2; }
  python_for_torch=$FLASHCHECK_PYTHON
elif [ -x "$build/venv/bin/python3" ] && has_torch "$build/venv/bin/python3"; then
  python_for_torch="$build/venv/bin/python3"
elif has_torch python3; then
  python_for_torch=$(command -v python3)
else
  log "installing torch==$torch_version from PyPI into build/venv"
  python3 -m venv "$build/venv"
  "$build/venv/bin/python3" -m pip install -q --disable-pip-version-check "torch==$torch_version"
  python_for_torch="$build/venv/bin/python3"
fi
# The tests read files written by Python's safetensors and check that it reads ours.
if ! "$python_for_torch" -c "import numpy, safetensors.torch" 2>/dev/null; then
  log "installing safetensors from PyPI next to torch"
  "$python_for_torch" -m pip install -q --disable-pip-version-check "safetensors==0.7.0" packaging numpy
fi
# `flashcheck merge` draws the plots of its HTML report with matplotlib (tools/campaign_report.py). An offline
# GPU node may lack it: its merges then say so and write the report without plots; CI must have it.
if ! "$python_for_torch" -c "import matplotlib" 2>/dev/null; then
  log "installing matplotlib from PyPI next to torch"
  if ! "$python_for_torch" -m pip install -q --disable-pip-version-check "matplotlib==3.11.2"; then
    [ -z "${CI:-}" ] || { echo "ci/setup.sh: cannot install matplotlib" >&2; exit 1; }
    log "matplotlib not installed: campaign merges will write report.html without plots"
  fi
fi
echo "$python_for_torch" > "$build/python-for-torch"
log "torch: $("$python_for_torch" -c 'import torch; print(torch.__version__, torch.utils.cmake_prefix_path)' 2>/dev/null)"
