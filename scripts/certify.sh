#!/usr/bin/env bash
# The kit's main job: install what is missing, build, certify the host
# reference implementations with ortmem-cts, and print where the reports are.
#
#   bash scripts/certify.sh                   # host and host-vmm
#   bash scripts/certify.sh --adapter NAME    # one adapter (see `ortmem-cts list adapters`)
#
# host is the eager reference (core, pins, deferred); host-vmm is the virtual
# memory reference that also declares virtual backing and shared mapping.
# Exits with the worst of the runs' statuses: 2 (usage or infrastructure
# error) over 1 (not conformant) over 3 (incomplete or partial) over 0
# (conformant); see README.md, "Exit status".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

adapters=(host host-vmm)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --adapter) adapters=("${2:?--adapter needs a name}"); shift 2 ;;
    *) echo "certify.sh: unknown argument '$1'; use --adapter NAME" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default

# A partial run never ranks worse than a not-conformant one.
rank() { case "$1" in 0) echo 0 ;; 3) echo 1 ;; 1) echo 2 ;; *) echo 3 ;; esac; }

report_dir=build/default/reports
mkdir -p "$report_dir"
status=0
for adapter in "${adapters[@]}"; do
  echo "== certifying $adapter"
  # The runner writes each report atomically and prints its path.
  code=0
  build/default/ortmem-cts run --adapter "$adapter" --report "$report_dir/$adapter.json" || code=$?
  if (( $(rank "$code") > $(rank "$status") )); then status=$code; fi
done
exit "$status"
