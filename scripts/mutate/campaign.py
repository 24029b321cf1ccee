#!/usr/bin/env python3
"""The generated-mutant campaign: every mutant of the in-scope reference
sources (scope.json), built into a scratch copy of the kit and certified by
each adapter that links its file until one fails.

  campaign.py --full [--file GLOB] [--operator OP] [--status S]
                                                     run what has no current result; resumable
  campaign.py --sample-seconds S [--seed N]          CI: a seeded sample for S seconds, judged
                                                     against the committed floor and results
  campaign.py --report                               rewrite the summary from the results alone

A mutant is killed when a certification exits non-zero (its report shows
which requirements failed), timed out when a certification passes its time
limit (a hang the kit did not report: counted apart, and as detected), a
build failure when it does not compile (never a kill), survived when every
adapter certifies it conformant. Results are kept per mutant in
reports/mutation/results.jsonl, appended as each mutant ends (so an
interrupted campaign resumes where it stopped), under a key of the mutated
file's code and of the checks' sources (CHECKS), each read as C++ tokens
(code_digest: a reformat or an edited comment keeps every result). A result
is current when both match, carried when only the file's code does (the
checks changed since it was judged), and void when the file's code changed
(the mutant may not exist any more). A result carried across a move
(`carried_from` names the id and file it was judged as) has `moved` for its
checks part: it counts as carried, and --full judges it again. Summaries count current and carried results, with the carried ones in
a column of their own; --full runs the mutants without a result first, then
the carried survivors (the results a stronger check can change), then the
other carried results. Equivalent mutants are listed, each with its reason,
in reports/mutation/equivalents.json.

A removed lock (lock-removal) is judged by a ThreadSanitizer build of the
kit: without a sanitizer it is caught only when a run happens to hit the
race it opens, so a plain survival would say nothing about the checks. Its
results carry the judge in their key, so a plain result of one is carried
(judged again by --full), and the CI sample, which has no TSan build, leaves
removed locks out.

score = (killed + timed out) / (generated - build failures - equivalents - not run)
"""
import argparse
import concurrent.futures
import fnmatch
import functools
import hashlib
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from mutate import generate, scratch, tokens  # noqa: E402

RESULTS = ROOT / "reports" / "mutation"
SCOPE = json.loads((HERE / "scope.json").read_text())
# Adapters that are nxmem plugins: the library each loads and the target that builds it.
PLUGIN_OF = SCOPE.get("plugin_of", {})
# What judges a mutant: when any of these change, every result is carried.
CHECKS = ["conformance/CMakeLists.txt", "conformance/include", "conformance/runner", "conformance/src",
          "conformance/suites", "adapters/host", "adapters/cuda", "spec/requirements.json", "reports/src",
          "cmake/OrtmemCtsCertification.cmake"]
STATUSES = ["killed", "timeout", "survived", "build-failure"]
# The per-test timeout is far from any sound test's time at -O0: the
# host-vmm-2m model tests take 6 s at -O2, and with a 5 s timeout they failed
# on the unmutated kit, so every mutant that reached host-vmm-2m was "killed".
RUN_FLAGS = ["--jobs", "1", "--timeout", "60", "--seed", "20261201", "--quiet"]
# Past this, a certification is a hang the runner did not end (an honest one
# takes under a minute at -O0): counted as a timeout, which is a detection.
CERTIFY_LIMIT_S = 300
# Under TSan a test runs 5-15 times slower, and the model suites get the
# budget the tsan preset gives them; a test past its deadline fails, so the
# deadline must be far from any sound test's time.
RACE_RUN_FLAGS = ["--jobs", "1", "--timeout", "60", "--model-runs", "20", "--model-length", "40", "--seed",
                  "20261201", "--quiet"]
RACE_CERTIFY_LIMIT_S = 3000
RACE_OPERATOR = "lock-removal"
# A race report ends the test's child at once, so the runner records a crash
# charged to the test's requirements.
RACE_ENVIRONMENT = {"TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1"}
STARTED = time.monotonic()
PRINT = threading.Lock()


