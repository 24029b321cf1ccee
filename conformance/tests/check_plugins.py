#!/usr/bin/env python3
"""Checks the nxmem plugin path of the runner end to end.

  check_plugins.py certify RUNNER PLUGIN SCHEMA OUT PROFILES
      An example plugin certifies with exactly the profile results PROFILES
      gives (core=conformant,virtual=conformant,...; a profile left out must
      not have run) at --abi-minor 1 and 0, with no failing requirement and
      the exit code those results make; each report validates against the
      schema and names the plugin's path, SHA-256 and negotiated version;
      `list adapters --plugin` lists its mechanism; bad plugin arguments exit
      2 with one line and write no report.
  check_plugins.py unavailable RUNNER PLUGIN OUT WORDS
      A plugin the kit cannot run here is refused before any test: exit 2,
      one line saying it cannot run here and containing WORDS, no report.
  check_plugins.py fails RUNNER PLUGIN OUT IDS
      A plugin that loads and then lies fails exactly the requirements IDS
      (comma-separated), with exit 1 (seed 20261201).
  check_plugins.py profile RUNNER PLUGIN OUT
      `profile --adapter PLUGIN` measures it beside the reference: a table on
      stdout and, with --output, JSON giving every size's two figures and
      their ratio and both two-thread scalings, all positive; an unknown
      adapter or an unwritable --output exits 2 with one line, before
      anything is measured, and writes nothing.
  check_plugins.py refusals RUNNER KNOWN_BAD_DIR MANIFEST OUT
      Every known-bad plugin in MANIFEST is refused before any test: exit 2,
      one line on stderr containing its `refused_with`, no report written.
  check_plugins.py mechanisms RUNNER PLUGIN SCHEMA OUT
      A plugin of two mechanisms is refused without --report DIR/, and with it
      writes one conformant report per mechanism, under a safe file name.
  check_plugins.py lies RUNNER KNOWN_BAD_DIR RUNTIME_MANIFEST OUT
      Every plugin that loads and then lies through the ABI is not conformant,
      failing exactly its `must_fail` requirements (seed 20261201). Each
      report is left at OUT/lies/NAME.json, where scripts/mutation_test.py
      (--adapter-reports) reads it for the kill matrix instead of running
      the plugin again.
"""
import hashlib
import json
import os
import pathlib
import subprocess
import sys


def run(runner, *args):
    return subprocess.run([runner, *args], capture_output=True, text=True, timeout=600)


def refused(result, report, words, what):
    """Problems with a refusal: exit 2, one stderr line containing `words`, no report."""
    problems = []
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if result.returncode != 2:
        problems.append(f"{what}: exit {result.returncode}, expected 2 (stderr: {result.stderr.strip()[:300]})")
    elif len(lines) != 1 or words not in lines[0]:
        problems.append(f"{what}: stderr should be one line containing {words!r}, got {lines!r}")
    if report is not None and report.exists():
        problems.append(f"{what}: a refused plugin left a report at {report}")
    return problems


