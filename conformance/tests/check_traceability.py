#!/usr/bin/env python3
"""Fails when a MUST requirement of an enforced profile has no conformance test.

Usage: check_traceability.py REQUIREMENTS_JSON SUITES_DIR PROFILE[,PROFILE...]

A requirement is traced when a suite test names it in covers(...). Withdrawn
requirements, and those whose spec entry carries a justification (no
implementation can violate them observably), need no test. The profiles to
enforce are given explicitly: a profile joins the list when its suites exist.
"""
import json
import pathlib
import re
import sys

COVERS = re.compile(r"covers\(([^)]*)\)")
ID = re.compile(r'"([A-Z]+-\d{3})"')


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    spec = json.loads(pathlib.Path(argv[1]).read_text())
    profiles = set(argv[3].split(","))
    named = set()
    for path in pathlib.Path(argv[2]).rglob("*.cpp"):
        for call in COVERS.finditer(path.read_text()):
            named.update(ID.findall(call.group(1)))
    missing = [
        r for r in spec["requirements"]
        if r["level"] == "MUST" and r["profile"] in profiles
        and not r.get("withdrawn") and "justification" not in r and r["id"] not in named
    ]
    for r in missing:
        print(f'{r["id"]} ({r["profile"]}, {r["title"]}) is a MUST requirement no conformance test names', file=sys.stderr)
    must = [r for r in spec["requirements"] if r["level"] == "MUST" and r["profile"] in profiles]
    print(f"{len(must) - len(missing)}/{len(must)} MUST requirements of {', '.join(sorted(profiles))} are traced to a test")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
