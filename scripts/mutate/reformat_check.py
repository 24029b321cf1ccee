#!/usr/bin/env python3
"""The curated source mutants survive a reformat of the files they edit.

Each file a curated mutant (adapters/mutants/source_mutants.json) edits is
reformatted with clang-format in a style far from the tree's (GNU braces,
40 columns, `> >` for `>>`: nearly every line moves; only what would change
the code's tokens is off, string splitting and sorting), and every edit must still be found
exactly once by its tokens and make the same code (the same tokens) as it
makes in the file as committed. The generated mutants are checked the same
way: each file's mutant ids must be the same before and after the reformat.

  reformat_check.py COMPILE_COMMANDS [CLANG_FORMAT]
"""
import json
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
from mutate import generate, tokens  # noqa: E402

STYLE = ("{BasedOnStyle: GNU, ColumnLimit: 40, SortIncludes: Never, SortUsingDeclarations: false, "
         "BreakStringLiterals: false, FixNamespaceComments: false, Standard: Cpp03}")


def edited(text, edit):
    spans = tokens.locate(text, edit["find"])
    if len(spans) != 1:
        return None, len(spans)
    (start, end), = spans
    return text[:start] + edit["replace"] + text[end:], 1


def reformat(path, clang_format):
    return subprocess.run([clang_format, f"--style={STYLE}", f"--assume-filename={path}"],
                          input=(ROOT / path).read_text(), capture_output=True, text=True, check=True).stdout


def main():
    compile_commands = sys.argv[1]
    clang_format = sys.argv[2] if len(sys.argv) > 2 else "clang-format-14"
    mutants = json.loads((ROOT / "adapters" / "mutants" / "source_mutants.json").read_text())["mutants"]
    problems = []
    reformatted = {}
    for path in sorted({edit["file"] for mutant in mutants for edit in mutant["edits"]}):
        text = reformat(path, clang_format)
        if text == (ROOT / path).read_text():
            problems.append(f"{path}: clang-format left it as it was; the check proves nothing")
        reformatted[path] = text
    for mutant in mutants:
        for edit in mutant["edits"]:
            before, _ = edited((ROOT / edit["file"]).read_text(), edit)
            after, matches = edited(reformatted[edit["file"]], edit)
            if after is None:
                problems.append(f"{mutant['name']}: after a reformat its edit of {edit['file']} matches {matches} "
                                "times, not once")
            elif [t[0] for t in tokens.tokenize(after)] != [t[0] for t in tokens.tokenize(before)]:
                problems.append(f"{mutant['name']}: after a reformat its edit of {edit['file']} makes other code")
    # Generated mutants: the same ids from a reformatted text of each file,
    # parsed in the file's place (the file itself is not touched).
    for path in ["reference/src/host/host_allocator.cpp", "reference/src/binding/registry.cpp"]:
        ids = [m["id"] for m in generate.mutants_of(ROOT / path, ROOT, compile_commands)]
        text = reformatted.get(path) or reformat(path, clang_format)
        moved = [m["id"] for m in generate.mutants_of(ROOT / path, ROOT, compile_commands, text=text)]
        if moved != ids:
            problems.append(f"{path}: a reformat changed {len(set(ids) ^ set(moved))} of its {len(ids)} mutant ids")
    for problem in problems:
        print(problem)
    count = sum(len(m["edits"]) for m in mutants)
    print(f"reformat check: {count} curated edits and the generated mutants of 2 files; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
