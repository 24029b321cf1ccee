#!/usr/bin/env bash
# Certifies a compiled-in adapter that declares every capability: exit 0, a
# report that validates, all five contract profiles conformant (abi, the nxmem
# boundary, does not run for it), and every MUST of the virtual and shared
# profiles passing (none waved through as not-applicable).
set -euo pipefail
runner=$1 adapter=$2 reports=$3 python=$4 schema=$5
report=$reports/$adapter.json
rm -f "$report"
# shellcheck disable=SC2086 # the flags are words
"$runner" run --adapter "$adapter" ${ORTMEM_TEST_SANITIZED_FLAGS:-} --jobs 1 --report "$report" >"$reports/$adapter.out"
"$python" - "$report" "$schema" <<'PY'
import json, sys, jsonschema
report = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator(json.load(open(sys.argv[2]))).validate(report)
profiles = {p["name"]: p["result"] for p in report["verdict"]["profiles"]}
assert profiles.pop("abi") == "not-run", profiles
assert len(profiles) == 5 and all(result == "conformant" for result in profiles.values()), profiles
for requirement in report["requirements"]:
    if requirement["level"] == "MUST" and requirement["profile"] in ("virtual", "shared"):
        assert requirement["status"] == "pass", requirement
print(f'{len(report["tests"])} tests, all five profiles conformant')
PY
