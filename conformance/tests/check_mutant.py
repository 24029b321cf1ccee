#!/usr/bin/env python3
"""Certifies one known-bad adapter and checks that the kit caught it.

Usage: check_mutant.py RUNNER MANIFEST NAME REPORT_DIR

Passes when the runner exits 1 (not 2, not a crash), writes a report, and the
requirements with status fail are exactly those the manifest lists under
must_fail: a missing one is a rule the kit let through, an extra one a failure
blamed on the wrong requirement. The seed is fixed so the set is reproducible. Tests run in
child processes (one at a time: ctest runs these checks in parallel) with a
short deadline, so a mutant that crashes or hangs costs seconds, not the suite.
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
    entry = next((m for m in json.loads(pathlib.Path(manifest).read_text())["mutants"] if m["name"] == name), None)
    if entry is None:
        print(f"{name} is not in {manifest}", file=sys.stderr)
        return 2
    report = pathlib.Path(report_dir) / (name.replace(":", "_") + ".json")
    report.unlink(missing_ok=True)
    run = subprocess.run([runner, "run", "--adapter", name, "--jobs", "1", "--timeout", "2", "--seed", SEED, "--quiet",
                          "--report", str(report)], capture_output=True, text=True, timeout=600)
    problems = []
    if run.returncode != 1:
        problems.append(f"exit status {run.returncode}, expected 1 (not conformant); stderr: {run.stderr.strip()[-500:]}")
    if not report.exists():
        problems.append("no report was written")
    else:
        statuses = {r["id"]: r["status"] for r in json.loads(report.read_text())["requirements"]}
        failed = {rid for rid, status in statuses.items() if status == "fail"}
        for rid in entry["must_fail"]:
            if rid not in failed:
                problems.append(f"{rid} is {statuses.get(rid, 'absent')}, expected fail ({entry['breaks']})")
        for rid in sorted(failed - set(entry["must_fail"])):
            problems.append(f"{rid} failed, but the manifest does not list it: a check blamed the wrong requirement, "
                            f"or the mutant breaks more than it says (then list it)")
    for problem in problems:
        print(f"{name}: {problem}", file=sys.stderr)
    if not problems:
        print(f"{name}: killed ({', '.join(entry['must_fail'])} fail)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