def certify(runner, plugin, schema_path, out, profiles, controls="none"):
    import jsonschema
    expected = dict(pair.split("=") for pair in profiles.split(","))
    # The controls the plugin's table offers (ortmem_cts_controls.h), as the
    # report's origin must name them; but memory-access, how the kit reads a
    # tier it cannot address, is needed by no requirement, so the origin
    # shows it only in its interface (" + ortmem-cts controls 1").
    expected_controls = [] if controls == "none" else [c for c in controls.split(",") if c != "memory-access"]
    exit_code = 0 if all(result == "conformant" for result in expected.values()) else 3
    out.mkdir(parents=True, exist_ok=True)
    schema = json.loads(pathlib.Path(schema_path).read_text())
    digest = hashlib.sha256(pathlib.Path(plugin).read_bytes()).hexdigest()
    problems = []
    # The kit's cap on the minor: 1 lets a plugin negotiate its highest.
    for minor in os.environ.get("ORTMEM_TEST_ABI_MINORS", "1,0").split(","):
        report = out / f"{pathlib.Path(plugin).stem}-minor{minor}.json"
        report.unlink(missing_ok=True)
        sanitized = os.environ.get("ORTMEM_TEST_SANITIZED_FLAGS", "").split()
        result = run(runner, "run", "--adapter", plugin, "--abi-minor", minor, *sanitized, "--quiet", "--jobs", "2",
                     "--report", str(report))
        if result.returncode != exit_code:
            problems.append(f"--abi-minor {minor}: exit {result.returncode}, expected {exit_code}:\n{result.stdout[-2000:]}{result.stderr[-1000:]}")
            continue
        data = json.loads(report.read_text())
        jsonschema.Draft202012Validator(schema).validate(data)
        adapter = data["adapter"]
        if not adapter["version"].startswith("nxmem 1."):
            problems.append(f"--abi-minor {minor}: adapter.version {adapter['version']!r} does not name the negotiated version")
        origin = adapter.get("origin", {})
        interface = adapter["version"] + ("" if controls == "none" else " + ortmem-cts controls 1")
        if origin.get("sha256") != digest or origin.get("path") != plugin or origin.get("interface") != interface:
            problems.append(f"--abi-minor {minor}: adapter.origin {origin!r} does not name the plugin's path, SHA-256 and version")
        results = {p["name"]: p["result"] for p in data["verdict"]["profiles"]}
        for name, result in results.items():
            if result != expected.get(name, "not-run"):
                problems.append(f"--abi-minor {minor}: profile {name} is {result}, expected {expected.get(name, 'not-run')}")
        # The ABI offers no control: what needs one the plugin's control
        # extension does not offer is out of scope, and the verdict says how
        # much, never a silent pass; what needs only offered ones was judged.
        if sorted(origin.get("controls", [])) != sorted(expected_controls):
            problems.append(f"--abi-minor {minor}: adapter.origin.controls is {origin.get('controls')}, expected "
                            f"{expected_controls}")
        offered = set(origin.get("controls", []))
        declared = {p["name"] for p in data["verdict"]["profiles"] if p["declared"]}
        for requirement in data["requirements"]:
            needs = set(requirement.get("needs", []))
            if not needs or requirement["profile"] not in declared:
                continue
            if not needs <= offered and requirement["status"] != "out-of-scope":
                problems.append(f"--abi-minor {minor}: {requirement['id']} needs {sorted(needs - offered)}, which the "
                                f"plugin does not offer, but is {requirement['status']}, not out-of-scope")
            if needs <= offered and requirement["status"] == "out-of-scope":
                problems.append(f"--abi-minor {minor}: {requirement['id']} needs only offered controls "
                                f"{sorted(needs)} but is out-of-scope")
        for profile in data["verdict"]["profiles"]:
            out_of_scope = profile["counts"].get("out-of-scope", 0)
            if out_of_scope and f"scope: {out_of_scope} requirement" not in profile.get("note", ""):
                problems.append(f"--abi-minor {minor}: profile {profile['name']} has {out_of_scope} out-of-scope "
                                f"requirements but its note does not say so: {profile.get('note')!r}")
        failing = [r["id"] for r in data["requirements"] if r["status"] == "fail"]
        if failing:
            problems.append(f"--abi-minor {minor}: failing requirements {failing}")
    listing = run(runner, "list", "adapters", "--plugin", plugin)
    if listing.returncode != 0 or f"{plugin}#" not in listing.stdout or digest not in listing.stdout:
        problems.append(f"list adapters --plugin: exit {listing.returncode}, output {listing.stdout!r}")
    report = out / "refused.json"
    report.unlink(missing_ok=True)
    for spec, words in ((plugin + "#no-such-mechanism", "has no mechanism named 'no-such-mechanism'"),
                        (str(out / "missing.so"), "cannot read the plugin file"),
                        (runner, "dlopen failed")):
        problems += refused(run(runner, "run", "--adapter", spec, "--quiet", "--report", str(report)), report, words, spec)
    return problems


def library(known_bad, listed, plugin):
    """The library CMake built for one entry of a known-bad manifest."""
    return pathlib.Path(known_bad) / f"lib{listed['library_prefix']}_{plugin['name'].replace('-', '_')}.so"


def refusals(runner, known_bad, manifest, out):
    out.mkdir(parents=True, exist_ok=True)
    problems = []
    listed = json.loads(pathlib.Path(manifest).read_text())
    plugins = listed["plugins"]
    caught = 0
    for plugin in plugins:
        before = len(problems)
        library_path = library(known_bad, listed, plugin)
        report = out / f"bad-{plugin['name']}.json"
        report.unlink(missing_ok=True)
        result = run(runner, "run", "--adapter", str(library_path), "--quiet", "--report", str(report))
        problems += refused(result, report, plugin["refused_with"], plugin["name"])
        listing = run(runner, "list", "adapters", "--plugin", str(library_path))
        if listing.returncode == 0 and "does not open" not in listing.stdout and "controls refused" not in listing.stdout:
            problems.append(f"{plugin['name']}: `list adapters --plugin` shows it as loadable: {listing.stdout!r}")
        caught += len(problems) == before
    print(f"{caught} of {len(plugins)} known-bad plugins refused as listed")
    return problems


