#!/usr/bin/env python3
"""Certifies one known-bad or known-good adapter and checks the kit judged it right.

Usage: check_adapter.py mutant|control|race RUNNER MANIFEST NAME REPORT_DIR

mutant   The runner must exit 1 (not 2, not a crash) and write a report whose
         failing requirements are exactly the manifest's must_fail: a missing
         one is a rule the kit let through, an extra one a failure blamed on
         the wrong requirement.
control  A positive control takes a choice the contract permits: the runner
         must exit 0 with the verdict conformant and no failure at all, or the
         kit (or a requirement) demands more than the contract says.
race     The runner is the tsan build. Twenty runs of the mutant's race_filter
         must each exit 1 with a requirement failing: a race caught in 19 runs
         of 20 would pass one CI run in twenty.

The seed is fixed (race runs use seeds 1..20), so a verdict is reproducible.
Tests run one at a time in child processes (ctest runs these checks in
parallel), a mutant's with a deadline of its manifest entry's deadline_s where
it hangs tests on purpose (so each hang costs seconds) and otherwise one far
above the slowest sound test; a mutant whose only unexpected failures are
timeouts is certified again with room, so a loaded machine cannot fail it.
"""
import json
import os
import pathlib
import subprocess
import sys

SEED = "20261201"
RACE_RUNS = 20
# Far above the slowest sound test (a model-based suite: about 3.3 s on an
# idle core through the simulated CUDA driver), so a mutant is certified once:
# a deadline under it timed that test out in every virtual-memory mutant, and
# each was certified a second time. A mutant that hangs tests on purpose names
# a short deadline_s in its manifest entry, so each hang costs it seconds.
MUTANT_DEADLINE_S = 10
# The second certification of a mutant whose only unexpected failures are
# timeouts: three times its first deadline. Not a fixed 30 s: a mutant that
# hangs twenty tests on purpose with a 2 s deadline would then spend 600 s
# hanging, past ctest's limit, exactly when the machine is loaded.
LOADED_DEADLINE_FACTOR = 3


def certify(runner, name, report, extra):
    """Runs the runner on `name`; returns (exit status, stderr, report document or None)."""
    report.unlink(missing_ok=True)
    run = subprocess.run([runner, "run", "--adapter", name, "--jobs", "1", "--quiet", "--report", str(report)] + extra,
                         capture_output=True, text=True, timeout=600)
    document = json.loads(report.read_text()) if report.exists() else None
    return run.returncode, run.stderr.strip()[-500:], document


def failing(document):
    return {r["id"] for r in document["requirements"] if r["status"] == "fail"}


def sanitized_flags():
    """The runner flags CMake sets for a sanitized build (ORTMEM_TEST_SANITIZED_FLAGS), or none."""
    return os.environ.get("ORTMEM_TEST_SANITIZED_FLAGS", "").split()


def timed_out_only(document, rids):
    """The requirements of `rids` that only tests past the deadline charged: a
    failed check charges the requirements it names (all of its test's when it
    names none), a timeout, crash or error every requirement of its test."""
    charged_by = {}
    for test in document["tests"]:
        if test["status"] in ("pass", "not-applicable", "not-run", "skipped"):
            continue
        if test["status"] == "fail":
            charged = set()
            for failure in test["failures"]:
                # An empty list is a precondition's failure, which charges
                # nothing; only a failure naming no list charges the test's.
                named = failure.get("requirements")
                charged |= set(test["requirements"] if named is None else named)
        else:
            charged = set(test["requirements"])
        for rid in charged:
            charged_by.setdefault(rid, set()).add(test["status"])
    return {rid for rid in rids if charged_by.get(rid) == {"timeout"}}


