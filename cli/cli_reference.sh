#!/usr/bin/env bash
# docs/CLI.md, the command-line reference, generated from the parser itself so that it cannot go stale:
#   cli/cli_reference.sh build/cpu/cli/flashcheck > docs/CLI.md          # regenerate
#   cli/cli_reference.sh build/cpu/cli/flashcheck --check docs/CLI.md    # ctest cli.reference_is_current
set -euo pipefail
exe=$1
render() {
  local norm='s#^Usage: [^ ]*flashcheck#Usage: flashcheck#'
  cat <<'MD'
# Command-line reference

Generated from the parser of the CPU build (`cli/cli_reference.sh build/cpu/cli/flashcheck > docs/CLI.md`; ctest
`cli.reference_is_current` fails when it differs). The CUDA build has the same commands; where an option needs it
(`campaign --gpus`, `bench --in-flight`) a CPU build says so when it is used. Exit codes: 0 as expected, 1 a failure
(or a known bug that now passes), 2 bad usage or input, or an output that cannot be written.

```text
MD
  "$exe" --help-all | sed -E "$norm"
  printf '```\n\n## fixture new\n\n```text\n'
  "$exe" fixture new --help | sed -E "$norm"
  printf '```\n'
}
if [ "${2:-}" = --check ]; then
  diff -u "$3" <(render) > /dev/null || {
    diff -u "$3" <(render) | head -40
    echo "$3 is not the parser's help: regenerate it with cli/cli_reference.sh $exe > $3"
    exit 1
  }
  echo "$3 is current"
else
  render
fi