def lies(runner, known_bad, manifest, out):
    """Every plugin that lies through the ABI fails exactly its must_fail ids."""
    out = out / "lies"
    out.mkdir(parents=True, exist_ok=True)
    problems = []
    listed = json.loads(pathlib.Path(manifest).read_text())
    plugins = listed["plugins"]
    for plugin in plugins:
        library_path = library(known_bad, listed, plugin)
        report = out / f"{plugin['name']}.json"
        report.unlink(missing_ok=True)
        # The default per-test timeout: under TSan the model suites need it.
        result = run(runner, "run", "--adapter", str(library_path), "--seed", "20261201", "--jobs", "2",
                     "--quiet", "--report", str(report))
        failing = []
        if report.exists():
            failing = sorted(r["id"] for r in json.loads(report.read_text())["requirements"] if r["status"] == "fail")
        if result.returncode != 1 or failing != sorted(plugin["must_fail"]):
            problems.append(f"{plugin['name']}: exit {result.returncode}, failing {failing}, expected exit 1 failing "
                            f"exactly {sorted(plugin['must_fail'])}")
    print(f"{len(plugins) - len(problems)} of {len(plugins)} lying plugins caught with exactly their ids")
    return problems


def unavailable(runner, plugin, out, words):
    """A plugin the kit cannot read on this machine: refused before any test."""
    out.mkdir(parents=True, exist_ok=True)
    report = out / f"{pathlib.Path(plugin).stem}.json"
    report.unlink(missing_ok=True)
    result = run(runner, "run", "--adapter", plugin, "--quiet", "--report", str(report))
    problems = refused(result, report, "cannot run here", plugin)
    if not problems and words not in result.stderr:
        problems.append(f"{plugin}: the refusal does not name {words!r}: {result.stderr.strip()!r}")
    return problems


def fails(runner, plugin, out, ids):
    """A plugin that lies after loading fails exactly `ids`."""
    out.mkdir(parents=True, exist_ok=True)
    report = out / f"{pathlib.Path(plugin).stem}.json"
    report.unlink(missing_ok=True)
    expected = sorted(ids.split(","))
    result = run(runner, "run", "--adapter", plugin, "--seed", "20261201", "--jobs", "2", "--quiet",
                 "--report", str(report))
    failing = []
    if report.exists():
        failing = sorted(r["id"] for r in json.loads(report.read_text())["requirements"] if r["status"] == "fail")
    if result.returncode != 1 or failing != expected:
        return [f"{plugin}: exit {result.returncode}, failing {failing}, expected exit 1 failing exactly {expected}"]
    return []


def mechanisms(runner, plugin, schema_path, out):
    """A plugin of several mechanisms: refused without a report directory,
    then one valid report per mechanism, under a safe file name."""
    import jsonschema
    import shutil
    schema = json.loads(pathlib.Path(schema_path).read_text())
    shutil.rmtree(out, ignore_errors=True)
    problems = []
    refused = run(runner, "run", "--adapter", plugin, "--quiet", "--report", str(out / "one.json"))
    if refused.returncode != 2 or "--report DIR/" not in refused.stderr or out.exists():
        problems.append(f"without a directory: exit {refused.returncode}, stderr {refused.stderr.strip()!r}, "
                        f"expected exit 2 asking for --report DIR/ and nothing written")
    # What is tested is one report per mechanism, not how deep the models
    # look (the eager plugin's own test certifies this mechanism at the full
    # budget): a small model budget.
    budget = os.environ.get("ORTMEM_TEST_SANITIZED_FLAGS", "").split() or ["--model-runs", "5", "--model-length", "20"]
    # Under a sanitizer, a subset of the suites (partial, exit 3): this test is
    # about one report per mechanism, and the eager plugin's own test certifies
    # the same mechanism with every suite under the sanitizer.
    subset = os.environ.get("ORTMEM_TEST_SANITIZED_SUBSET")
    verdict, passing = ("partial", 3) if subset else ("conformant", 0)
    result = run(runner, "run", "--adapter", plugin, *budget, *(["--filter", subset] if subset else []), "--quiet",
                 "--jobs", "2", "--report", f"{out}/")
    if result.returncode != passing:
        problems.append(f"--report DIR/: exit {result.returncode}, expected {passing}:\n"
                        f"{result.stdout[-1500:]}{result.stderr[-800:]}")
    expected = {"eager-host.json": "eager-host", "eager_twin_2.json": "eager twin/2"}
    written = sorted(p.name for p in out.glob("*.json")) if out.exists() else []
    if written != sorted(expected):
        problems.append(f"--report DIR/ wrote {written}, expected {sorted(expected)}")
    for name, mechanism in expected.items():
        report = out / name
        if not report.exists():
            continue
        data = json.loads(report.read_text())
        jsonschema.Draft202012Validator(schema).validate(data)
        if data["adapter"].get("origin", {}).get("mechanism") != mechanism or data["verdict"]["overall"] != verdict:
            problems.append(f"{name}: mechanism {data['adapter'].get('origin')!r}, verdict {data['verdict']['overall']}")
    return problems


