#!/usr/bin/env bash
# Crash safety, with the runner's two test doubles (double:segfaults-on-allocate
# raises a real SIGSEGV, double:hangs-on-allocate really hangs):
#   - a crash or a hang costs one test: the run goes on, reports every test
#     and exits 1;
#   - SIGTERM stops the children and writes the report marked incomplete (exit 3);
#   - after SIGKILL of the runner no child is left, the report path holds an
#     incomplete report (never the older conformant one), and `report recover`
#     turns the journal into a valid incomplete report.
set -uo pipefail
runner=$(realpath "$1") python=$2 schema=$3
scratch=$(mktemp -d)
pid=""
trap '[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; pkill -KILL -f "child --adapter double:" 2>/dev/null; rm -rf "$scratch"' EXIT
fail() { echo "$*"; exit 1; }
# What this judges is the runner and its files, not how hard the checks
# push: a small model budget (as runner_environment.sh) keeps each run short.
small=(--model-runs 5 --model-length 20)
children() { pgrep -f "child --adapter double:hangs-on-allocate" | wc -l; }
validate() {  # REPORT EXPECTED-OVERALL
  "$python" - "$1" "$schema" "$2" <<'PY'
import json, sys, jsonschema
report = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(report)
assert report["verdict"]["overall"] == sys.argv[3], (report["verdict"]["overall"], sys.argv[3])
PY
}

# A segfault costs the test it happened in.
code=0
"$runner" run --adapter double:segfaults-on-allocate --quiet --report "$scratch/crash.json" >"$scratch/crash.out" 2>&1 || code=$?
[[ $code -eq 1 ]] || fail "segfaulting adapter: exit $code, expected 1: $(tail -5 "$scratch/crash.out")"
validate "$scratch/crash.json" not-conformant || fail "segfaulting adapter: bad report"
"$python" - "$scratch/crash.json" <<'PY' || fail "segfaulting adapter: the report does not show one crash per test"
import json, sys
tests = json.load(open(sys.argv[1]))["tests"]
crashed = [t for t in tests if t["status"] == "crash"]
assert crashed and any(t["status"] == "pass" for t in tests), [t["status"] for t in tests]
assert all("signal 11" in t["failures"][0]["message"] and "--filter" in t["reproduce"] for t in crashed)
assert len({t["id"] for t in tests}) == len(tests), "a test was reported twice"
PY

# A hang costs its timeout.
start=$SECONDS
code=0
"$runner" run --adapter double:hangs-on-allocate --filter 'Adapters/Allocator.*' --timeout 1 --jobs 2 --quiet \
  --report "$scratch/hang.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 1 ]] || fail "hanging adapter: exit $code, expected 1"
"$python" - "$scratch/hang.json" <<'PY' || fail "hanging adapter: no timeouts in the report"
import json, sys
assert any(t["status"] == "timeout" for t in json.load(open(sys.argv[1]))["tests"])
PY
(( SECONDS - start < 60 )) || fail "hanging adapter: the run took $((SECONDS - start)) s"
[[ $(children) -eq 0 ]] || fail "hanging adapter: children outlived the run"

# A runaway allocation meets the memory limit and costs its test; no core is dumped.
code=0
(cd "$scratch" && "$runner" run --adapter double:runs-away-on-allocate --memory-limit 512 --jobs 1 --quiet \
  --filter 'Adapters/Allocator.*' --report runaway.json >/dev/null 2>&1) || code=$?
[[ $code -eq 1 ]] || fail "runaway adapter: exit $code, expected 1"
"$python" - "$scratch/runaway.json" <<'PY' || fail "runaway adapter: the runaway tests are not crashes while others pass"
import json, sys
tests = json.load(open(sys.argv[1]))["tests"]
assert any(t["status"] == "crash" and "signal 6" in t["failures"][0]["message"] for t in tests)
assert any(t["status"] == "pass" for t in tests)
PY
[[ -z $(find "$scratch" -name 'core*') ]] || fail "runaway adapter: a core was dumped"

# A test that passes once and fails once is flaky, and flaky is a failure.
code=0
"$runner" run --adapter double:misaligns-every-other-instance --isolate none --repeat 2 --quiet \
  --filter '*ReturnsNonNullAligned*' --report "$scratch/flaky.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 1 ]] || fail "flaky adapter: exit $code, expected 1"
