#!/usr/bin/env bash
# Usage errors exit 2 with a one-line reason that helps: an unknown adapter
# lists the known ones; an unknown profile names the valid ones.
set -uo pipefail
runner=$1
err=$("$runner" run --adapter no-such-adapter 2>&1 >/dev/null); code=$?
[[ $code -eq 2 ]] || { echo "unknown adapter: exit $code, expected 2"; exit 1; }
[[ $err == *"known adapters: "*host* ]] || { echo "unknown adapter: reason '$err' does not list the adapters"; exit 1; }
[[ $(printf '%s\n' "$err" | wc -l) -eq 1 ]] || { echo "reason is not one line: $err"; exit 1; }
err=$("$runner" run --adapter host --profile bogus 2>&1 >/dev/null); code=$?
[[ $code -eq 2 && $err == *"unknown profile 'bogus'"* ]] || { echo "unknown profile: exit $code, '$err'"; exit 1; }
err=$("$runner" run --adapter host --report /nonexistent-dir/r.json 2>&1 >/dev/null); code=$?
[[ $code -eq 2 && $err == *"cannot write the report"* ]] || { echo "unwritable report: exit $code, '$err'"; exit 1; }
echo ok
