#!/usr/bin/env bash
# Regenerates reports/third_party/: certifies each third-party allocator
# plugin the default build made (adapters/third_party/) with the seed CI
# checks against, and writes its JSON report, the Markdown rendering of it,
# and summary.md, a table of allocator, Debian version and verdict per
# profile, with every requirement it fails. CI compares fresh verdicts with
# these requirement by requirement (conformance/tests/check_third_party.py):
# rerun this only when a change in what an allocator passes is meant, and
# read the diff.
#
#   bash scripts/third-party-reports.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runner=build/default/ortmem-cts
plugins=build/default/plugins/third_party
[[ -x $runner ]] || { echo "third-party-reports: build first (cmake --build --preset default)" >&2; exit 2; }
out=reports/third_party
mkdir -p "$out"

package_of() {
  case "$1" in
    glibc) echo libc6 ;;
    mimalloc) echo libmimalloc2.0 ;;
    jemalloc) echo libjemalloc-dev ;;
    tcmalloc) echo libtcmalloc-minimal4 ;;
  esac
}

rows=()
for name in glibc mimalloc jemalloc tcmalloc; do
  plugin=$plugins/libnxmem_$name.so
  if [[ ! -f $plugin ]]; then
    echo "third-party-reports: $plugin was not built (is its package installed? scripts/install-deps.sh)" >&2
    exit 2
  fi
  status=0
  "$runner" run --adapter "$plugin" --seed 20261201 --quiet --jobs 2 --report "$out/$name.json" >/dev/null || status=$?
  [[ $status -le 1 ]] || { echo "third-party-reports: $name: exit $status" >&2; exit 2; }
  "$runner" report render "$out/$name.json" --output "$out/$name.md"
  version=$(dpkg-query -W -f='${Version}' "$(package_of "$name")")
  rows+=("$(python3 - "$out/$name.json" "$name" "$version" <<'PY'
import json, sys
report, name, version = sys.argv[1:4]
data = json.load(open(report))
profiles = ", ".join(f"{p['name']} {p['result']}" for p in data["verdict"]["profiles"] if p["declared"])
failing = ", ".join(r["id"] for r in data["requirements"] if r["status"] == "fail") or "none"
print(f"| {name} | {version} | {data['verdict']['overall']} | {profiles} | {failing} |")
PY
)")
done
{
  echo "# Third-party allocators, certified"
  echo
  echo "Made by scripts/third-party-reports.sh; CI compares fresh verdicts with these, requirement by requirement."
  echo
  echo "| allocator | Debian version | verdict | profiles | failing requirements |"
  echo "|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} >"$out/summary.md"
cat "$out/summary.md"
