#!/usr/bin/env python3
"""The driver behind scripts/mutation-test.sh (see there for usage).

Source mutants (adapters/mutants/source_mutants.json) are applied one at a time
to a scratch copy of the tree (scripts/mutate/scratch.py), which is built
incrementally; each edit is found by its tokens (scripts/mutate/tokens.py), so
a reformat of the file does not break it. Each build must
compile, and certifying its adapter (host unless it names another) must exit 1 with at least the
mutant's must_fail requirements failing. Adapter mutants
(adapters/mutants/manifest.json) are certified with ortmem-cts-mutants from the
same scratch build and must fail exactly their must_fail requirements, as
conformance/tests/check_adapter.py requires of a mutant. The kill matrix maps every requirement to the mutants that
made it fail.

Known-bad nxmem plugins count too, each the way it fails. A runtime lie
(adapters/plugin/known_bad/runtime_manifest.json) loads and then breaks a
rule through the ABI: it must fail exactly its must_fail requirements, and
kills them as `plugin:NAME`; its report is taken from where
`check_plugins.py lies` left it (ADAPTER_REPORTS/plugins/lies/NAME.json) when
that report is of the library as it is now, and otherwise the lie is built
and run from the scratch copy. A load-time lie
(adapters/plugin/known_bad/manifest.json) is refused before any test runs, so
it kills no requirement: it is built in the scratch copy, must be refused
(exit 2, one line on stderr containing its `refused_with`, no report), and is
listed under `plugin_refusals` with the ABI rule it was refused for.

CI does not make the matrix: it takes the committed one
(reports/mutation/kill-matrix.json) when it is whole, green and of the
current sources (inputs_digest), and judges a seeded sample of the curated
mutants again for a fixed time (--curated-sample-seconds), so a check that
stopped killing one is still likely to be seen on its own commit.
"""
import argparse
import hashlib
import json
import pathlib
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from mutate import tokens  # noqa: E402  (scripts/mutate/, beside this file)
from mutate.scratch import make, make_tree, tracked_files  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Profiles whose MUST requirements must all be killed or justified.
ENFORCED_PROFILES = {"core", "pins", "deferred", "virtual", "shared", "abi"}
RUN_FLAGS = ["--jobs", "2", "--timeout", "3", "--seed", "20261201", "--quiet"]
# As check_plugins.py lies runs them: the runner's own per-test timeout, since
# a ticket that never completes costs the kit's drain its 5 s wait, per drain.
LIE_FLAGS = ["--jobs", "2", "--seed", "20261201", "--quiet"]
KNOWN_BAD_PLUGINS = ROOT / "adapters" / "plugin" / "known_bad"
# The exit code a report's verdict makes (the runner's: 1 is not conformant).
EXIT_OF_VERDICT = {"conformant": 0, "not-conformant": 1, "partial": 3}
# The committed kill matrix (CI checks it is of the current sources and
# judges a sample of the curated mutants again; see --curated-sample-seconds).
COMMITTED_MATRIX = ROOT / "reports" / "mutation" / "kill-matrix.json"
# What a verdict depends on: the kit, the reference, the adapters and mutants,
# the report code, the spec, and the checks that judge them. Prose (*.md),
# benchmarks and the reference's unit tests change no verdict.
DIGEST_ROOTS = ("adapters/", "conformance/", "reference/", "reports/include/", "reports/src/", "spec/", "cmake/",
                "CMakeLists.txt", "CMakePresets.json")
DIGEST_EXCLUDED = ("reference/bench/", "reference/tests/")


def inputs_digest():
    """SHA-256 over the path and bytes of every file a verdict depends on."""
    digest = hashlib.sha256()
    for path in sorted(tracked_files()):
        if path.startswith(DIGEST_ROOTS) and not path.startswith(DIGEST_EXCLUDED) and not path.endswith(".md"):
            digest.update(path.encode() + b"\0" + (ROOT / path).read_bytes() + b"\0")
    return digest.hexdigest()


