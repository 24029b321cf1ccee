#!/usr/bin/env bash
# Runs the whole test suite: installs what is missing, configures and builds
# one CMake preset, then runs ctest on it.
#
#   bash scripts/test.sh                 # the default preset (RelWithDebInfo)
#   bash scripts/test.sh --preset asan   # AddressSanitizer + UBSan
#   bash scripts/test.sh --preset tsan   # ThreadSanitizer
# Extra arguments after `--` go to ctest (e.g. -- -R reference.HostAllocator).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

preset=default
while [[ $# -gt 0 ]]; do
  case "$1" in
    --preset) preset="${2:?--preset needs a name: default, debug, asan or tsan}"; shift 2 ;;
    --) shift; break ;;
    *) echo "test.sh: unknown argument '$1'; use --preset NAME [-- CTEST_ARGS...]" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" "$@"
