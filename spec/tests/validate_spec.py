#!/usr/bin/python3
"""Check that spec/ is internally consistent.

Usage: /usr/bin/python3 spec/tests/validate_spec.py [SPEC_DIR]

SPEC_DIR defaults to the directory above this script. The checks:

  * requirements.json validates against requirements.schema.json (draft 2020-12);
  * family ids and chapter names are unique; every family has a chapter file and
    at least one requirement;
  * requirement ids are unique, well formed, use a declared family prefix, and are
    numbered 001, 002, ... without gaps inside each family;
  * `since` is not later than `spec_version`;
  * every requirement that is not withdrawn has a non-empty `remedy` that does
    not merely repeat its statement or its rationale;
  * every requirement that is not withdrawn is defined (written in bold, e.g.
    **ALLOC-004**) exactly once, in its own family's chapter; no chapter defines an
    id of another family;
  * no Markdown file in SPEC_DIR mentions an id that does not exist;
  * README.md exists and names every chapter.

Prints one summary line and exits 0 when everything holds; otherwise prints one
line per problem on stderr and exits 1 (2 when the input cannot be read at all).
"""

import collections
import json
import os
import re
import sys

try:
    import jsonschema
except ImportError:  # pragma: no cover - environment problem, not a spec problem
    sys.stderr.write(
        "validate_spec: the jsonschema module is missing; run with /usr/bin/python3 "
        "(Debian package python3-jsonschema)\n")
    sys.exit(2)

ID_RE = re.compile(r"^([A-Z]+)-([0-9]{3})$")
LEVELS = ("MUST", "SHOULD", "MAY")


def semver_key(text):
    return tuple(int(part) for part in text.split("."))


def normalized(text):
    """Text compared for sameness: case, spacing and a final period ignored."""
    return " ".join(text.split()).casefold().rstrip(".")


def remedy_problems(rid, req):
    """What is wrong with a requirement's remedy (the schema says the same, less plainly)."""
    remedy = req.get("remedy")
    if not isinstance(remedy, str) or not remedy.strip():
        return [f"{rid}: has no remedy (say what implementations get wrong about it and the fix)"]
    out = []
    for field in ("statement", "rationale"):
        other = req.get(field)
        if isinstance(other, str) and normalized(remedy) == normalized(other):
            out.append(f"{rid}: remedy repeats its {field}; say what implementations get wrong and the fix")
    return out


def load_json(path, problems):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as err:
        problems.append(f"{os.path.basename(path)}: cannot read: {err.strerror}")
    except json.JSONDecodeError as err:
        problems.append(
            f"{os.path.basename(path)}: not valid JSON: {err.msg} at line {err.lineno}")
    return None