"$python" - "$scratch/flaky.json" <<'PY' || fail "flaky adapter: not reported as flaky"
import json, sys
report = json.load(open(sys.argv[1]))
(test,) = report["tests"]
assert (test["status"], test["runs"], test["failed_runs"]) == ("flaky", 2, 1), test
assert "--repeat 2" in test["reproduce"] and report["verdict"]["overall"] == "not-conformant"
PY
"$runner" run --adapter double:misaligns-every-other-instance --stress 4 --quiet --jobs 1 \
  --filter '*ReturnsNonNullAligned*' --report "$scratch/stress.json" >/dev/null 2>&1
"$python" - "$scratch/stress.json" <<'PY' || fail "--stress: not four isolated runs under load"
import json, sys
report = json.load(open(sys.argv[1]))
(test,) = report["tests"]
assert report["run"]["stress"] and report["run"]["repeat"] == 4 and test["runs"] == 4, (report["run"], test)
PY

# Starts a run that hangs in its allocator tests while the other suites finish,
# and waits until the journal holds finished tests.
start_hanging_run() {  # REPORT
  echo '{"expectations": [{"requirement": "ALLOC-007", "reason": "kept through a kill"}]}' >"$scratch/expect.json"
  # Every allocator suite (3) hangs; the other slots keep the rest going.
  "$runner" run --adapter double:hangs-on-allocate --timeout 120 --jobs 6 --quiet --expectations "$scratch/expect.json" \
    --report "$1" >"$1.out" 2>&1 &
  pid=$!
  for _ in $(seq 200); do
    [[ -f $1.journal && $(wc -l <"$1.journal") -ge 3 ]] && return 0
    sleep 0.05
  done
  fail "the hanging run never journaled a test"
}

# SIGTERM: children stopped, report written from what finished, exit 3.
start_hanging_run "$scratch/term.json"
kill -TERM "$pid"
code=0
wait "$pid" || code=$?
[[ $code -eq 3 ]] || fail "SIGTERM: exit $code, expected 3: $(cat "$scratch/term.json.out")"
validate "$scratch/term.json" incomplete || fail "SIGTERM: the report is not a valid incomplete one"
grep -q '"interruption": "interrupted by TERM' "$scratch/term.json" || fail "SIGTERM: the report does not say why"
[[ ! -e $scratch/term.json.journal ]] || fail "SIGTERM: the journal was left behind"
sleep 0.2
[[ $(children) -eq 0 ]] || fail "SIGTERM: children outlived the run"

# SIGKILL: an older conformant report must not survive as if current.
"$runner" run --adapter host "${small[@]}" --quiet --report "$scratch/kill.json" >/dev/null 2>&1 || fail "host is not conformant"
validate "$scratch/kill.json" conformant || fail "host report"
start_hanging_run "$scratch/kill.json"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
for _ in $(seq 40); do [[ $(children) -eq 0 ]] && break; sleep 0.05; done
[[ $(children) -eq 0 ]] || fail "SIGKILL: children outlived the runner"
validate "$scratch/kill.json" incomplete || fail "SIGKILL: the report path does not say incomplete"
code=0
"$runner" report recover "$scratch/kill.json.journal" >"$scratch/recover.out" 2>&1 || code=$?
[[ $code -eq 3 ]] || fail "recover: exit $code, expected 3: $(cat "$scratch/recover.out")"
validate "$scratch/kill.json" incomplete || fail "recover: not a valid incomplete report"
"$python" - "$scratch/kill.json" <<'PY' || fail "recover: the journaled tests are missing"
import json, sys
report = json.load(open(sys.argv[1]))
assert len(report["tests"]) >= 2 and "recovered from" in report["run"]["interruption"], report["run"]
assert [w["reason"] for w in report["waivers"]] == ["kept through a kill"], report["waivers"]
PY
[[ ! -e $scratch/kill.json.journal ]] || fail "recover: the journal was left behind"
code=0
err=$("$runner" report recover "$scratch/kill.json" 2>&1) || code=$?
[[ $code -eq 2 && $err == *"not an ortmem-cts journal"* ]] || fail "recover of a non-journal: exit $code, '$err'"
echo ok
