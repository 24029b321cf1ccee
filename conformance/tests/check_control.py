#!/usr/bin/env python3
"""Certifies one known-good adapter (a positive control) and checks that the kit passed it.

Usage: check_control.py RUNNER MANIFEST NAME REPORT_DIR

Passes when the runner exits 0 and the report's overall verdict is conformant:
a control takes a choice the contract permits, so any failure is the kit (or a
requirement) demanding more than the contract says.
"""
import json
import pathlib
import subprocess
import sys

SEED = "20261201"


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    runner, manifest, name, report_dir = argv[1:]
    entry = next((c for c in json.loads(pathlib.Path(manifest).read_text())["controls"] if c["name"] == name), None)
    if entry is None:
        print(f"{name} is not in {manifest}", file=sys.stderr)
        return 2
    report = pathlib.Path(report_dir) / (name.replace(":", "_") + ".json")
    report.unlink(missing_ok=True)
    run = subprocess.run([runner, "run", "--adapter", name, "--jobs", "1", "--seed", SEED, "--quiet",
                          "--report", str(report)], capture_output=True, text=True, timeout=600)
    problems = []
    if run.returncode != 0:
        problems.append(f"exit status {run.returncode}, expected 0 (conformant); stderr: {run.stderr.strip()[-500:]}")
    if report.exists():
        document = json.loads(report.read_text())
        if document["verdict"]["overall"] != "conformant":
            problems.append(f"overall verdict {document['verdict']['overall']}, expected conformant")
        for test in document["tests"]:
            for failure in test["failures"]:
                problems.append(f"{test['id']}: {failure['file']}:{failure['line']}: {failure['message'][:300]}")
    else:
        problems.append("no report was written")
    for problem in problems:
        print(f"{name} ({entry['choice']}): {problem}", file=sys.stderr)
    if not problems:
        print(f"{name}: conformant ({entry['choice']}, permitted by {', '.join(entry['permitted_by'])})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
