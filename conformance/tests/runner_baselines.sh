#!/usr/bin/env bash
# Shards, merge, expectations and diff, end to end on real runs:
#   - the shards of a run (same --run-id and --seed) merge into a report with
#     the unsharded run's tests, order and verdict; shards of different runs
#     are refused;
#   - an expected failure is waived (verdict waived, exit 0), a stale or an
#     unexpectedly passing expectation is reported, a malformed file is exit 2;
#   - diff lists a regression and exits 1, and exits 0 on a fix.
set -uo pipefail
runner=$1 python=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "$*"; exit 1; }
# What this judges is the runner and its files, not how hard the checks
# push: a small model budget (as runner_environment.sh) keeps each run short.
small=(--model-runs 5 --model-length 20)

"$runner" run --adapter host "${small[@]}" --jobs 1 --quiet --seed 11 --report "$scratch/whole.json" >/dev/null 2>&1 || fail "host run"
for index in 0 1 2; do
  code=0
  "$runner" run --adapter host "${small[@]}" --jobs 1 --quiet --seed 11 --run-id ci-42 --shard "$index/3" \
    --report "$scratch/shard$index.json" >/dev/null 2>&1 || code=$?
  [[ $code -eq 3 ]] || fail "shard $index/3: exit $code, expected 3"
done
code=0
"$runner" report merge "$scratch"/shard{2,0,1}.json --report "$scratch/merged.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 0 ]] || fail "merge of every shard: exit $code, expected 0 (conformant)"
"$runner" report verify "$scratch/merged.json" >/dev/null || fail "the merged report does not verify"
code=0
"$runner" report merge "$scratch"/shard{0,1}.json --report "$scratch/two.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 3 ]] || fail "merge with a shard missing: exit $code, expected 3 (partial)"
"$runner" run --adapter host "${small[@]}" --jobs 1 --quiet --seed 11 --run-id other --shard 2/3 --report "$scratch/other.json" >/dev/null 2>&1
code=0
err=$("$runner" report merge "$scratch"/shard{0,1}.json "$scratch/other.json" --report "$scratch/bad.json" 2>&1) || code=$?
[[ $code -eq 2 && $err == *"run id differs"* ]] || fail "merge of different runs: exit $code, '$err'"
[[ ! -e $scratch/bad.json ]] || fail "a refused merge wrote a report"
"$python" - "$scratch/whole.json" "$scratch/merged.json" <<'PY' || fail "the merged report is not the unsharded one"
import json, sys
whole, merged = (json.load(open(p)) for p in sys.argv[1:3])
assert [t["id"] for t in whole["tests"]] == [t["id"] for t in merged["tests"]]
assert [(t["id"], t["status"]) for t in whole["tests"]] == [(t["id"], t["status"]) for t in merged["tests"]]
assert whole["verdict"] == merged["verdict"], (whole["verdict"]["overall"], merged["verdict"]["overall"])
assert merged["run"]["id"] == "ci-42" and "shard" not in merged["run"]
PY

cat >"$scratch/expect.json" <<'JSON'
{"expectations": [
  {"requirement": "ALLOC-005", "adapter": "mutant:misaligned", "status": "fail", "reason": "returns ptr+1 by design"},
  {"test": "Adapters/Allocator.Refuses*", "adapter": "mutant:misaligned", "reason": "its size+1 also breaks ptr+1 overflow checks"},
  {"test": "Adapters/AllocatorProbe.*", "adapter": "mutant:misaligned", "reason": "the probes see its ptr+1 and size+1 too"},
  {"test": "*NoSuchTest*", "reason": "an entry for a test that is gone"},
  {"requirement": "PIN-001", "adapter": "mutant:misaligned", "reason": "pins always passed"}
]}
JSON
code=0
"$runner" run --adapter mutant:misaligned "${small[@]}" --jobs 1 --quiet --expectations "$scratch/expect.json" \
  --report "$scratch/waived.json" >"$scratch/waived.out" 2>&1 || code=$?
[[ $code -eq 0 ]] || fail "every failure expected: exit $code, expected 0: $(tail -5 "$scratch/waived.out")"
grep -q "is stale" "$scratch/waived.out" && grep -q "is unexpected-pass" "$scratch/waived.out" ||
  fail "stale and unexpected-pass expectations are not reported: $(cat "$scratch/waived.out")"
"$runner" report verify "$scratch/waived.json" >/dev/null || fail "the waived report does not verify"
"$python" - "$scratch/waived.json" <<'PY' || fail "the waived report is wrong"
import json, sys
report = json.load(open(sys.argv[1]))
assert report["verdict"]["overall"] == "waived", report["verdict"]["overall"]
states = [w["state"] for w in report["waivers"]]
assert states == ["applied", "applied", "applied", "stale", "unexpected-pass"], states
waived = [t for t in report["tests"] if t["status"] == "waived"]
assert len(waived) >= 3 and all(t["actual_status"] == "fail" and "ptr+1" in t["waiver_reason"] for t in waived)
PY
echo '{"expectations": [{"test": "*", "reason": "x", "stauts": "fail"}]}' >"$scratch/typo.json"
code=0
err=$("$runner" run --adapter host --expectations "$scratch/typo.json" 2>&1 >/dev/null) || code=$?
[[ $code -eq 2 && $err == *"unknown key 'stauts'"* ]] || fail "a typo in expectations: exit $code, '$err'"

"$python" - "$scratch/whole.json" "$scratch/regressed.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
test = next(t for t in report["tests"] if "ALLOC-005" in t["requirements"])
test["status"] = "fail"
for r in report["requirements"]:
    if r["id"] in test["requirements"]:
        r["status"] = "fail"
report["verdict"]["overall"] = "not-conformant"
json.dump(report, open(sys.argv[2], "w"))
PY
code=0
out=$("$runner" report diff "$scratch/whole.json" "$scratch/regressed.json" 2>&1) || code=$?
[[ $code -eq 1 && $out == *"regression: ALLOC-005: pass -> fail"* ]] || fail "diff of a regression: exit $code, '$out'"
"$runner" report diff "$scratch/regressed.json" "$scratch/whole.json" >/dev/null || fail "diff of a fix exited non-zero"
code=0
"$runner" report diff "$scratch/whole.json" "$scratch/waived.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 2 ]] || fail "diff of two adapters: exit $code, expected 2"
echo ok
