#!/usr/bin/env bash
# The kit's main job: install what is missing, build, certify the host
# reference implementation with ortmem-cts, and print where its report is.
# Exits as the runner does: 0 conformant, 1 not conformant, 2 usage or
# infrastructure error.
#
#   bash scripts/certify.sh                 # the host adapter
#   bash scripts/certify.sh --adapter NAME  # any compiled-in adapter (see `ortmem-cts list adapters`)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

adapter=host
while [[ $# -gt 0 ]]; do
  case "$1" in
    --adapter) adapter="${2:?--adapter needs a name}"; shift 2 ;;
    *) echo "certify.sh: unknown argument '$1'; use --adapter NAME" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default

report_dir=build/default/reports
mkdir -p "$report_dir"
# The runner writes the report atomically and prints its path.
exec build/default/ortmem-cts run --adapter "$adapter" --report "$report_dir/$adapter.json"
