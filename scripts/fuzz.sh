#!/usr/bin/env bash
# Fuzzes the readers of hostile input with libFuzzer (clang, with ASan and
# UBSan): every report/journal reader and what consumes it
# (reports/fuzz/report_reader_fuzzer.cpp), the expectations parser
# (reports/fuzz/expectations_fuzzer.cpp), and the nxmem plugin loader, which
# reads the structs and vtables a plugin hands back
# (adapters/plugin/fuzz/nxmem_reader_fuzzer.cpp plays the plugin).
#
#   bash scripts/fuzz.sh                  # 20 s per target: the CI sample
#   bash scripts/fuzz.sh --seconds 300    # a campaign; --merge keeps what it found
#   bash scripts/fuzz.sh --target nxmem_reader --seconds 300 --merge
#                                         # one target (repeat --target for more)
#   bash scripts/fuzz.sh --list           # the targets, one a line
#
# Each target starts from its hand-made seeds (reports/fuzz/seeds/TARGET) and
# its committed corpus (reports/fuzz/corpus-TARGET.tar.gz: thousands of small
# inputs, packed) and works on a copy in build/fuzz; --merge adds the inputs
# that reached new code to the committed corpus (libFuzzer -merge=1, so it
# stays minimal) and repacks it reproducibly. Targets run two at a time, one
# per core.
# With --merge, each run also appends its target, seconds and executions to
# reports/fuzz/campaign.log, the campaign's record. Exits 1 on a crash, leak or
# sanitizer report, leaving the input in build/fuzz/TARGET-crashes/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

all_targets=(report_reader expectations nxmem_reader)
seconds=20
merge=false
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --merge) merge=true; shift ;;
    --target)
      [[ " ${all_targets[*]} " == *" ${2:-} "* ]] || { echo "fuzz.sh: --target is one of: ${all_targets[*]}" >&2; exit 2; }
      targets+=("$2"); shift 2 ;;
    --list) printf '%s\n' "${all_targets[@]}"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1'; use [--seconds N] [--merge] [--target NAME]... [--list]" >&2; exit 2 ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")

fuzzer_of() {
  case "$1" in
    nxmem_reader) echo adapters/plugin/fuzz/nxmem_reader_fuzzer.cpp ;;
    *) echo "reports/fuzz/$1_fuzzer.cpp" ;;
  esac
}
max_len_of() {
  case "$1" in
    expectations) echo 1024 ;;
    nxmem_reader) echo 4096 ;;
    *) echo 8192 ;;
  esac
}

bash scripts/install-deps.sh
out=build/fuzz
mkdir -p "$out"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Iadapters -Iadapters/plugin/include -Ireports/include -Ireference/include)
# Compiles SOURCES into DIR, at most two at once; rebuilds only when a file
# under the dependency paths changed since STAMP. Usage:
#   build STAMP DIR "DEPENDENCY PATHS" SOURCES...
build() {
  local stamp=$1 dir=$2 deps=$3 source pids=()
  shift 3
  # shellcheck disable=SC2086  # deps is a list of paths
  if [[ -f $stamp ]] && [[ -z $(find $deps -newer "$stamp" \( -name '*.[ch]pp' -o -name '*.h' \) | head -1) ]]; then
    return 0
  fi
  echo "fuzz: building $dir"
  mkdir -p "$dir"
  for source in "$@"; do
    clang++ "${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" -c "$source" -o "$dir/$(basename "$source" .cpp).o" &
    pids+=($!)
    if (( ${#pids[@]} >= 2 )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  touch "$stamp"
}
# Every target reads reports (the loader hashes the plugin file with them).
build "$out/.built" "$out" "reports reference/include/ortmem/expected.hpp" reports/src/*.cpp
if [[ " ${targets[*]} " == *" nxmem_reader "* ]]; then
  # The loader without dlopen (PluginModule::from_exports), the plugin
  # allocator and the kit's API types its answers become.
  build "$out/.built-nxmem" "$out/nxmem" "adapters/plugin reference/include reference/src/api reports/include" \
    adapters/plugin/plugin_status.cpp adapters/plugin/plugin_module.cpp adapters/plugin/plugin_allocator.cpp \
    adapters/plugin/plugin_virtual_backing.cpp adapters/plugin/plugin_shared_mapping.cpp \
    adapters/plugin/plugin_deferred_release.cpp adapters/plugin/plugin_controls.cpp \
    reference/src/api/allocator.cpp reference/src/api/device.cpp reference/src/api/memory_error.cpp \
    reference/src/api/release_outcome.cpp
fi
for target in "${targets[@]}"; do
  objects=("$out"/*.o)
  libs=(-lsodium)
  if [[ $target == nxmem_reader ]]; then objects+=("$out"/nxmem/*.o); libs+=(-ldl); fi
  # Relinked when its fuzzer or any object it links is newer than the binary.
  if [[ ! -f $out/$target ]] || [[ -n $(find "$(fuzzer_of "$target")" "${objects[@]}" -newer "$out/$target" | head -1) ]]; then
    clang++ "${flags[@]}" "$(fuzzer_of "$target")" "${objects[@]}" "${libs[@]}" -o "$out/$target"
  fi
done

status=0
# A campaign (--merge) runs two at a time, one per core, so the seconds it
# logs for a target are a core's. A sample runs every target at once: it
# replays the committed corpus and explores briefly, and one batch instead of
# two keeps CI's step 20 s shorter.
at_once=2
$merge || at_once=${#targets[@]}
for (( first = 0; first < ${#targets[@]}; first += at_once )); do
  batch=("${targets[@]:first:at_once}")
  pids=()
  for target in "${batch[@]}"; do
    work=$out/corpus-$target
    mkdir -p "$work" "$out/$target-crashes"
    cp reports/fuzz/seeds/$target/* "$work"/
    [[ -f reports/fuzz/corpus-$target.tar.gz ]] && tar -C "$work" -xzf "reports/fuzz/corpus-$target.tar.gz"
    ( "$out/$target" -max_total_time="$seconds" -max_len="$(max_len_of "$target")" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$out/$target-crashes/" "$work" >"$out/$target.log" 2>&1 ) &
    pids+=($!)
  done
  for index in "${!batch[@]}"; do
    target=${batch[$index]}
    if ! wait "${pids[$index]}"; then
      echo "fuzz: $target FAILED; see $out/$target.log and $out/$target-crashes/" >&2
      tail -30 "$out/$target.log" >&2
      status=1
    fi
    work=$out/corpus-$target
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/$target.log" | grep -o '[0-9]*$' || echo 0)
    echo "fuzz: $target: $runs inputs in $seconds s, working corpus $(ls "$work" | wc -l) files"
    if $merge && [[ $status -eq 0 ]]; then
      minimal=$out/minimal-$target
      rm -rf "$minimal" && mkdir -p "$minimal"
      "$out/$target" -merge=1 "$minimal" "$work" >/dev/null 2>&1
      tar -C "$minimal" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - . |
        gzip -9n >"reports/fuzz/corpus-$target.tar.gz"
      echo "$(date -u +%FT%TZ) $target ${seconds}s $runs" >>reports/fuzz/campaign.log
    fi
  done
done
exit $status