def log(message):
    with PRINT:
        print(f"[{time.monotonic() - STARTED:5.0f} s] {message}", flush=True)


def checks_hash(files):
    digest = hashlib.sha256()
    for path in sorted(p for p in files if any(p == c or p.startswith(c + "/") for c in CHECKS)):
        digest.update(path.encode() + b"\0" + code_of(path))
    return digest.hexdigest()[:16]


CXX_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".cc")


def code_of(path):
    """A C++ file's tokens, comments and layout left out, so that a reformat
    or a comment changes no result's key; any other file byte for byte."""
    data = (ROOT / path).read_bytes()
    if not path.endswith(CXX_SUFFIXES):
        return data
    return "\x1f".join(spelling for spelling, _, _ in tokens.tokenize(data.decode())).encode()


def in_scope(files):
    """[(path, adapters)] of the tracked files scope.json names."""
    chosen = []
    for path in sorted(files):
        for entry in SCOPE["files"]:
            if fnmatch.fnmatch(path, entry["glob"]):
                chosen.append((path, entry["adapters"]))
                break
    return chosen


def all_mutants(compile_commands, files, save):
    """Every in-scope file's mutants. Parsing all of them costs libclang half
    a minute, so each file's list is kept in reports/mutation/mutants.json
    under its text's hash and generated again only when the file changed
    (`save` writes the list back)."""
    cache_file = RESULTS / "mutants.json"
    cache = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    fresh, mutants = {}, []
    for path, adapters in in_scope(files):
        digest = file_hash(path)
        entry = cache.get(path)
        if entry is None or entry["hash"] != digest:
            entry = {"hash": digest, "mutants": generate.mutants_of(ROOT / path, ROOT, compile_commands)}
        fresh[path] = entry
        for mutant in entry["mutants"]:
            mutants.append(dict(mutant, adapters=adapters))
    if save and fresh != cache:
        cache_file.write_text(json.dumps(fresh, indent=1) + "\n")
    return mutants


@functools.cache
def file_hash(path):
    """The file's text, byte for byte: the mutant cache's key, because a
    mutant is located by offsets into that text."""
    return hashlib.sha256((ROOT / path).read_bytes()).hexdigest()[:16]


@functools.cache
def code_digest(path):
    return hashlib.sha256(code_of(path)).hexdigest()[:16]


def result_key(mutant, checks):
    judge = "-tsan" if mutant["operator"] == RACE_OPERATOR else ""
    return code_digest(mutant["file"]) + "-" + checks + judge


def standing(mutant, results, key_of):
    """(the mutant's last result or None, whether it is current). A result
    for other text of the mutated file is void: None."""
    result = results.get(mutant["id"])
    if result is None or result.get("key", "").split("-")[0] != key_of(mutant).split("-")[0]:
        return None, False
    return result, result["key"] == key_of(mutant)


def load_results(path):
    """The last result of each mutant id in the JSON-lines file at `path`."""
    results = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                results[entry["id"]] = entry
    return results


