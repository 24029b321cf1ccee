#!/usr/bin/env bash
# Fuzzes the readers of hostile files with libFuzzer (clang, with ASan and
# UBSan): every report/journal reader and what consumes it
# (reports/fuzz/report_reader_fuzzer.cpp), and the expectations parser
# (reports/fuzz/expectations_fuzzer.cpp).
#
#   bash scripts/fuzz.sh                  # 20 s per target: the CI sample
#   bash scripts/fuzz.sh --seconds 300    # a campaign; --merge keeps what it found
#
# Each target starts from its hand-made seeds (reports/fuzz/seeds/TARGET) and
# its committed corpus (reports/fuzz/corpus-TARGET.tar.gz: thousands of small
# inputs, packed) and works on a copy in build/fuzz; --merge adds the inputs
# that reached new code to the committed corpus (libFuzzer -merge=1, so it
# stays minimal) and repacks it reproducibly.
# With --merge, each run also appends its target, seconds and executions to
# reports/fuzz/campaign.log, the campaign's record. Exits 1 on a crash, leak or
# sanitizer report, leaving the input in build/fuzz/TARGET-crashes/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=20
merge=false
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    --merge) merge=true; shift ;;
    *) echo "fuzz.sh: unknown argument '$1'; use [--seconds N] [--merge]" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
out=build/fuzz
mkdir -p "$out"
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -Ireports/include -Ireference/include)
sources=(reports/src/*.cpp)
# Rebuild only when a source or header changed since the last build.
stamp=$out/.built
if [[ ! -f $stamp ]] || [[ -n $(find reports reference/include/ortmem/expected.hpp -newer "$stamp" -name '*.[ch]pp' | head -1) ]]; then
  echo "fuzz: building"
  pids=()
  for source in "${sources[@]}"; do
    clang++ "${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" -c "$source" -o "$out/$(basename "$source" .cpp).o" &
    pids+=($!)
    if (( ${#pids[@]} >= 2 )); then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  for target in report_reader expectations; do
    clang++ "${flags[@]}" "reports/fuzz/${target}_fuzzer.cpp" "$out"/*.o -lsodium -o "$out/$target"
  done
  touch "$stamp"
fi

status=0
pids=()
for target in report_reader expectations; do
  work=$out/corpus-$target
  mkdir -p "$work" "$out/$target-crashes"
  cp reports/fuzz/seeds/$target/* "$work"/
  [[ -f reports/fuzz/corpus-$target.tar.gz ]] && tar -C "$work" -xzf "reports/fuzz/corpus-$target.tar.gz"
  # Both targets at once: one per core.
  ( "$out/$target" -max_total_time="$seconds" -max_len="$([[ $target == expectations ]] && echo 1024 || echo 8192)" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$out/$target-crashes/" "$work" >"$out/$target.log" 2>&1 ) &
  pids+=($!)
done
for index in 0 1; do
  target=$([[ $index -eq 0 ]] && echo report_reader || echo expectations)
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
exit $status
