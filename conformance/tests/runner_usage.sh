#!/usr/bin/env bash
# Usage errors exit 2 with a one-line reason that helps, before anything runs
# and without touching any file: an unknown adapter lists the known ones; an
# unknown profile names the valid ones; a report path that cannot take a
# report (empty, a directory, a device, a missing directory) is refused up
# front; a seed or shard that does not fit is refused, never wrapped.
set -uo pipefail
runner=$1
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

expect_usage() {  # DESCRIPTION EXPECTED-TEXT ARGS...
  local description=$1 expected=$2
  shift 2
  local err code
  err=$("$runner" "$@" 2>&1 >/dev/null); code=$?
  [[ $code -eq 2 ]] || { echo "$description: exit $code, expected 2 ($err)"; exit 1; }
  [[ $err == *"$expected"* ]] || { echo "$description: reason '$err' does not say '$expected'"; exit 1; }
  [[ $(printf '%s\n' "$err" | wc -l) -eq 1 ]] || { echo "$description: reason is not one line: $err"; exit 1; }
}

expect_usage "unknown adapter" "known adapters: " run --adapter no-such-adapter
[[ $("$runner" run --adapter no-such-adapter 2>&1) == *" host"* ]] || { echo "unknown adapter: host is not listed"; exit 1; }
expect_usage "unknown profile" "unknown profile 'bogus'" run --adapter host --profile bogus
expect_usage "missing directory" "does not exist" run --adapter host --report /nonexistent-dir/r.json
expect_usage "empty report path" "needs a file path" run --adapter host --report ''
expect_usage "directory as report" "is a directory" run --adapter host --report "$scratch"
expect_usage "device as report" "not a regular file" run --adapter host --report /dev/full
[[ -c /dev/full ]] || { echo "/dev/full is no longer a device"; exit 1; }
expect_usage "negative seed" "is not a seed" run --adapter host --seed -1
expect_usage "seed past 64 bits" "is not a seed" run --adapter host --seed 18446744073709551616
expect_usage "bad shard" "is not a shard" run --adapter host --shard 2/2
expect_usage "filter matching nothing" "selects no test" run --adapter host --filter 'NoSuchTest*'
RC_PARAMS="seed=5" expect_usage "disagreeing seeds" "disagree" run --adapter host --seed 6
GTEST_SHARD_INDEX=3 GTEST_TOTAL_SHARDS=2 expect_usage "bad GoogleTest shard" "do not name a shard" run --adapter host
[[ -z $(ls -A "$scratch") ]] || { echo "a refused run left files: $(ls -A "$scratch")"; exit 1; }

# A neighbour named like the old writability probe is never touched.
echo neighbour >"$scratch/r.json.probe"
"$runner" run --adapter host --filter 'Adapters/Allocator.*' --quiet --report "$scratch/r.json" >/dev/null 2>&1
[[ $(cat "$scratch/r.json.probe") == neighbour ]] || { echo "the run touched r.json.probe"; exit 1; }
[[ $(ls -A "$scratch" | sort | tr '\n' ' ') == "r.json r.json.probe " ]] || { echo "left behind: $(ls -A "$scratch")"; exit 1; }

version=$("$runner" --version); code=$?
[[ $code -eq 0 && $version == "ortmem-cts "*"(git "*", spec "*")" ]] || { echo "--version: exit $code, '$version'"; exit 1; }
echo ok
