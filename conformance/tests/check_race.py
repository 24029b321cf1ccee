#!/usr/bin/env python3
"""Certifies a race mutant under ThreadSanitizer, 20 times, and checks it is caught every time.

Usage: check_race.py RUNNER MANIFEST NAME REPORT_DIR

The runner is the tsan build. Each run selects the mutant's race_filter
(the concurrency tests); the mutant is caught when the run exits 1 and a
requirement fails. A race caught in 19 runs of 20 is not caught: the kit
would pass it one CI run in twenty.
"""
import json
import pathlib
import subprocess
import sys

RUNS = 20


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    runner, manifest, name, report_dir = argv[1:]
    document = json.loads(pathlib.Path(manifest).read_text())
    entry = next((m for m in document["mutants"] + document.get("escapes", []) if m["name"] == name), None)
    if entry is None or "race_filter" not in entry:
        print(f"{name} is not a race mutant of {manifest}", file=sys.stderr)
        return 2
    report = pathlib.Path(report_dir) / ("race_" + name.replace(":", "_") + ".json")
    for run in range(1, RUNS + 1):
        report.unlink(missing_ok=True)
        done = subprocess.run([runner, "run", "--adapter", name, "--filter", entry["race_filter"], "--jobs", "1",
                               "--timeout", "60", "--seed", str(run), "--quiet", "--report", str(report)],
                              capture_output=True, text=True, timeout=600)
        failed = []
        if report.exists():
            failed = [r["id"] for r in json.loads(report.read_text())["requirements"] if r["status"] == "fail"]
        if done.returncode != 1 or not failed:
            print(f"{name}: run {run} of {RUNS} passed it (exit {done.returncode}): {entry['breaks']}", file=sys.stderr)
            return 1
    print(f"{name}: caught in {RUNS} runs of {RUNS} under ThreadSanitizer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
