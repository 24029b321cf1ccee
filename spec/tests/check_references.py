#!/usr/bin/env python3
"""Fails when a test source names a requirement id that spec/requirements.json lacks.

Usage: check_references.py REQUIREMENTS_JSON DIR [DIR...]

Tests name the requirements they check (covers("ALLOC-001", ...)); a typo or a
withdrawn id would silently map a test to nothing, so every id-shaped token in
the given source trees must exist in the spec and not be withdrawn. Prints how
many distinct ids the sources name, per family.
"""
import json
import pathlib
import re
import sys
from collections import Counter

ID_PATTERN = re.compile(r"\b(ALLOC|VB|SM|PIN|BIND|OWN|REL|DQ|LOCK|TEAR|ABI)-(\d{3})\b")
SOURCE_SUFFIXES = {".cpp", ".hpp", ".h", ".cc", ".cu"}


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    spec = json.loads(pathlib.Path(argv[1]).read_text())
    known = {r["id"]: r for r in spec["requirements"]}
    problems = []
    named = set()
    for root in map(pathlib.Path, argv[2:]):
        if not root.is_dir():
            problems.append(f"{root}: not a directory")
            continue
        for path in sorted(root.rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES:
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for match in ID_PATTERN.finditer(line):
                    rid = match.group(0)
                    named.add(rid)
                    if rid not in known:
                        problems.append(f"{path}:{number}: names {rid}, which spec/requirements.json does not define")
                    elif known[rid].get("withdrawn"):
                        problems.append(f"{path}:{number}: names {rid}, which is withdrawn")
    for problem in problems:
        print(problem, file=sys.stderr)
    per_family = Counter(rid.split("-")[0] for rid in named)
    print(f"{len(named)} distinct requirement ids named: " + ", ".join(f"{f} {n}" for f, n in sorted(per_family.items())))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
