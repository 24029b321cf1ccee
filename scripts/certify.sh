#!/usr/bin/env bash
# The kit's main job: install what is missing, build, certify the host
# reference implementations with ortmem-cts, and print where the reports are.
#
#   bash scripts/certify.sh                   # host and host-vmm
#   bash scripts/certify.sh --adapter NAME    # one adapter (see `ortmem-cts list adapters`)
#   bash scripts/certify.sh --sanitize thread|address
#                                             # kit and adapters built under TSan or ASan+UBSan:
#                                             # a race or memory error in an adapter fails its test
#
# host is the eager reference (core, pins, deferred); host-vmm is the virtual
# memory reference that also declares virtual backing and shared mapping.
# Exits with the worst of the runs' statuses: 2 (usage or infrastructure
# error) over 1 (not conformant) over 3 (incomplete or partial) over 0
# (conformant); see README.md, "Exit status".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

adapters=(host host-vmm)
preset=default
while [[ $# -gt 0 ]]; do
  case "$1" in
    --adapter) adapters=("${2:?--adapter needs a name}"); shift 2 ;;
    --sanitize)
      case "${2:-}" in
        thread) preset=tsan ;;
        address) preset=asan ;;
        *) echo "certify.sh: --sanitize takes thread or address, not '${2:-}'" >&2; exit 2 ;;
      esac
      shift 2 ;;
    *) echo "certify.sh: unknown argument '$1'; use --adapter NAME or --sanitize thread|address" >&2; exit 2 ;;
  esac
done

# The sanitizers' options as the presets' tests use them (CMakePresets.json):
# a huge request must come back as a refusal, not abort the process.
case "$preset" in
  asan) export ASAN_OPTIONS="${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1:abort_on_error=1}"
        export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" ;;
  tsan) export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1}" ;;
esac

bash scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"

# A partial run never ranks worse than a not-conformant one.
rank() { case "$1" in 0) echo 0 ;; 3) echo 1 ;; 1) echo 2 ;; *) echo 3 ;; esac; }

report_dir=build/$preset/reports
mkdir -p "$report_dir"
status=0
for adapter in "${adapters[@]}"; do
  echo "== certifying $adapter"
  # The runner writes each report atomically and prints its path.
  code=0
  build/$preset/ortmem-cts run --adapter "$adapter" --report "$report_dir/$adapter.json" || code=$?
  if (( $(rank "$code") > $(rank "$status") )); then status=$code; fi
done
exit "$status"
