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

With clang 14 where it is installed: a cold build of the two runners took
126 s with clang++-14 against 205 s with g++ 12 on this 2-core machine, and
CI builds it cold. A mutant is judged by what the kit observes, which does
not depend on the compiler; the default preset keeps g++ building the kit.
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


def make_tree(base, files, thread_sanitizer=False):
    """Copies `files` into base/src and configures base/build; returns (src,
    build). With thread_sanitizer, the build is instrumented by TSan (clang
    14 is then required): a removed lock is judged by the races it opens,
    not by whether one run happens to hit them."""
    tree, build = base / "src", base / "build"
    for path in files:
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, tree / path)
    launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"] if shutil.which("ccache") else []
    has_clang = shutil.which("clang++-14") and shutil.which("clang-14")
    if thread_sanitizer and not has_clang:
        raise RuntimeError("judging under ThreadSanitizer needs clang-14 and clang++-14 (bash scripts/install-deps.sh)")
    compilers = ["-DCMAKE_CXX_COMPILER=clang++-14", "-DCMAKE_C_COMPILER=clang-14"] if has_clang else []
    flags = "-O0 -fsanitize=thread" if thread_sanitizer else "-O0"
    sanitizer = ([f"-DCMAKE_{kind}_LINKER_FLAGS=-fsanitize=thread" for kind in ("EXE", "SHARED", "MODULE")]
                 if thread_sanitizer else [])
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=",
                    f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_C_FLAGS={flags}", *sanitizer,
                    "-DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON", "-DORTMEM_BUILD_BENCH=OFF",
                    "-DORTMEM_BUILD_TESTS=OFF", "-DORTMEM_WITH_CUDA=OFF", *compilers, *launcher],
                   check=True, capture_output=True, env=environment())
    return tree, build


def make(build, targets, jobs=None):
    """(built, the end of the build's output)."""
    run = subprocess.run(["cmake", "--build", str(build), "--target", *targets,
                          *(["--", f"-j{jobs}"] if jobs else [])], capture_output=True, text=True, env=environment())
    return run.returncode == 0, (run.stdout + run.stderr)[-3000:]
