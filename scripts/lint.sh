#!/usr/bin/env bash
# The tree's habits, checked: every C++ and C file is formatted as
# .clang-format says, and clang-tidy finds nothing in the checked set of
# .clang-tidy. Fails on the first finding, naming the file and what to run.
#
#   bash scripts/lint.sh            # both
#   bash scripts/lint.sh --format   # clang-format only (a second)
#   bash scripts/lint.sh --fix      # reformat the tree in place, then check tidy
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode=all
case "${1:-}" in
  "") ;;
  --format) mode=format ;;
  --fix) mode=fix ;;
  *) echo "lint.sh: unknown argument '$1'; use --format or --fix" >&2; exit 2 ;;
esac

bash scripts/install-deps.sh
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' '*.cu')

if [[ $mode == fix ]]; then
  clang-format-14 -i --style=file "${sources[@]}"
fi
if ! clang-format-14 --dry-run --Werror --style=file "${sources[@]}"; then
  echo "lint: the files above are not formatted as .clang-format says; run: bash scripts/lint.sh --fix" >&2
  exit 1
fi
echo "lint: clang-format clean (${#sources[@]} files)"
[[ $mode == format ]] && exit 0

# clang-tidy reads the compile commands of a configure without precompiled
# headers (a PCH made by GCC or another clang cannot be read), using clang 14
# as the asan and tsan presets do. Nothing is built: configuring writes the
# generated sources the commands name.
build=build/tidy
cmake -S . -B "$build" -G Ninja -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON \
  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 -DORTMEM_BUILD_BENCH=OFF >/dev/null
# The kit's own sources; tests, benchmarks and the known-bad adapters (wrong
# on purpose) are left out of the checked set.
mapfile -t checked < <(git ls-files 'reference/src/*.cpp' 'reports/src/*.cpp' 'conformance/runner/*.cpp' \
  'conformance/src/*.cpp' 'adapters/*.cpp' ':!:adapters/mutants/*' ':!:adapters/known_bad/*')
if ! run-clang-tidy-14 -quiet -p "$build" -j "$(nproc)" "${checked[@]/#/$PWD/}" >"$build/tidy.log" 2>&1; then
  grep -E "(warning|error):" "$build/tidy.log" | sort -u | head -50 >&2
  echo "lint: clang-tidy found the above (all of it in $build/tidy.log); fix them or, for a check that is wrong here, say why in .clang-tidy" >&2
  exit 1
fi
echo "lint: clang-tidy clean (${#checked[@]} files)"
