#!/usr/bin/env python3
"""Checks that every #include points down the layers ARCHITECTURE.md draws,
and that no public header includes an internal one.

Each tracked C++ file belongs to a layer by its directory; each quoted
include is resolved to the file it names and that file's layer. A file may
include its own layer and the layers below it, and nothing else: the host
and CUDA mechanisms never each other, the reports never the kit. A public
header (reference/include, reports/include, conformance/include) may not
include reference/include/ortmem/detail/ (the annotated locks): detail is
for sources. Tests, benchmarks, examples and plugins are not layers and are
not checked. Prints each violation as file:line and exits 1 if there is one.

  python3 scripts/check_layers.py [ROOT]
  python3 scripts/check_layers.py --self-test   # shows it finds each kind of violation
"""
import pathlib
import re
import subprocess
import sys

# (layer name, rank, directories). A file may include any layer of lower or
# equal rank, except a same-rank sibling (host and cuda are both rank 3).
LAYERS = [
    ("contract", 1, ["reference/include/ortmem/detail/", "reference/src/api/", "reference/src/binding/"]),
    ("mechanism", 2, ["reference/include/ortmem/mechanism/", "reference/src/mechanism/"]),
    ("host", 3, ["reference/include/ortmem/host/", "reference/src/host/"]),
    ("cuda", 3, ["reference/include/ortmem/cuda/", "reference/src/cuda/"]),
    ("reports", 4, ["reports/include/", "reports/src/"]),
    ("adapter-api", 4, ["conformance/include/", "conformance/src/"]),
    ("adapters", 5, ["adapters/host/", "adapters/cuda/", "adapters/plugin/", "adapters/controls/",
                     "adapters/mutants/", "adapters/third_party/", "adapters/nxmem/"]),
    ("kit", 6, ["conformance/suites/", "conformance/runner/"]),
]
# The contract's own headers, directly under reference/include/ortmem/.
CONTRACT_HEADER = re.compile(r"^reference/include/ortmem/[^/]+\.hpp$")
PUBLIC = ("reference/include/", "reports/include/", "conformance/include/")
DETAIL = "reference/include/ortmem/detail/"
INCLUDE_ROOTS = ["reference/include", "reports/include", "conformance/include", "conformance/suites",
                 "conformance", "adapters", "reference/src", "."]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def layer_of(path):
    if CONTRACT_HEADER.match(path):
        return ("contract", 1)
    for name, rank, directories in LAYERS:
        if any(path.startswith(d) for d in directories):
            return (name, rank)
    return None


def resolve(root, including, target, tracked):
    """The tracked file an include names: beside the includer first, then the include roots."""
    candidates = [str(pathlib.PurePosixPath(including).parent / target)]
    candidates += [str(pathlib.PurePosixPath(r) / target) for r in INCLUDE_ROOTS]
    for candidate in candidates:
        normal = str(pathlib.PurePosixPath(*[p for p in pathlib.PurePosixPath(candidate).parts if p != "."]))
        normal = re.sub(r"[^/]+/\.\./", "", normal)
        if normal in tracked:
            return normal
    return None


def self_test():
    """A small tree with one include of each kind that must be refused, and
    one of each that must pass: the scan must name exactly the bad ones."""
    import tempfile
    tree = {
        "reference/include/ortmem/mechanism/vmm/granules.hpp": "",
        "reference/include/ortmem/detail/mutex.hpp": "",
        "reference/include/ortmem/allocator.hpp": '#include "ortmem/detail/mutex.hpp"\n',  # public -> detail
        "reference/include/ortmem/host/host.hpp": '#include "ortmem/allocator.hpp"\n',  # down: fine
        "reference/include/ortmem/cuda/cuda.hpp": "",
        "reference/src/host/host.cpp": '#include "ortmem/cuda/cuda.hpp"\n#include "ortmem/detail/mutex.hpp"\n',
        "reference/src/mechanism/queue.cpp": '#include "ortmem/host/host.hpp"\n',  # up
        "reports/src/report.cpp": '#include "ortmem/mechanism/vmm/granules.hpp"\n',  # down: fine
    }
    with tempfile.TemporaryDirectory() as scratch:
        base = pathlib.Path(scratch)
        for path, text in tree.items():
            (base / path).parent.mkdir(parents=True, exist_ok=True)
            (base / path).write_text(text)
        subprocess.run(["git", "init", "-q", str(base)], check=True)
        problems, _ = scan(base)
    expected = ["reference/include/ortmem/allocator.hpp:1", "reference/src/host/host.cpp:1",
                "reference/src/mechanism/queue.cpp:1"]
    found = sorted(p.split(": ")[0] for p in problems)
    if found != expected:
        print(f"check_layers self-test: expected violations at {expected}, found {found}")
        return 1
    print(f"check_layers self-test: the {len(expected)} planted violations are found, and nothing else")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    problems, checked = scan(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve())
    for problem in problems:
        print(problem)
    print(f"check_layers: {checked} files, {len(problems)} includes pointing up, sideways or into detail/")
    return 1 if problems else 0


def scan(root):
    """([violation], files checked) for the tree at `root`."""
    files = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"], check=True,
                           capture_output=True, text=True).stdout.split()
    tracked = set(files)
    problems, checked = [], 0
    for path in sorted(tracked):
        if not path.endswith((".hpp", ".cpp", ".h")) or "/tests/" in path or "/bench/" in path:
            continue
        own = layer_of(path)
        if own is None:
            continue
        checked += 1
        text = (root / path).read_text(errors="replace")
        for match in INCLUDE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            target = resolve(root, path, match.group(1), tracked)
            if target is None:
                continue  # a generated or third-party header
            if path.startswith(PUBLIC) and not path.startswith(DETAIL) and target.startswith(DETAIL):
                problems.append(f"{path}:{line}: a public header includes {target}, an internal one: "
                                "move what needs it into the .cpp (a pimpl) or out of detail/")
            theirs = layer_of(target)
            if theirs is None:
                continue
            if theirs[1] > own[1] or (theirs[1] == own[1] and theirs[0] != own[0]):
                problems.append(f"{path}:{line}: the {own[0]} layer includes {target} of the {theirs[0]} layer, "
                                "which is not below it (ARCHITECTURE.md, Layers)")
    return problems, checked


if __name__ == "__main__":
    sys.exit(main())
