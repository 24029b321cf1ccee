#!/usr/bin/env bash
# Runs the host adapter, in three parts that ctest runs side by side:
#
#   report: certifies it, then checks what the report promises: exit 0,
#     schema-valid JSON, core/pins/deferred conformant with every MUST
#     requirement of those profiles passing; the report verifies, a tampered
#     one does not, a signed one verifies under its own key only.
#   scope: a --filter or --profile runs only what it selects and is partial
#     (exit 3), never conformant; the same --seed gives the same property runs.
#   isolation: the in-process, per-group and per-test modes run the same
#     tests with the same outcomes.
set -euo pipefail
runner=$1 reports=$2 python=$3 schema=$4 part=$5
# The certification explores with the full model budget. The other runs test
# what the runner does with a run (signing, filters, the isolation modes), not
# how deep the models look, so they take a small one.
small=(--model-runs 5 --model-length 20)
# Under a sanitizer, the signed run and the isolation modes take the subset of
# suites CMake names (ORTMEM_TEST_SANITIZED_SUBSET): what they test is the
# runner's handling of a run, which a subset exercises as a whole, and the
# certification above already ran every suite under the sanitizer. A subset
# is partial, exit 3.
subset=() passing=0
if [[ -n ${ORTMEM_TEST_SANITIZED_SUBSET:-} ]]; then
  subset=(--filter "$ORTMEM_TEST_SANITIZED_SUBSET") passing=3
fi
# A run that must pass (conformant, or partial for a subset): when it does
# not, say which run and what failed (set -e alone would end the test without a word).
certify() {
  local out=$reports/certify-$part.out code=0
  "$runner" run --adapter host "$@" >"$out" 2>&1 || code=$?
  [[ $code -eq $passing ]] || { echo "ortmem-cts run --adapter host $* exited $code, expected $passing:"; tail -n 40 "$out"; exit 1; }
}
case "$part" in
report)
report=$reports/host.json
rm -f "$report"
# shellcheck disable=SC2086 # the flags are words
"$runner" run --adapter host ${ORTMEM_TEST_SANITIZED_FLAGS:-} --jobs 1 --report "$report" >"$reports/host.out"
"$python" - "$report" "$schema" <<'PY'
import json, sys, jsonschema
report = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(report)
profiles = {p["name"]: p["result"] for p in report["verdict"]["profiles"]}
assert report["verdict"]["overall"] == "conformant", report["verdict"]
for name in ("core", "pins", "deferred"):
    assert profiles[name] == "conformant", (name, profiles)
