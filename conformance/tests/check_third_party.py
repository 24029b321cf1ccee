#!/usr/bin/env python3
"""Checks a third-party allocator's certification against its committed report.

  check_third_party.py RUNNER PLUGIN COMMITTED_JSON OUT
  check_third_party.py drift RUNNER PLUGIN COMMITTED_JSON OUT
      The same check against a copy of COMMITTED_JSON with one requirement's
      status changed must fail, naming that requirement: the check can fail.

Certifies PLUGIN (seed 20261201, the seed the committed report was made with)
and compares the verdict with COMMITTED_JSON requirement by requirement, not
byte by byte: every requirement must have the committed status, every profile
the committed result, and `report diff COMMITTED NEW` must find no regression
and no fix. An allocator that really deviates keeps failing its requirements
without failing CI; a change in what it fails (an allocator update, a kit
check that grew stronger or weaker) fails here until the committed report is
regenerated on purpose (scripts/third-party-reports.sh) and the change read.
"""
import json
import pathlib
import subprocess
import sys

SEED = "20261201"
EXIT_OF_VERDICT = {"conformant": 0, "not-conformant": 1}


def check(runner, plugin, committed_path, out):
    """Problems with PLUGIN's fresh verdict against COMMITTED_JSON; empty when it matches."""
    out.mkdir(parents=True, exist_ok=True)
    committed = json.loads(pathlib.Path(committed_path).read_text())
    report = out / pathlib.Path(committed_path).name
    report.unlink(missing_ok=True)
    run = subprocess.run([runner, "run", "--adapter", plugin, "--seed", SEED, "--quiet", "--jobs", "2",
                          "--report", str(report)], capture_output=True, text=True, timeout=900)
    expected_exit = EXIT_OF_VERDICT.get(committed["verdict"]["overall"], 3)
    if run.returncode not in EXIT_OF_VERDICT.values() or not report.exists():
        return [f"exit {run.returncode}, expected {expected_exit} (committed verdict "
                f"{committed['verdict']['overall']}):\n{run.stdout[-1500:]}{run.stderr[-1500:]}"]
    problems = []
    if run.returncode != expected_exit:
        problems.append(f"exit {run.returncode}, expected {expected_exit} (committed verdict {committed['verdict']['overall']})")
    fresh = json.loads(report.read_text())
    status = {r["id"]: r["status"] for r in fresh["requirements"]}
    for requirement in committed["requirements"]:
        now = status.get(requirement["id"], "absent")
        if now != requirement["status"]:
            problems.append(f"{requirement['id']}: {now}, committed {requirement['status']}")
    results = {p["name"]: p["result"] for p in fresh["verdict"]["profiles"]}
    for profile in committed["verdict"]["profiles"]:
        if results.get(profile["name"]) != profile["result"]:
            problems.append(f"profile {profile['name']}: {results.get(profile['name'])}, committed {profile['result']}")
    diff = subprocess.run([runner, "report", "diff", str(committed_path), str(report)], capture_output=True, text=True)
    if diff.returncode not in (0, 1):
        problems.append(f"report diff failed (exit {diff.returncode}): {diff.stderr.strip()}")
    problems += [f"report diff: {line}" for line in diff.stdout.splitlines() if line.startswith(("regression:", "fix:"))]
    return problems


def drift(runner, plugin, committed_path, out):
    """The check fails on a committed report that differs in one requirement."""
    committed = json.loads(pathlib.Path(committed_path).read_text())
    changed = next(r for r in committed["requirements"] if r["status"] == "pass")
    changed["status"] = "fail"
    tampered = out / ("drifted-" + pathlib.Path(committed_path).name)
    out.mkdir(parents=True, exist_ok=True)
    tampered.write_text(json.dumps(committed))
    problems = check(runner, plugin, tampered, out / "drift")
    if not any(problem.startswith(changed["id"] + ":") for problem in problems):
        return [f"a committed report with {changed['id']} changed to fail was not caught: {problems}"]
    print(f"a committed report with {changed['id']} changed was caught: {problems[0]}")
    return []


def main():
    if sys.argv[1] == "drift":
        runner, plugin, committed_path, out = sys.argv[2:6]
        problems = drift(runner, plugin, committed_path, pathlib.Path(out))
    else:
        runner, plugin, committed_path, out = sys.argv[1:5]
        problems = check(runner, plugin, committed_path, pathlib.Path(out))
        if problems:
            problems.append(f"{plugin}: the verdict differs from {committed_path}; if the change is meant, "
                            "regenerate it with scripts/third-party-reports.sh and say why in the commit")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
