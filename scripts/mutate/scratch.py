"""The scratch build both mutation drivers mutate (scripts/mutation_test.py,
the curated mutants; scripts/mutate/campaign.py, the generated ones).

A copy of the tracked tree under the temporary directory, built at -O0
without debug information (a mutant is judged by behaviour, and the build is
remade once per mutant), through one ccache kept in build/mutation-ccache:
with paths relative to the temporary directory, every scratch copy of the
same sources hits what any other stored, in this run or an earlier one.
Without precompiled headers: ccache cannot reuse a compile against a
regenerated one, so restoring a header the suites' precompiled header
included would recompile every suite (about 40 s a mutant).
"""
import os
import pathlib
import shutil
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
CCACHE = ROOT / "build" / "mutation-ccache"


def tracked_files():
    listing = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split("\n")
    return [path for path in listing if path and (ROOT / path).is_file()]


def environment():
    return dict(os.environ, CCACHE_DIR=str(CCACHE), CCACHE_BASEDIR=tempfile.gettempdir(), CCACHE_NOHASHDIR="1")


def make_tree(base, files):
    """Copies `files` into base/src and configures base/build; returns (src, build)."""
    tree, build = base / "src", base / "build"
    for path in files:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, tree / path)
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=",
                    "-DCMAKE_CXX_FLAGS=-O0", "-DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON", "-DORTMEM_BUILD_BENCH=OFF",
                    "-DORTMEM_BUILD_TESTS=OFF", "-DORTMEM_WITH_CUDA=OFF", *launcher],
                   check=True, capture_output=True, env=environment())
    return tree, build


def make(build, targets, jobs=None):
    """(built, the end of the build's output)."""
    run = subprocess.run(["cmake", "--build", str(build), "--target", *targets,
                          *(["--", f"-j{jobs}"] if jobs else [])], capture_output=True, text=True, env=environment())
    return run.returncode == 0, (run.stdout + run.stderr)[-3000:]
