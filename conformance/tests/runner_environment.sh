#!/usr/bin/env bash
# What a CI system's environment may hold cannot change a certification
# behind the kit's back: GoogleTest's shard variables become --shard (in every
# isolation mode, the shards together running every test once), GTEST_REPEAT
# and other GTEST_* variables are ignored with a note, RC_PARAMS's seed is
# the run's seed; a shard is partial (exit 3), never conformant.
set -uo pipefail
runner=$1 python=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "$*"; exit 1; }
# What is tested is how the runner treats its environment, not how deep the
# models look: a small model budget keeps nine host runs cheap.
# (The RC_PARAMS run below takes none: there RC_PARAMS must set the budget.)
small=(--model-runs 5 --model-length 20)

for mode in group none; do
  for index in 0 1; do
    code=0
    GTEST_SHARD_INDEX=$index GTEST_TOTAL_SHARDS=2 GTEST_SHARD_STATUS_FILE=$scratch/status \
      "$runner" run --adapter host "${small[@]}" --isolate "$mode" --quiet --report "$scratch/$mode-$index.json" >/dev/null 2>&1 || code=$?
    [[ $code -eq 3 ]] || fail "shard $index/2 ($mode): exit $code, expected 3 (partial)"
  done
done
[[ -f $scratch/status ]] || fail "GTEST_SHARD_STATUS_FILE was not touched"
"$runner" run --adapter host "${small[@]}" --jobs 1 --quiet --report "$scratch/all.json" >/dev/null 2>&1 || fail "host is not conformant"
GTEST_REPEAT=2 GTEST_FILTER='*Pins*' "$runner" run --adapter host "${small[@]}" --jobs 1 --quiet --report "$scratch/repeat.json" \
  >/dev/null 2>"$scratch/repeat.err" || fail "GTEST_REPEAT/GTEST_FILTER changed the run"
grep -q "ignoring GTEST_REPEAT" "$scratch/repeat.err" || fail "GTEST_REPEAT was ignored silently"
RC_PARAMS="seed=777 max_success=50" "$runner" run --adapter host --filter '*Property*' --isolate none \
  --report "$scratch/rc.json" >"$scratch/rc.out" 2>&1
grep -q "max_success=50" "$scratch/rc.out" || fail "RC_PARAMS's own settings were dropped"
"$runner" run --adapter host "${small[@]}" --jobs 1 --repeat 2 --quiet --report "$scratch/twice.json" >/dev/null 2>&1 || fail "--repeat 2 on host"
"$runner" list tests --adapter host --format json >"$scratch/list.json" || fail "list tests --format json"
"$runner" run --adapter host "${small[@]}" --jobs 1 --report "$scratch/log.json" >/dev/null 2>"$scratch/log.err" </dev/null
grep -q "Adapters/Allocator done: " "$scratch/log.err" || fail "no per-suite progress lines in a non-terminal log"
"$python" - "$scratch" <<'PY' || fail "the shards do not add up to the whole run"
import json, pathlib, sys
d = pathlib.Path(sys.argv[1])
load = lambda name: json.loads((d / name).read_text())
everything = sorted(t["id"] for t in load("all.json")["tests"])
for mode in ("group", "none"):
    shards = [load(f"{mode}-{i}.json") for i in (0, 1)]
    ids = [t["id"] for s in shards for t in s["tests"]]
    assert sorted(ids) == everything, (mode, len(ids), len(everything))
    assert [s["run"]["shard"] for s in shards] == ["0/2", "1/2"]
    assert all(t["status"] in ("pass", "not-applicable") for s in shards for t in s["tests"])
    assert all(s["verdict"]["overall"] == "partial" for s in shards)
repeat = load("repeat.json")
assert len({t["id"] for t in repeat["tests"]}) == len(repeat["tests"]) == len(everything), "GTEST_REPEAT/FILTER leaked"
assert load("rc.json")["run"]["seed"] == 777
twice = load("twice.json")
assert len(twice["tests"]) == len(everything) and all(t["runs"] == 2 for t in twice["tests"])
listed = load("list.json")["tests"]
assert sorted(t["id"] for t in listed) == everything and all(t["requirements"] for t in listed if "Property" not in t["id"])
PY
echo ok