def committed_matrix_problems(path):
    """Why the committed kill matrix cannot stand for these sources, if it cannot."""
    shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    remake = (f"make it again with `bash scripts/mutation-test.sh --matrix {shown}` (or, after "
              f"`ctest --preset kill`, add `--adapter-reports build/default/test-reports`) and commit it")
    if not path.exists():
        return [f"no committed kill matrix at {shown}: {remake}"]
    matrix = json.loads(path.read_text())
    if matrix.get("inputs_digest") is None:
        return [f"{shown} is a partial matrix (made with --only): {remake}"]
    if matrix["inputs_digest"] != inputs_digest():
        return [f"{shown} was made from other sources than these (a file under {', '.join(DIGEST_ROOTS)} changed "
                f"since): {remake}"]
    problems = [f"{shown} records a problem: {problem}" for problem in matrix.get("problems", [])]
    summary = matrix["summary"]
    if summary["must_killed_or_justified"] != summary["must_requirements"]:
        problems.append(f"{shown}: only {summary['must_killed_or_justified']} of {summary['must_requirements']} MUST "
                        "requirements are killed or justified")
    return problems


STARTED = time.monotonic()


def log(message):
    # Stamped with the seconds since start, so a slow step shows in CI's log.
    print(f"[{time.monotonic() - STARTED:4.0f} s] {message}", flush=True)


def certify(runner, adapter, report):
    report.unlink(missing_ok=True)
    run = subprocess.run([str(runner), "run", "--adapter", adapter, *RUN_FLAGS, "--report", str(report)],
                         capture_output=True, text=True, timeout=1800)
    failing, tested = [], set()
    if report.exists():
        failing, tested = failures_of(json.loads(report.read_text()))
    return run.returncode, failing, tested


FAILURE_STATUSES = {"fail", "crash", "timeout", "error", "flaky"}


def failures_of(report):
    """The requirements a report fails (each charged by a check of its own),
    and those named by a failed test (a weaker, test-level kill)."""
    failing = [r["id"] for r in report["requirements"] if r["status"] == "fail"]
    tested = {rid for t in report["tests"] if t["status"] in FAILURE_STATUSES for rid in t["requirements"]}
    return failing, tested


def library_name(prefix, name):
    return f"lib{prefix}_{name.replace('-', '_')}.so"


def earlier_lie_report(previous, lie):
    """The report check_plugins.py lies left for `lie`, if it is of the library
    as that library is now (same path, same SHA-256); else None."""
    if previous is None:
        return None
    path = previous / "plugins" / "lies" / f"{lie['name']}.json"
    if not path.exists():
        return None
    try:
        report = json.loads(path.read_text())
        origin = report["adapter"]["origin"]
        library = pathlib.Path(origin["path"])
        if (not library.is_absolute() or library.name != library_name(lie["prefix"], lie["name"])
                or hashlib.sha256(library.read_bytes()).hexdigest() != origin["sha256"]):
            return None
        return report
    except (OSError, ValueError, KeyError, TypeError):
        return None


def certify_lie(runner, library, report):
    report.unlink(missing_ok=True)
    run = subprocess.run([str(runner), "run", "--adapter", str(library), *LIE_FLAGS, "--report", str(report)],
                         capture_output=True, text=True, timeout=1800)
    failing, tested = [], set()
    if report.exists():
        failing, tested = failures_of(json.loads(report.read_text()))
    return run.returncode, failing, tested


def refusal_of(runner, library, refused_with, report):
    """(refused, what the kit said): refused means exit 2 before any test, one
    line on stderr containing `refused_with`, and no report written."""
    report.unlink(missing_ok=True)
    run = subprocess.run([str(runner), "run", "--adapter", str(library), "--quiet", "--report", str(report)],
                         capture_output=True, text=True, timeout=120)
    lines = [line.replace(str(library), library.name) for line in run.stderr.splitlines() if line.strip()]
    said = lines[0] if len(lines) == 1 else " | ".join(lines)[:500]
    refused = run.returncode == 2 and len(lines) == 1 and refused_with in lines[0] and not report.exists()
    if not refused:
        said = f"exit {run.returncode}{', a report was written' if report.exists() else ''}: {said}"
    return refused, said