class Worker:
    """A scratch copy of the tree with its own build (scratch.py), sharing
    the ccache: the second worker's first build is all hits. A race worker's
    build is instrumented by ThreadSanitizer."""

    def __init__(self, base, files, races=False):
        self.races = races
        self.tree, self.build = scratch.make_tree(base, files, thread_sanitizer=races)
        self.reports = base / "reports"
        self.reports.mkdir(parents=True, exist_ok=True)

    def make(self, targets, jobs=1):
        # One core each while the workers run side by side.
        return scratch.make(self.build, targets, jobs=jobs)

    def certify(self, adapter):
        """(exit code or None on timeout, failing requirement ids)."""
        report = self.reports / "mutant.json"
        report.unlink(missing_ok=True)
        runner = self.build / SCOPE["runner_of"][adapter]
        plugin = PLUGIN_OF.get(adapter)
        loaded = str(self.build / plugin["library"]) if plugin else adapter
        flags, limit = (RACE_RUN_FLAGS, RACE_CERTIFY_LIMIT_S) if self.races else (RUN_FLAGS, CERTIFY_LIMIT_S)
        # In a session of its own, so a hang is ended with every child the
        # runner isolated tests in, not just the runner.
        run = subprocess.Popen([str(runner), "run", "--adapter", loaded, *flags, "--report", str(report)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                               env=dict(os.environ, **RACE_ENVIRONMENT) if self.races else None)
        try:
            code = run.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
            return None, []
        failing = []
        if report.exists():
            failing = [r["id"] for r in json.loads(report.read_text())["requirements"] if r["status"] == "fail"]
        return code, failing

    def run(self, mutant):
        began = time.monotonic()
        target = self.tree / mutant["file"]
        original = target.read_text()
        outcome = {"status": "survived", "adapters": []}
        try:
            if original[mutant["start"]:mutant["end"]] != mutant["original"]:
                raise RuntimeError(f"{mutant['file']} changed since its mutants were generated")
            target.write_text(generate.apply(original, mutant))
            targets = sorted({SCOPE["runner_of"][a] for a in mutant["adapters"]} |
                             {PLUGIN_OF[a]["target"] for a in mutant["adapters"] if a in PLUGIN_OF})
            ok, output = self.make(targets)
            if not ok:
                outcome = {"status": "build-failure", "adapters": [], "build_output": output[-600:]}
            else:
                for adapter in mutant["adapters"]:
                    code, failing = self.certify(adapter)
                    outcome["adapters"].append({"adapter": adapter, "exit": code, "failing": failing})
                    if code is None:
                        outcome["status"] = "timeout"
                        break
                    if code != 0:
                        outcome["status"] = "killed"
                        break
        finally:
            target.write_text(original)
        outcome["seconds"] = round(time.monotonic() - began, 1)
        if self.races:
            outcome["judge"] = "thread-sanitizer"
        return outcome


def summarize(mutants, results, equivalents, key_of):
    """Per file and per operator: generated, killed, timeout, survived,
    build failures, equivalents, not run (no result for the file's text),
    carried (of those judged, how many under earlier checks), score."""
    def empty():
        return {"generated": 0, "killed": 0, "timeout": 0, "survived": 0, "build-failure": 0, "equivalent": 0,
                "not-run": 0, "carried": 0}
    def located(mutant):
        return {key: mutant[key] for key in ("id", "file", "line", "operator", "original", "replacement")}
    by_file, by_operator, total, survivors, justified, seconds = {}, {}, empty(), [], [], 0.0
    for mutant in mutants:
        result, current = standing(mutant, results, key_of)
        if mutant["id"] in equivalents:
            status = "equivalent"
        elif result is None:
            status = "not-run"
        else:
            status = result["status"]
            seconds += result["seconds"]
        for table in (by_file.setdefault(mutant["file"], empty()), by_operator.setdefault(mutant["operator"], empty()),
                      total):
            table["generated"] += 1
            table[status] += 1
            table["carried"] += result is not None and not current and status != "equivalent"
        if status == "equivalent":
            justified.append(located(mutant) | {"reason": equivalents[mutant["id"]]})
        if status == "survived":
            survivors.append(located(mutant) | {"adapters": [a["adapter"] for a in result["adapters"]],
                                                "carried": not current})
    total["mutant-seconds"] = round(seconds, 1)
    for table in [*by_file.values(), *by_operator.values(), total]:
        judged = table["generated"] - table["build-failure"] - table["equivalent"] - table["not-run"]
        table["score"] = round((table["killed"] + table["timeout"]) / judged, 4) if judged else None
    return {"total": total, "by_file": by_file, "by_operator": by_operator, "survivors": survivors,
            "equivalents": justified}


def write_summary(summary, directory):
    (directory / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    columns = ["generated", "killed", "timeout", "survived", "build-failure", "equivalent", "not-run", "carried",
               "score"]
    lines = ["# Generated mutants of the reference mechanisms", "",
             "Written by `scripts/mutate/campaign.py` from `results.jsonl`; score = (killed + timeout) / "
             "(generated - build failures - equivalents - not run), over the mutants judged against the file's "
             "current text. `carried` counts the judged mutants whose result dates from earlier checks (a "
             "`--full` run judges them again); survivors so judged are marked (carried).", ""]
    for title, table in (("file", summary["by_file"]), ("operator", summary["by_operator"])):
        lines += [f"| {title} | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
        for name, row in sorted(table.items()):
            lines.append(f"| {name} | " + " | ".join(_cell(row[c]) for c in columns) + " |")
        lines.append("")
    row = summary["total"]
    lines += ["**Total:** " + ", ".join(f"{c} {_cell(row[c])}" for c in columns)
              + f"; {row['mutant-seconds']:.0f} s of mutant time (builds and certifications; the wall time of each "
              "invocation is in campaign.log)", "", "## Survivors", ""]
    for survivor in summary["survivors"]:
        lines.append(f"- `{survivor['id']}` {survivor['file']}:{survivor['line']} ({survivor['operator']}): "
                     f"`{survivor['original'][:80]}` -> `{survivor['replacement'][:80]}`; certified by "
                     f"{', '.join(survivor['adapters'])}{' (carried)' if survivor['carried'] else ''}")
    lines += ["", "## Equivalents", "",
              "Justified one by one in `equivalents.json`: *equivalent* (no behaviour differs), *unreachable* (the "
              "changed code runs only where no in-scope caller or fault can take it), or *contract-invisible* (what "
              "differs is memory, speed or an opaque value the contract leaves open).", ""]
    for entry in summary["equivalents"]:
        lines.append(f"- `{entry['id']}` {entry['file']}:{entry['line']} ({entry['operator']}): "
                     f"`{entry['original'][:80]}` -> `{entry['replacement'][:80]}`: {entry['reason']}")
    (directory / "summary.md").write_text("\n".join(lines) + "\n")


def _cell(value):
    return "-" if value is None else (f"{value:.1%}" if isinstance(value, float) else str(value))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--full", action="store_true", help="run every mutant without a current result")
    mode.add_argument("--sample-seconds", type=float, help="CI: run a seeded sample for this long")
    mode.add_argument("--report", action="store_true", help="rewrite the summary from the results")
    mode.add_argument("--list", action="store_true", help="print the generated mutants as JSON lines")
    parser.add_argument("--file", default="*", help="only files matching this glob")
    parser.add_argument("--operator", default="", help=f"only this operator ({', '.join(generate.OPERATORS)})")
    parser.add_argument("--status", default="", choices=["", *STATUSES, "not-run"],
                        help="with --full: only mutants whose last result has this status")
    parser.add_argument("--seed", type=int, default=None, help="the sample's seed (default: from the commit)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--compile-commands", default=str(ROOT / "build" / "default" / "compile_commands.json"))
    parser.add_argument("--sample-out", default=str(ROOT / "build" / "mutation-sample.json"))
    args = parser.parse_args()
    if args.workers < 1:
        parser.error(f"--workers {args.workers}: at least one worker is needed")
    if args.operator and args.operator not in generate.OPERATORS:
        parser.error(f"--operator {args.operator}: not one of {', '.join(generate.OPERATORS)}")
    if not pathlib.Path(args.compile_commands).exists():
        parser.error(f"{args.compile_commands} does not exist: build the default preset first (bash scripts/test.sh)")

    files = scratch.tracked_files()
    checks = checks_hash(files)
    # --file and --operator choose what runs; the summary always covers the whole scope.
    generated = all_mutants(args.compile_commands, files, save=not args.sample_seconds)
    mutants = [m for m in generated
               if fnmatch.fnmatch(m["file"], args.file) and (not args.operator or m["operator"] == args.operator)]
    if args.list:
        for mutant in mutants:
            print(json.dumps(mutant))
        return 0
    results_file = RESULTS / "results.jsonl"
    results = load_results(results_file)
    equivalents = {e["id"]: e["reason"] for e in json.loads((RESULTS / "equivalents.json").read_text())["equivalents"]}
    # A justification outlives its mutant when the code it reasons about changes: say so rather than keep it.
    stale = sorted(set(equivalents) - {m["id"] for m in generated})
    if stale:
        parser.error(f"reports/mutation/equivalents.json justifies mutants no longer generated ({', '.join(stale)}): "
                     "remove them, or justify the mutants that replaced them")
    def key_of(mutant):
        return result_key(mutant, checks)

    if args.report:
        write_summary(summarize(generated, results, equivalents, key_of), RESULTS)
        return 0

    if args.full:
        # Unjudged first, then what stronger checks may now kill, then the
        # carried kills (confirmed last: they seldom change).
        ranked = []
        for mutant in mutants:
            result, current = standing(mutant, results, key_of)
            status = result["status"] if result else "not-run"
            if mutant["id"] in equivalents or current or (args.status and status != args.status):
                continue
            ranked.append((0 if result is None else 2 if status in ("killed", "timeout") else 1, mutant))
        todo = [mutant for _, mutant in sorted(ranked, key=lambda pair: pair[0])]
        deadline = None
    else:
        seed = args.seed if args.seed is not None else int(subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout[:8] or "0", 16)
        todo = [m for m in mutants if m["id"] not in equivalents and m["operator"] != RACE_OPERATOR]
        random.Random(seed).shuffle(todo)
        deadline = time.monotonic() + args.sample_seconds
        log(f"sample of the {len(todo)} generated mutants, seed {seed}, for {args.sample_seconds:.0f} s")
    log(f"{len(mutants)} mutants generated; {len(todo)} to run with {args.workers} workers")

    RESULTS.mkdir(parents=True, exist_ok=True)
    ran, lock = [], threading.Lock()

    def record(mutant, outcome):
        entry = {key: mutant[key] for key in ("id", "file", "line", "function", "operator", "original",
                                              "replacement")} | outcome | {"key": key_of(mutant)}
        with lock:
            ran.append(entry)
            if args.full:
                with results_file.open("a") as out:
                    out.write(json.dumps(entry) + "\n")
        log(f"  {entry['status']:13} {mutant['id']} {mutant['file']}:{mutant['line']} {mutant['operator']} "
            f"{entry['seconds']} s")

    # The plain mutants first, then the removed locks on TSan builds: one
    # kind of build at a time, so the workers never share the cores with a
    # third build.
    for races in (False, True):
        queue = [m for m in todo if (m["operator"] == RACE_OPERATOR) == races]
        if queue and run_queue(queue, files, args.workers, races, deadline, record) != 0:
            return 2
    if args.full:
        # The campaign's size and wall time, one line per invocation.
        with (RESULTS / "campaign.log").open("a") as out:
            out.write(f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} --file {args.file} "
                      f"--operator {args.operator or '*'}: {len(ran)} of {len(todo)} run in "
                      f"{time.monotonic() - STARTED:.0f} s wall, {args.workers} workers\n")
        results = load_results(results_file)
        write_summary(summarize(generated, results, equivalents, key_of), RESULTS)
        chosen = summarize(mutants, results, equivalents, key_of)["total"]
        log(f"score of the mutants chosen {_cell(chosen['score'])}: {chosen}")
        return 0
    return judge_sample(ran, results, key_of, pathlib.Path(args.sample_out))


def run_queue(queue, files, workers, races, deadline, record):
    """Runs `queue` on `workers` fresh scratch builds (TSan ones for races),
    passing each mutant's outcome to record; 2 when the unmutated kit does
    not build, or is not conformant with an adapter that judges (or, in a
    sample, killed) a mutant, else 0."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="ortmem-campaign-"))
    lock = threading.Lock()
    try:
        log(f"building the unmutated kit{' under ThreadSanitizer' if races else ''} in each worker's scratch copy")
        pool = [Worker(base / f"worker{i}", files, races=races) for i in range(workers)]
        for worker in pool:
            ok, output = worker.make(["ortmem-cts", "ortmem-cts-mutants", *sorted(p["target"] for p in PLUGIN_OF.values())],
                                     jobs=None)
            if not ok:
                log(output)
                return 2
        # A kill must be the mutant's: the unmutated kit must pass the
        # adapter that killed it, under the same judge and flags. Without
        # this, an adapter that fails on its own (a test past its timeout at
        # -O0) kills every mutant that reaches it. A campaign checks every
        # adapter first; a time-boxed sample checks an adapter the first time
        # it kills, so the box is spent on mutants.
        judge = " under ThreadSanitizer" if races else ""
        vouched, refused = set(), []

        def vouch(worker, adapter):
            began = time.monotonic()
            targets = [SCOPE["runner_of"][adapter], *([PLUGIN_OF[adapter]["target"]] if adapter in PLUGIN_OF else [])]
            ok, _ = worker.make(targets)  # the last mutant's file is restored: build the unmutated kit again
            code, failing = worker.certify(adapter) if ok else ("no build", [])
            if code != 0:
                log(f"the unmutated kit is not conformant{judge} with {adapter} (exit {code}, failing {failing}): "
                    "its kills would mean nothing; make it conformant under the campaign's flags first")
                refused.append(adapter)
                return False
            log(f"  baseline {adapter} conformant{judge} in {time.monotonic() - began:.0f} s")
            vouched.add(adapter)
            return True

        if deadline is None:
            for adapter in sorted({a for m in queue for a in m["adapters"]}):
                if not vouch(pool[0], adapter):
                    return 2

        def work(worker):
            while True:
                with lock:
                    if refused or not queue or (deadline is not None and time.monotonic() > deadline):
                        return
                    mutant = queue.pop(0)
                outcome = worker.run(mutant)
                if outcome["status"] in ("killed", "timeout"):
                    killer = outcome["adapters"][-1]["adapter"]
                    if killer not in vouched and not vouch(worker, killer):
                        return
                record(mutant, outcome)

        with concurrent.futures.ThreadPoolExecutor(len(pool)) as executor:
            for future in [executor.submit(work, w) for w in pool]:
                future.result()
        if refused:
            return 2
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


def judge_sample(ran, committed, key_of, out):
    """CI's verdict on a sample: its score must reach the committed floor, and
    no mutant the committed campaign saw killed in the same file text may
    survive now."""
    floor = json.loads((RESULTS / "floor.json").read_text())["sample_score_floor"]
    detected = sum(1 for e in ran if e["status"] in ("killed", "timeout"))
    judged = sum(1 for e in ran if e["status"] != "build-failure")
    score = detected / judged if judged else None
    # A kill under earlier checks counts: a check that stopped killing is the
    # regression this is here to catch. Not so a kill that named no requirement (the certification exited 1 on a
    # crash, a hang or a flaky test, with no check failing): it says nothing
    # about a check that could have stopped killing.
    unnamed, regressions = [], []
    for entry in ran:
        kill = standing(entry, committed, key_of)[0] if entry["status"] == "survived" else None
        if not kill or kill.get("status") != "killed":
            continue
        if not any(adapter["failing"] for adapter in kill["adapters"]):
            unnamed.append(entry)
        else:
            regressions.append(entry)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"score": score, "floor": floor, "ran": ran}, indent=2) + "\n")
    log(f"sample: {len(ran)} mutants, {detected} detected of {judged} judged, score {_cell(score)} (floor {floor:.1%})")
    bad = False
    if not ran:
        log("the sample ran no mutant in its time")
        bad = True
    if score is not None and score < floor:
        log(f"the sample's score {score:.1%} is under the committed floor {floor:.1%}")
        bad = True
    for entry in unnamed:
        log(f"kill not reproduced: {entry['id']} {entry['file']}:{entry['line']} ({entry['operator']}) was killed in the "
            f"committed campaign with no requirement failing (a crash, hang or flaky test) and survives this run")
    for entry in regressions:
        log(f"REGRESSION {entry['id']} {entry['file']}:{entry['line']} ({entry['operator']}) was killed in the "
            f"committed campaign and survives now")
        bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