def check_mutant(runner, entry, report):
    deadline = entry.get("deadline_s", MUTANT_DEADLINE_S)
    status, stderr, document = certify(runner, entry["name"], report, ["--timeout", str(deadline), "--seed", SEED])
    if status == 1 and document is not None:
        # A sound test can overrun the short deadline on a loaded machine (ctest
        # runs these in parallel with heavier ones): when every unexpected
        # failure is such a timeout, the verdict is taken again with room, so
        # load cannot fail a mutant, yet a test the mutant really hangs still
        # fails the second time (and the report left behind is that run's).
        unexpected = failing(document) - set(entry["must_fail"])
        if unexpected and timed_out_only(document, unexpected) == unexpected:
            status, stderr, document = certify(runner, entry["name"], report,
                                               ["--timeout", str(deadline * LOADED_DEADLINE_FACTOR), "--seed", SEED])
    problems = []
    if status != 1:
        problems.append(f"exit status {status}, expected 1 (not conformant); stderr: {stderr}")
    if document is None:
        return problems + ["no report was written"], ""
    statuses = {r["id"]: r["status"] for r in document["requirements"]}
    failed = failing(document)
    for rid in entry["must_fail"]:
        if rid not in failed:
            problems.append(f"{rid} is {statuses.get(rid, 'absent')}, expected fail ({entry['breaks']})")
    timed_out = timed_out_only(document, failed)
    for rid in sorted(failed - set(entry["must_fail"])):
        how = (f"only by a test past the {document['run']['timeout_s']:g} s deadline (a hang, or a machine too loaded)"
               if rid in timed_out else "")
        problems.append(f"{rid} failed{' ' + how if how else ''}, but the manifest does not list it: a check blamed "
                        f"the wrong requirement, or the mutant breaks more than it says (then list it)")
    return problems, f"killed ({', '.join(entry['must_fail'])} fail)"


def check_control(runner, entry, report):
    status, stderr, document = certify(runner, entry["name"], report, ["--seed", SEED, *sanitized_flags()])
    problems = []
    if status != 0:
        problems.append(f"exit status {status}, expected 0 (conformant); stderr: {stderr}")
    if document is None:
        return problems + ["no report was written"], ""
    if document["verdict"]["overall"] != "conformant":
        problems.append(f"overall verdict {document['verdict']['overall']}, expected conformant")
    for test in document["tests"]:
        for failure in test["failures"]:
            problems.append(f"{test['id']}: {failure['file']}:{failure['line']}: {failure['message'][:300]}")
    problems = [f"({entry['choice']}) {problem}" for problem in problems]
    return problems, f"conformant ({entry['choice']}, permitted by {', '.join(entry['permitted_by'])})"


def check_race(runner, entry, report):
    if "race_filter" not in entry:
        return ["is not a race mutant (no race_filter)"], ""
    for run in range(1, RACE_RUNS + 1):
        status, _, document = certify(runner, entry["name"], report,
                                      ["--filter", entry["race_filter"], "--timeout", "60", "--seed", str(run)])
        if status != 1 or document is None or not failing(document):
            return [f"run {run} of {RACE_RUNS} passed it (exit {status}): {entry['breaks']}"], ""
    return [], f"caught in {RACE_RUNS} runs of {RACE_RUNS} under ThreadSanitizer"


CHECKS = {"mutant": (check_mutant, ["mutants"]), "control": (check_control, ["controls"]),
          "race": (check_race, ["mutants", "escapes"])}


def main(argv):
    if len(argv) != 6 or argv[1] not in CHECKS:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    kind, runner, manifest, name, report_dir = argv[1:]
    check, groups = CHECKS[kind]
    document = json.loads(pathlib.Path(manifest).read_text())
    entry = next((e for group in groups for e in document.get(group, []) if e["name"] == name), None)
    if entry is None:
        print(f"{name} is not in {manifest} ({' or '.join(groups)})", file=sys.stderr)
        return 2
    # A mutant's report keeps its plain name: scripts/mutation_test.py reads it
    # back (--adapter-reports) instead of certifying the mutant again.
    prefix = "race_" if kind == "race" else ""
    report = pathlib.Path(report_dir) / (prefix + name.replace(":", "_") + ".json")
    problems, verdict = check(runner, entry, report)
    for problem in problems:
        print(f"{name}: {problem}", file=sys.stderr)
    if not problems:
        print(f"{name}: {verdict}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
