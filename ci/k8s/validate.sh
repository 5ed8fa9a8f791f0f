#!/usr/bin/env bash
# Validates the Kubernetes manifests of ci/k8s/ against the API schemas of a Kubernetes release, strictly
# (unknown fields are errors), with kubernetes-validate from PyPI (it carries the schemas: no cluster and
# no network needed), installed into build/venv-k8s; then runs the shard pods' command once per completion
# index (ci/k8s/check_shard_mapping.py) to check that JOB_COMPLETION_INDEX becomes --shard i/N.
#
#   ci/k8s/validate.sh [KUBERNETES_VERSION]   (default 1.33.0: backoffLimitPerIndex is GA there)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
venv="$root/build/venv-k8s"
if ! "$venv/bin/kubernetes-validate" --version > /dev/null 2>&1; then
  python3 -m venv "$venv"
  "$venv/bin/python3" -m pip install -q --disable-pip-version-check "kubernetes-validate==1.37.0"
fi
"$venv/bin/kubernetes-validate" --strict -k "${1:-1.33.0}" "$root"/ci/k8s/*.yaml
# The schema says nothing of what the pods run: run the shard pod's command per index with a stub flashcheck.
"$venv/bin/python3" "$root/ci/k8s/check_shard_mapping.py" "$root/ci/k8s/campaign-indexed-job.yaml"
