#!/usr/bin/env bash
# Certifies one CUDA adapter when this machine has a device, and otherwise
# checks that the runner refuses it the way the issue promises: exit 2, one
# line, naming the missing device. Without a device the test reports itself
# skipped (exit 77, ctest's SKIP_RETURN_CODE) with that reason.
set -uo pipefail
runner=$1 adapter=$2 reports=$3 python=$4 schema=$5
report=$reports/$adapter.json
rm -f "$report"
err=$("$runner" run --adapter "$adapter" --report "$report" 2>&1 >"$reports/$adapter.out"); code=$?
if [[ $code -eq 2 ]]; then
  [[ $(printf '%s\n' "$err" | wc -l) -eq 1 ]] || { echo "the refusal is not one line: $err"; exit 1; }
  [[ $err == *"cannot run here: no CUDA device"* ]] || { echo "exit 2 without naming the missing device: $err"; exit 1; }
  [[ ! -e $report ]] || { echo "a refused run left a report behind"; exit 1; }
  echo "not run: $err"
  exit 77
fi
[[ $code -eq 0 ]] || { echo "$adapter: exit $code"; tail -40 "$reports/$adapter.out"; exit 1; }
"$python" - "$report" "$schema" <<'PY'
import json, sys, jsonschema
report = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(report)
assert report["verdict"]["overall"] == "conformant", report["verdict"]
print({p["name"]: p["result"] for p in report["verdict"]["profiles"]})
PY
