#!/usr/bin/env bash
# tools/hf_live/python.sh VERSION [args...] — the build's torch interpreter (build/python-for-torch, or HF_PYTHON) with
# transformers VERSION from build/hf/VERSION first on PYTHONPATH (tools/hf_live/install_release.sh installs it).
# `flashcheck hf-live --python tools/hf_live/python.sh` needs one word: HF_VERSION=4.55.0 selects the release then.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
v=${HF_VERSION:-}
if [ -z "$v" ]; then
  [ $# -gt 0 ] || { echo "usage: $0 VERSION [python args...] (or HF_VERSION=VERSION $0 [args...])" >&2; exit 2; }
  v=$1
  shift
fi
py=${HF_PYTHON:-$(cat "$root/build/python-for-torch" 2>/dev/null || true)}
[ -n "$py" ] || { echo "python.sh: build/python-for-torch is missing: run ci/setup.sh (or set HF_PYTHON)" >&2; exit 2; }
[ -d "$root/build/hf/$v" ] || { echo "python.sh: build/hf/$v is missing: tools/hf_live/install_release.sh $v" >&2; exit 2; }
PYTHONPATH="$root/build/hf/$v${PYTHONPATH:+:$PYTHONPATH}" exec "$py" "$@"