assert report["tests"], "no tests in the report"
print(f'{len(report["tests"])} tests, {len(report["requirements"])} requirements, verdict {report["verdict"]["overall"]}')
PY
# The report verifies; a flipped verdict does not; a signed report needs its key.
"$runner" report verify "$report" >/dev/null || { echo "the host report does not verify"; exit 1; }
"$python" - "$report" "$reports/tampered.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
report["tests"][0]["status"] = "fail"
json.dump(report, open(sys.argv[2], "w"))
PY
code=0; "$runner" report verify "$reports/tampered.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 1 ]] || { echo "a tampered report: verify exit $code, expected 1"; exit 1; }
rm -f "$reports/key.sec" "$reports/key.pub" "$reports/other.sec" "$reports/other.pub"
"$runner" report keygen --secret "$reports/key.sec" --public "$reports/key.pub" >/dev/null
"$runner" report keygen --secret "$reports/other.sec" --public "$reports/other.pub" >/dev/null
[[ $(stat -c %a "$reports/key.sec") == 600 ]] || { echo "the secret key is not 0600"; exit 1; }
certify "${small[@]}" "${subset[@]}" --jobs 1 --quiet --sign "$reports/key.sec" --report "$reports/signed.json"
"$runner" report verify "$reports/signed.json" --pubkey "$reports/key.pub" >/dev/null || { echo "a signed report does not verify"; exit 1; }
code=0; "$runner" report verify "$reports/signed.json" --pubkey "$reports/other.pub" >/dev/null 2>&1 || code=$?
[[ $code -eq 1 ]] || { echo "a report signed by another key: verify exit $code, expected 1"; exit 1; }
;;
scope)
filtered=$reports/filtered.json
code=0
"$runner" run --adapter host "${small[@]}" --filter '*Pins*' --report "$filtered" >/dev/null 2>&1 || code=$?
[[ $code -eq 3 ]] || { echo "a filtered run exited $code, expected 3 (partial)"; exit 1; }
"$python" - "$filtered" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
tests = report["tests"]
assert tests and all("Pins" in t["id"] for t in tests), [t["id"] for t in tests]
assert report["verdict"]["overall"] == "partial" and report["run"]["scope"]["subset"], report["verdict"]
PY
code=0
"$runner" run --adapter host "${small[@]}" --profile core --quiet --report "$filtered" >/dev/null 2>&1 || code=$?
[[ $code -eq 3 ]] || { echo "--profile core exited $code, expected 3 (partial: pins and deferred not judged)"; exit 1; }
# The seed reaches RapidCheck and the report: the same --seed, the same runs.
for attempt in 1 2; do
  # A filtered run judges only part of the spec: partial, exit 3.
  code=0
  "$runner" run --adapter host --filter '*Property*' --seed 4242 --isolate none --report "$reports/seed$attempt.json" \
    >"$reports/seed$attempt.out" 2>&1 || code=$?
  [[ $code -eq 3 ]] || { echo "a filtered run exited $code, expected 3 (partial)"; exit 1; }
  grep -q "seed=4242" "$reports/seed$attempt.out" || { echo "RapidCheck did not get --seed 4242"; exit 1; }
done
"$python" - "$reports/seed1.json" "$reports/seed2.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["run"]["seed"] == b["run"]["seed"] == 4242
strip = lambda r: [(t["id"], t["status"], t.get("reproduce")) for t in r["tests"]]
assert strip(a) == strip(b), "the same seed gave different property runs"
assert all("--seed 4242" in t["reproduce"] for t in a["tests"]), "property tests must carry a reproduce command"
PY
;;
isolation)
# The three modes run the same tests with the same outcomes. In-process and
# per-group runs take every suite (under a sanitizer, the subset), so a test
# that leans on another's leftovers shows as a disagreement. One process per
# test (170 of them) takes a subset: it adds only the isolation of each test
# from its own suite's neighbours, and would cost more than the rest of this
# test together.
per_test=${ORTMEM_TEST_SANITIZED_SUBSET:-Adapters/Allocator.*:Adapters/Owning.*:Adapters/Deferred.*:Adapters/Pins.*}
certify "${small[@]}" "${subset[@]}" --isolate none --seed 99 --quiet --report "$reports/host-none.json"
certify "${small[@]}" "${subset[@]}" --seed 99 --quiet --report "$reports/host-group.json"
passing=3 certify "${small[@]}" --filter "$per_test" --isolate test --seed 99 --quiet --report "$reports/host-test.json"
"$python" - "$reports"/host-{none,group,test}.json <<'PY'
import json, sys
runs = [json.load(open(p)) for p in sys.argv[1:]]
assert [r["run"]["isolation"] for r in runs] == ["none", "group", "test"]
none, group, test = ({t["id"]: t["status"] for t in r["tests"]} for r in runs)
assert none == group, "in-process and per-group runs disagree: " + repr(
    sorted((k, none.get(k), group.get(k)) for k in set(none) | set(group) if none.get(k) != group.get(k)))
assert test and set(test) <= set(none), "the per-test run ran tests the others did not"
assert all(none[k] == v for k, v in test.items()), "one process per test disagrees: " + repr(
    sorted((k, none[k], v) for k, v in test.items() if none[k] != v))
print(f"{len(none)} tests agree in and per group, {len(test)} of them in one process each")
PY
;;
*) echo "runner_host.sh: the fifth argument is report, scope or isolation, not '$part'"; exit 2 ;;
esac
echo "ok"