def profile(runner, plugin, out):
    out.mkdir(parents=True, exist_ok=True)
    problems = []
    written = out / "profile.json"
    written.unlink(missing_ok=True)
    result = run(runner, "profile", "--adapter", plugin, "--min-time", "0.01", "--output", str(written))
    if result.returncode != 0 or not written.exists():
        return [f"profile: exit {result.returncode}: {result.stderr.strip()[:500]}"]
    if "adapter ÷ reference" not in result.stdout or "two threads ÷ one" not in result.stdout:
        problems.append(f"profile: the table is missing from stdout: {result.stdout!r}")
    data = json.loads(written.read_text())
    if (data.get("kind") != "ortmem-cts speed profile" or not str(data.get("adapter")).startswith(plugin + "#")
            or data.get("reference") != "host"):
        problems.append(f"profile: the JSON does not name what it measured: {data}")
    sizes = data.get("sizes", [])
    if [entry.get("bytes") for entry in sizes] != [64, 4096, 65536, 1 << 20]:
        problems.append(f"profile: sizes {sizes}")
    for entry in sizes:
        if not all(entry.get(key, 0) > 0 for key in ("adapter_ns", "reference_ns", "ratio")):
            problems.append(f"profile: a figure is not positive: {entry}")
        elif abs(entry["ratio"] - entry["adapter_ns"] / entry["reference_ns"]) > 1e-9 * entry["ratio"]:
            problems.append(f"profile: the ratio is not adapter ÷ reference: {entry}")
    scaling = data.get("two_thread_scaling", {})
    if not (scaling.get("adapter", 0) > 0 and scaling.get("reference", 0) > 0):
        problems.append(f"profile: two-thread scaling {scaling}")
    untouched = out / "no-such-dir" / "profile.json"
    for args, words in ((["--adapter", "no-such-adapter"], "no adapter named 'no-such-adapter'"),
                        (["--adapter", plugin, "--output", str(untouched)], "--output")):
        refusal = run(runner, "profile", *args, "--min-time", "0.01")
        lines = [line for line in refusal.stderr.splitlines() if line.strip()]
        if refusal.returncode != 2 or len(lines) != 1 or words not in lines[0] or refusal.stdout:
            problems.append(f"profile {args}: exit {refusal.returncode}, stdout {refusal.stdout[:200]!r}, stderr {lines!r}")
    if untouched.exists() or untouched.parent.exists():
        problems.append("profile: a refused --output was written")
    # Shown beside the same adapter's report, never beside another's.
    report = out / "profiled.json"
    report.unlink(missing_ok=True)
    certified = run(runner, "run", "--adapter", plugin, "--quiet", "--report", str(report))
    if certified.returncode != 0:
        return problems + [f"profile: the certification to render it beside exited {certified.returncode}"]
    for form, heading in (("md", "## Speed profile (informational)"), ("html", "<h2>Speed profile (informational)</h2>")):
        rendered = run(runner, "report", "render", str(report), "--format", form, "--speed-profile", str(written))
        if rendered.returncode != 0 or heading not in rendered.stdout or "adapter ÷ reference" not in rendered.stdout.replace("&divide;", "÷"):
            problems.append(f"render --format {form} --speed-profile: exit {rendered.returncode}, no speed profile section")
        if form == "html" and rendered.stdout.index(heading) > rendered.stdout.index("</body>"):
            problems.append("render --format html --speed-profile: the section is outside the body")
    other = json.loads(written.read_text())
    other["adapter"] = "someone-else"
    (out / "other-profile.json").write_text(json.dumps(other))
    refused_render = run(runner, "report", "render", str(report), "--speed-profile", str(out / "other-profile.json"))
    if refused_render.returncode != 2 or "measured 'someone-else'" not in refused_render.stderr or refused_render.stdout:
        problems.append(f"render with another adapter's speed profile: exit {refused_render.returncode}, {refused_render.stderr!r}")
    return problems


def main():
    kind, runner, *rest = sys.argv[1:]
    if kind == "certify":
        problems = certify(runner, rest[0], rest[1], pathlib.Path(rest[2]), *rest[3:5])
    elif kind == "unavailable":
        problems = unavailable(runner, rest[0], pathlib.Path(rest[1]), rest[2])
    elif kind == "fails":
        problems = fails(runner, rest[0], pathlib.Path(rest[1]), rest[2])
    elif kind == "profile":
        problems = profile(runner, rest[0], pathlib.Path(rest[1]))
    elif kind == "mechanisms":
        problems = mechanisms(runner, rest[0], rest[1], pathlib.Path(rest[2]))
    else:
        problems = (refusals if kind == "refusals" else lies)(runner, *rest[:2], pathlib.Path(rest[2]))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
