#!/usr/bin/env bash
# --junit and --ctrf: valid against the formats' own definitions (the Ant
# JUnit XSD, vendored; the CTRF schema of the npm package ctrf), with every
# status mapped as README.md says: a failure is <failure>/failed, a crash an
# <error>/other with its raw status kept, not-applicable <skipped>/other.
# `report render` gives Markdown and HTML that name the failing requirements.
set -uo pipefail
runner=$1 python=$2 xsd=$3 ctrf_schema=$4 node_modules=$5
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "$*"; exit 1; }
# What this judges is the runner and its files, not how hard the checks
# push: a small model budget (as runner_environment.sh) keeps each run short.
small=(--model-runs 5 --model-length 20)
[[ -f $ctrf_schema ]] || fail "no CTRF schema at $ctrf_schema: run scripts/install-deps.sh"

for adapter in double:segfaults-on-allocate mutant:misaligned host; do
  name=${adapter//:/_}
  "$runner" run --adapter "$adapter" "${small[@]}" --jobs 1 --quiet --report "$scratch/$name.json" --junit "$scratch/$name.xml" \
    --ctrf "$scratch/$name.ctrf.json" >/dev/null 2>&1
  xmllint --noout --schema "$xsd" "$scratch/$name.xml" 2>"$scratch/xmllint.err" ||
    fail "$adapter: the JUnit file is not valid: $(head -5 "$scratch/xmllint.err")"
done
"$python" - "$scratch" "$ctrf_schema" <<'PY' || fail "the formats do not map the statuses as documented"
import json, pathlib, sys, jsonschema
import xml.etree.ElementTree as ET
d = pathlib.Path(sys.argv[1])
schema = json.load(open(sys.argv[2]))
for name in ("double_segfaults-on-allocate", "mutant_misaligned", "host"):
    report = json.loads((d / f"{name}.json").read_text())
    ctrf = json.loads((d / f"{name}.ctrf.json").read_text())
    jsonschema.Draft7Validator(schema).validate(ctrf)
    junit = ET.parse(d / f"{name}.xml").getroot()
    cases = {s.get("name") + "." + c.get("name"): c for s in junit for c in s.iter("testcase")}
    ctrf_tests = {t["name"]: t for t in ctrf["results"]["tests"]}
    assert len(cases) == len(ctrf_tests) == len(report["tests"]), name
    for test in report["tests"]:
        case, entry = cases[test["id"]], ctrf_tests[test["id"]]
        kinds = [child.tag for child in case]
        expected = {"pass": ([], "passed"), "fail": (["failure"], "failed"), "crash": (["error"], "other"),
                    "not-applicable": (["skipped"], "other")}[test["status"]]
        assert (kinds, entry["status"]) == expected, (test["id"], test["status"], kinds, entry["status"])
        assert entry["rawStatus"] == test["status"] and entry["tags"] == test["requirements"]
        suite = next(s for s in junit if s.get("name") == test["id"].split(".")[0])
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props["requirements:" + test["id"].split(".", 1)[1]] == " ".join(test["requirements"])
    assert ctrf["results"]["summary"]["tests"] == len(report["tests"])
PY
"$runner" report render "$scratch/mutant_misaligned.json" >"$scratch/r.md" || fail "render md failed"
grep -q "Verdict: not-conformant" "$scratch/r.md" && grep -q "### ALLOC-005" "$scratch/r.md" || fail "the Markdown misses the verdict or ALLOC-005"
"$runner" report render "$scratch/mutant_misaligned.json" --format html --output "$scratch/r.html" || fail "render html failed"
xmllint --html --noout "$scratch/r.html" 2>/dev/null || fail "the HTML does not parse"
grep -q 'id="verdict" class="not-conformant"' "$scratch/r.html" || fail "the HTML does not show the verdict"
! grep -Eq '<script|https?://' "$scratch/r.html" || fail "the HTML is not self-contained"
NODE_PATH=$node_modules node "$(dirname "$0")/html_in_browser.cjs" "$scratch/r.html" not-conformant ALLOC-005 ||
  fail "the HTML report does not show itself in Chromium"
code=0; "$runner" report render "$scratch/r.md" >/dev/null 2>&1 || code=$?
[[ $code -eq 2 ]] || fail "rendering a non-report: exit $code, expected 2"
echo ok