def sampled_verdict(kind, mutant, build, reports, problems):
    """Judges one adapter mutant or lie of the sample as ctest judges it (its
    deadlines, its retry on a loaded machine), on the default build's runners."""
    checks = ROOT / "conformance" / "tests"
    began = time.monotonic()
    if kind == "adapter":
        command = [sys.executable, str(checks / "check_adapter.py"), "mutant", str(build / "ortmem-cts-mutants"),
                   str(ROOT / "adapters" / "mutants" / "manifest.json"), mutant["name"], str(reports)]
        name = mutant["name"]
    else:
        # check_plugins.py judges a manifest's every entry: this one alone.
        manifest = next(KNOWN_BAD_PLUGINS / m for m in ("runtime_manifest.json", "abi_manifest.json")
                        if json.loads((KNOWN_BAD_PLUGINS / m).read_text())["library_prefix"] == mutant["prefix"])
        alone = dict(json.loads(manifest.read_text()), plugins=[{k: v for k, v in mutant.items() if k != "prefix"}])
        alone_path = reports / f"lie-{mutant['name']}.json"
        alone_path.write_text(json.dumps(alone))
        command = [sys.executable, str(checks / "check_plugins.py"), "lies", str(build / "ortmem-cts"),
                   str(build / "plugins" / "known_bad"), str(alone_path), str(reports / "plugins")]
        name = "plugin:" + mutant["name"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        problems.append(f"{kind} mutant {name} was judged wrong: {(run.stdout + run.stderr).strip()[-800:]}")
    log(f"  {kind:7} {name:32} {'as its manifest says' if run.returncode == 0 else 'JUDGED WRONG'}  "
        f"{time.monotonic() - began:.0f} s")


def judge_mutant(kind, name, must_fail, code, failing, problems, exact=False):
    missing = [rid for rid in must_fail if rid not in failing]
    extra = [rid for rid in failing if rid not in must_fail] if exact else []
    killed = code == 1 and failing and not missing
    if not killed:
        why = f"exit {code}" if code != 1 else f"expected failures missing: {', '.join(missing) or 'none failed'}"
        problems.append(f"{kind} mutant {name} survived ({why})")
    elif extra:
        problems.append(f"{kind} mutant {name} also failed {', '.join(extra)}, which its manifest entry does not list")
    log(f"  {kind:7} {name:32} {'killed' if killed else 'SURVIVED'}  exit {code}  {len(failing)} requirements fail")
    return killed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", default=str(ROOT / "build" / "kill-matrix.json"))
    parser.add_argument("--only", default="", help="comma-separated mutant names to run (default: all)")
    parser.add_argument("--adapter-reports", default="",
                        help="a directory where ctest's mutant checks left their reports (name with ':' as '_'); "
                             "adapter mutants with a report there are not run again")
    parser.add_argument("--curated-sample-seconds", type=float, default=0,
                        help="CI: check that the committed kill matrix (--committed) is of these sources, then judge "
                             "a seeded sample of the curated mutants for about this long")
    parser.add_argument("--committed", default=str(COMMITTED_MATRIX))
    parser.add_argument("--check-committed", action="store_true",
                        help="only check that the committed kill matrix is whole, green and of these sources (a "
                             "second; CI runs it first so a stale matrix fails before the builds)")
    parser.add_argument("--build", default=str(ROOT / "build" / "default"),
                        help="the default build whose runners and plugins the sample's adapter mutants and lies run on")
    parser.add_argument("--seed", type=int, default=None, help="the sample's seed (default: from the commit)")
    args = parser.parse_args()
    only = set(filter(None, args.only.split(",")))
    sampling = args.curated_sample_seconds > 0
    if sampling or args.check_committed:
        stale = committed_matrix_problems(pathlib.Path(args.committed).resolve())
        if stale:
            for problem in stale:
                print(problem, file=sys.stderr)
            return 1
        if args.check_committed:
            print(f"the committed kill matrix is of these sources ({args.committed})")
            return 0

    spec = json.loads((ROOT / "spec" / "requirements.json").read_text())
    source_mutants = json.loads((ROOT / "adapters" / "mutants" / "source_mutants.json").read_text())["mutants"]
    adapter_mutants = json.loads((ROOT / "adapters" / "mutants" / "manifest.json").read_text())["mutants"]
    # Each entry keeps its manifest's library prefix: the name CMake built it under.
    def listed(manifest):
        document = json.loads((KNOWN_BAD_PLUGINS / manifest).read_text())
        return [dict(entry, prefix=document["library_prefix"]) for entry in document["plugins"]]

    plugin_lies = listed("runtime_manifest.json") + listed("abi_manifest.json")
    plugin_refusals = listed("manifest.json")
    if only:
        source_mutants = [m for m in source_mutants if m["name"] in only]
        adapter_mutants = [m for m in adapter_mutants if m["name"] in only]
        plugin_lies = [m for m in plugin_lies if "plugin:" + m["name"] in only]
        plugin_refusals = [m for m in plugin_refusals if "plugin:" + m["name"] in only]

    problems = []
    # Taken before anything is judged: the matrix stands for the sources as they were then.
    digest = None if only else inputs_digest()
    killed_by = {r["id"]: [] for r in spec["requirements"]}
    tested_by = {r["id"]: [] for r in spec["requirements"]}
    with tempfile.TemporaryDirectory(prefix="ortmem-mutation-") as scratch_name:
        scratch, build_dir = make_tree(pathlib.Path(scratch_name), tracked_files())
        reports = pathlib.Path(scratch_name) / "reports"
        reports.mkdir()
        previous = pathlib.Path(args.adapter_reports) if args.adapter_reports else None
        # The sample judges adapter mutants and lies as ctest does, on the
        # default build (sampled_verdict); the scratch copy serves the source mutants.
        to_run = [] if sampling else [m for m in adapter_mutants
                                      if not (previous and (previous / (m["name"].replace(":", "_") + ".json")).exists())]
        earlier_lies = {m["name"]: earlier_lie_report(previous, m) for m in plugin_lies}
        lies_to_run = [] if sampling else [m for m in plugin_lies if earlier_lies[m["name"]] is None]
        log("building the unmutated kit in a scratch copy")
        # Source mutants of mechanisms only a test adapter certifies need the test runner too.
        needs_test_runner = bool(to_run) or any(m.get("adapter", "host") != "host" for m in source_mutants)
        # Known-bad plugins are small C modules: those refused at load are
        # always built, the lies only when no current report of theirs exists.
        plugin_targets = [f"{m['prefix']}_{m['name'].replace('-', '_')}" for m in plugin_refusals + lies_to_run]
        ok, output = make(build_dir, ["ortmem-cts"] + (["ortmem-cts-mutants"] if needs_test_runner else []) +
                           plugin_targets)
        if not ok:
            log(output)
            return 2
        runner, mutants_runner = build_dir / "ortmem-cts", build_dir / "ortmem-cts-mutants"
        plugin_dir = build_dir / "plugins" / "known_bad"
        code, failing, _ = certify(runner, "host", reports / "baseline.json")
        if code != 0:
            log(f"the unmutated host adapter is not conformant (exit {code}; failing {failing}): nothing to compare")
            return 2

        def record(name, failing, tested):
            for rid in failing:
                killed_by[rid].append(name)
            for rid in tested:
                tested_by[rid].append(name)

        def judge_adapter(mutant):
            if mutant in to_run:
                code, failing, tested = certify(mutants_runner, mutant["name"], reports / "adapter.json")
            else:
                # check_adapter.py mutant already required exit 1 for this report.
                earlier = json.loads((previous / (mutant["name"].replace(":", "_") + ".json")).read_text())
                code = 1
                failing, tested = failures_of(earlier)
            if judge_mutant("adapter", mutant["name"], mutant["must_fail"], code, failing, problems, exact=True):
                record(mutant["name"], failing, tested)

        def judge_lie(lie):
            name = "plugin:" + lie["name"]
            earlier = earlier_lies[lie["name"]]
            if earlier is None:
                code, failing, tested = certify_lie(runner, plugin_dir / library_name(lie["prefix"], lie["name"]),
                                                    reports / "lie.json")
            else:
                code = EXIT_OF_VERDICT.get(earlier["verdict"]["overall"], 2)
                failing, tested = failures_of(earlier)
            if judge_mutant("plugin", name, lie["must_fail"], code, failing, problems, exact=True):
                record(name, failing, tested)

        # A mutated header recompiles every unit including it, and so does
        # restoring it: the header mutants go last, where the last needs no restore.
        in_header = lambda mutant: any(edit["file"].endswith(".hpp") for edit in mutant["edits"])

        def judge_source(mutant):
            originals = {}
            try:
                for edit in mutant["edits"]:
                    target = scratch / edit["file"]
                    text = originals.setdefault(target, target.read_text()) if target not in originals else target.read_text()
                    # Found by its tokens, so a reformat of the file cannot break it.
                    spans = tokens.locate(text, edit["find"])
                    if len(spans) != 1:
                        problems.append(f"source mutant {mutant['name']}: the tokens of its edit of {edit['file']} no "
                                        f"longer occur exactly once ({len(spans)} matches); update the mutant")
                        raise LookupError
                    (start, end), = spans
                    target.write_text(text[:start] + edit["replace"] + text[end:])
                adapter = mutant.get("adapter", "host")
                mutant_runner = runner if adapter in ("host", "host-vmm") else mutants_runner
                began = time.monotonic()
                ok, output = make(build_dir, [mutant_runner.name])
                built = time.monotonic()
                if not ok:
                    problems.append(f"source mutant {mutant['name']} does not compile:\n{output[-1500:]}")
                    log(f"  source  {mutant['name']:32} DOES NOT COMPILE")
                    return
                code, failing, tested = certify(mutant_runner, adapter, reports / "source.json")
                log(f"    built in {built - began:.0f} s, certified in {time.monotonic() - built:.0f} s")
                if judge_mutant("source", "source:" + mutant["name"], mutant["must_fail"], code, failing, problems):
                    record("source:" + mutant["name"], failing, tested)
            except LookupError:
                log(f"  source  {mutant['name']:32} STALE EDIT")
            finally:
                for target, text in originals.items():
                    target.write_text(text)

        # Refused at load: a kill of the ABI's loading rules, not of any
        # requirement (no test runs), so these stay out of killed_by.
        log(f"plugins refused at load ({len(plugin_refusals)})")
        refusal_rows = []
        for plugin in plugin_refusals:
            refused, said = refusal_of(runner, plugin_dir / library_name(plugin["prefix"], plugin["name"]),
                                       plugin["refused_with"], reports / "refused.json")
            if not refused:
                problems.append(f"plugin {plugin['name']} was not refused at load with {plugin['refused_with']!r} "
                                f"({said})")
            refusal_rows.append({"name": plugin["name"], "rule": plugin["refused_with"], "refused": refused,
                                 "refusal": said})
            log(f"  refusal {plugin['name']:32} {'refused' if refused else 'LOADED'}")

        if sampling:
            seed = args.seed if args.seed is not None else int(subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout[:8] or "0", 16)
            order = ([("adapter", m) for m in adapter_mutants] + [("plugin", m) for m in plugin_lies] +
                     [("source", m) for m in source_mutants])
            random.Random(seed).shuffle(order)
            order.sort(key=lambda pair: pair[0] == "source" and in_header(pair[1]))
            deadline = time.monotonic() + args.curated_sample_seconds
            log(f"sample of the {len(order)} curated mutants, seed {seed}, for {args.curated_sample_seconds:.0f} s")
            judged = 0
            for kind, mutant in order:
                if time.monotonic() >= deadline:
                    break
                if kind == "source":
                    judge_source(mutant)
                else:
                    sampled_verdict(kind, mutant, pathlib.Path(args.build), reports, problems)
                judged += 1
            for problem in problems:
                print(problem, file=sys.stderr)
            log(f"sample: {judged} of {len(order)} curated mutants judged, {len(problems)} problems; the committed "
                f"matrix {pathlib.Path(args.committed).name} is of these sources")
            return 1 if problems else 0

        log(f"adapter mutants ({len(adapter_mutants)}, {len(adapter_mutants) - len(to_run)} from earlier reports)")
        for mutant in adapter_mutants:
            judge_adapter(mutant)
        log(f"plugin lies ({len(plugin_lies)}, {len(plugin_lies) - len(lies_to_run)} from earlier reports)")
        for lie in plugin_lies:
            judge_lie(lie)

        log(f"source mutants ({len(source_mutants)})")
        for mutant in sorted(source_mutants, key=in_header):
            judge_source(mutant)

    # killed_by: mutants that a check of the requirement itself failed on.
    # failed_tests_of: mutants that failed a test naming it, maybe on another
    # requirement's check. The gate needs one or the other (or a
    # justification); a requirement with only the second is listed as a gap.
    matrix = {"spec_version": spec["spec_version"], "requirements": {}}
    unkilled, test_level_only = [], []
    for r in spec["requirements"]:
        justification = r.get("justification", "")
        matrix["requirements"][r["id"]] = {
            "level": r["level"], "profile": r["profile"], "killed_by": sorted(killed_by[r["id"]]),
            "failed_tests_of": sorted(set(tested_by[r["id"]])), "justification": justification}
        enforced = r["level"] == "MUST" and not r.get("withdrawn") and not justification and r["profile"] in ENFORCED_PROFILES
        if enforced and not killed_by[r["id"]]:
            (test_level_only if tested_by[r["id"]] else unkilled).append(r["id"])
    must = [r for r in spec["requirements"] if r["level"] == "MUST" and r["profile"] in ENFORCED_PROFILES]
    matrix["plugin_refusals"] = refusal_rows
    matrix["summary"] = {
        "adapter_mutants": len(adapter_mutants), "source_mutants": len(source_mutants),
        "plugin_lies": len(plugin_lies), "plugin_refusals": len(plugin_refusals),
        "plugins_refused_at_load": sum(row["refused"] for row in refusal_rows),
        "must_requirements": len(must), "must_killed_or_justified": len(must) - len(unkilled),
        "must_killed_by_their_own_checks": len(must) - len(unkilled) - len(test_level_only),
        "must_killed_only_at_test_level": test_level_only,
        "enforced_profiles": sorted(ENFORCED_PROFILES), "seconds": round(time.monotonic() - STARTED, 1)}
    if not only:
        for rid in unkilled:
            problems.append(f"{rid} is a MUST requirement no mutant kills and spec/ does not justify")

    # CI takes a committed matrix for the sources it was made from, and only
    # when it is whole and green (committed_matrix_problems).
    matrix["inputs_digest"] = digest
    matrix["problems"] = problems
    path = pathlib.Path(args.matrix)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(matrix, indent=2) + "\n")
    lines = ["# Kill matrix", "",
             f"{matrix['summary']['must_killed_or_justified']}/{len(must)} MUST requirements of "
             f"{', '.join(sorted(ENFORCED_PROFILES))} killed or justified; "
             f"{len(adapter_mutants)} adapter and {len(source_mutants)} source mutants, "
             f"{len(plugin_lies)} lying nxmem plugins (`plugin:`).", "",
             "| requirement | level | profile | killed by | justification |", "|---|---|---|---|---|"]
    for rid, row in matrix["requirements"].items():
        lines.append(f"| {rid} | {row['level']} | {row['profile']} | {', '.join(row['killed_by']) or '—'} | "
                     f"{'yes' if row['justification'] else ''} |")
    lines += ["", "## nxmem plugins refused at load", "",
              f"{matrix['summary']['plugins_refused_at_load']}/{len(plugin_refusals)} refused before any test, each "
              "for the ABI rule it breaks (a kill of the loader's checks, not of a requirement).", "",
              "| plugin | rule | refused | what the kit said |", "|---|---|---|---|"]
    for row in refusal_rows:
        said = row["refusal"].replace("|", "\\|")
        lines.append(f"| {row['name']} | {row['rule']} | {'yes' if row['refused'] else 'NO'} | {said} |")
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
    log(f"kill matrix: {path} ({path.with_suffix('.md')}); "
        f"{matrix['summary']['must_killed_or_justified']}/{len(must)} MUST killed or justified; "
        f"{matrix['summary']['plugins_refused_at_load']}/{len(plugin_refusals)} plugins refused at load "
        f"in {matrix['summary']['seconds']} s")
    if test_level_only and not only:
        log(f"gap: {len(test_level_only)} MUST requirements fail only through a test that names them, never on a "
            f"check of their own: {', '.join(test_level_only)} (they need a known-bad adapter of their own)")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