def schema_problems(schema, data):
    validator_cls = jsonschema.Draft202012Validator
    try:
        validator_cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as err:
        return [f"requirements.schema.json: not a valid draft 2020-12 schema: {err.message}"]
    validator = validator_cls(schema)
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(p) for p in err.absolute_path) or "(top level)"
        label = where
        # Name the requirement id when the error sits inside one.
        path = list(err.absolute_path)
        if len(path) >= 2 and path[0] == "requirements" and isinstance(path[1], int):
            try:
                label = f"{where} ({data['requirements'][path[1]].get('id', '?')})"
            except (IndexError, AttributeError, KeyError, TypeError):
                pass
        if err.validator == "uniqueItems":
            message = "contains two or more identical entries"
        else:
            message = err.message
            if len(message) > 300:
                message = message[:300] + "..."
        out.append(f"requirements.json: schema: {label}: {message}")
    return out


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    spec_dir = os.path.abspath(argv[1]) if len(argv) > 1 else os.path.dirname(here)
    if len(argv) > 2:
        sys.stderr.write("usage: validate_spec.py [SPEC_DIR]\n")
        return 2
    if not os.path.isdir(spec_dir):
        sys.stderr.write(f"validate_spec: {spec_dir} is not a directory\n")
        return 2

    problems = []
    schema = load_json(os.path.join(spec_dir, "requirements.schema.json"), problems)
    data = load_json(os.path.join(spec_dir, "requirements.json"), problems)
    if schema is None or data is None:
        for line in problems:
            sys.stderr.write(f"validate_spec: {line}\n")
        return 2

    problems.extend(schema_problems(schema, data))
    if not isinstance(data, dict):
        for line in problems:
            sys.stderr.write(f"validate_spec: {line}\n")
        return 1

    # ---- families -------------------------------------------------------------
    families = [f for f in data.get("families", []) if isinstance(f, dict)]
    fam_ids = [f.get("id") for f in families]
    for fid, count in collections.Counter(fam_ids).items():
        if count > 1:
            problems.append(f"family {fid} is declared {count} times")
    chapters = [f.get("chapter") for f in families]
    for chap, count in collections.Counter(chapters).items():
        if count > 1:
            problems.append(f"chapter {chap} is used by {count} families")
    chapter_of = {}
    for fam in families:
        fid, chap = fam.get("id"), fam.get("chapter")
        if not isinstance(fid, str) or not isinstance(chap, str):
            continue
        chapter_of[fid] = chap
        if not os.path.isfile(os.path.join(spec_dir, chap)):
            problems.append(f"family {fid}: chapter file {chap} is missing")

    # ---- requirements ---------------------------------------------------------
    reqs = [r for r in data.get("requirements", []) if isinstance(r, dict)]
    spec_version = data.get("spec_version")
    ids = []
    by_family = collections.defaultdict(list)
    for index, req in enumerate(reqs):
        rid = req.get("id")
        if not isinstance(rid, str):
            problems.append(f"requirements[{index}] has no string id")
            continue
        ids.append(rid)
        match = ID_RE.match(rid)
        if not match:
            problems.append(f"{rid}: malformed id (want FAMILY-NNN, e.g. ALLOC-001)")
            continue
        prefix, number = match.group(1), int(match.group(2))
        if prefix not in chapter_of:
            problems.append(f"{rid}: prefix {prefix} is not a declared family")
            continue
        by_family[prefix].append(number)
        if req.get("withdrawn") is not True:
            problems.extend(remedy_problems(rid, req))
        since = req.get("since")
        if (isinstance(since, str) and isinstance(spec_version, str)
                and re.match(r"^\d+\.\d+\.\d+$", since)
                and re.match(r"^\d+\.\d+\.\d+$", spec_version)
                and semver_key(since) > semver_key(spec_version)):
            problems.append(f"{rid}: since {since} is later than spec_version {spec_version}")

    known = set(ids)
    for rid, count in collections.Counter(ids).items():
        if count > 1:
            problems.append(f"{rid}: duplicate id ({count} entries)")

    for fid in chapter_of:
        numbers = sorted(set(by_family.get(fid, [])))
        if not numbers:
            problems.append(f"family {fid} has no requirements")
            continue
        expected = list(range(1, len(numbers) + 1))
        if numbers != expected:
            missing = sorted(set(range(1, max(numbers) + 1)) - set(numbers))
            detail = ", ".join(f"{fid}-{n:03d}" for n in missing) or "does not start at 001"
            problems.append(f"family {fid}: numbering is not contiguous from 001 (missing {detail})")

    # ---- chapters -------------------------------------------------------------
    fam_alt = "|".join(sorted((re.escape(f) for f in chapter_of), key=len, reverse=True))
    mention_re = re.compile(r"(?<![A-Za-z0-9_-])(" + fam_alt + r")-([0-9]+)(?![0-9A-Za-z_])") if fam_alt else None
    bold_re = re.compile(r"\*\*(" + fam_alt + r")-([0-9]{3})\*\*") if fam_alt else None
    withdrawn = {r.get("id") for r in reqs if r.get("withdrawn") is True}

    defined_in = collections.defaultdict(list)  # id -> chapters that bold it
    md_files = sorted(n for n in os.listdir(spec_dir) if n.endswith(".md"))
    family_of_chapter = {chap: fid for fid, chap in chapter_of.items()}
    for name in md_files:
        path = os.path.join(spec_dir, name)
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError) as err:
            problems.append(f"{name}: cannot read: {err}")
            continue
        if mention_re is None:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for m in mention_re.finditer(line):
                rid = f"{m.group(1)}-{m.group(2)}"
                if rid not in known:
                    problems.append(f"{name}:{lineno}: mentions {rid}, which is not a requirement")
            for m in bold_re.finditer(line):
                rid = f"{m.group(1)}-{m.group(2)}"
                if rid in known:
                    defined_in[rid].append(f"{name}:{lineno}")
                    own = family_of_chapter.get(name)
                    if own != m.group(1):
                        problems.append(
                            f"{name}:{lineno}: defines **{rid}** in bold, but {rid} belongs to "
                            f"{chapter_of.get(m.group(1))}; refer to other families' ids without bold")

    for rid in ids:
        match = ID_RE.match(rid)
        if not match or match.group(1) not in chapter_of:
            continue
        own_chapter = chapter_of[match.group(1)]
        places = [p for p in defined_in.get(rid, []) if p.split(":")[0] == own_chapter]
        if rid in withdrawn:
            continue
        if not os.path.isfile(os.path.join(spec_dir, own_chapter)):
            continue  # already reported as a missing chapter file
        if not places:
            problems.append(f"{rid}: not explained in {own_chapter} (write **{rid}** in the paragraph that explains it)")
        elif len(places) > 1:
            problems.append(f"{rid}: written in bold {len(places)} times in {own_chapter} "
                            f"({', '.join(places)}); bold marks the one explaining paragraph")

    readme = os.path.join(spec_dir, "README.md")
    if not os.path.isfile(readme):
        problems.append("README.md is missing")
    else:
        with open(readme, encoding="utf-8") as handle:
            readme_text = handle.read()
        for fid, chap in chapter_of.items():
            if chap not in readme_text:
                problems.append(f"README.md does not mention {chap} (family {fid})")

    if problems:
        for line in problems:
            sys.stderr.write(f"validate_spec: {line}\n")
        sys.stderr.write(f"validate_spec: FAILED with {len(problems)} problem(s) in {spec_dir}\n")
        return 1

    # ---- summary --------------------------------------------------------------
    counts = collections.OrderedDict((fid, collections.Counter()) for fid in chapter_of)
    for req in reqs:
        if req.get("withdrawn") is True:
            continue
        counts[ID_RE.match(req["id"]).group(1)][req["level"]] += 1
    level_totals = collections.Counter()
    parts = []
    for fid, counter in counts.items():
        level_totals.update(counter)
        levels = "/".join(str(counter.get(lv, 0)) for lv in LEVELS)
        parts.append(f"{fid} {sum(counter.values())} ({levels})")
    total = sum(level_totals.values())
    print(f"spec {spec_version} OK: {total} requirements "
          f"[MUST {level_totals['MUST']}, SHOULD {level_totals['SHOULD']}, MAY {level_totals['MAY']}, "
          f"withdrawn {len(withdrawn)}]; per family (MUST/SHOULD/MAY): " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
