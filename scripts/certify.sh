#!/usr/bin/env bash
# The kit's main job: install, build, certify the host reference implementation
# and print where its report is.
#
# Until the conformance runner (`ortmem-cts run --adapter host`) lands, the
# certification step runs the reference's own self-checks and writes their
# GoogleTest JSON report; the path printed at the end is that report.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
cmake --preset default >/dev/null
cmake --build --preset default

report_dir=build/default/reports
mkdir -p "$report_dir"
report="$report_dir/reference-self-checks.json"
# Written beside the final name and renamed, so a failed run never leaves a half-written report.
partial="$report.partial"
status=0
build/default/reference/tests/ortmem_reference_tests --gtest_brief=1 \
  --gtest_output="json:$partial" || status=$?
if [[ -s "$partial" ]]; then
  mv -f "$partial" "$report"
  echo "report: $PWD/$report"
fi
if [[ $status -ne 0 ]]; then
  echo "certify: the host reference failed its self-checks (exit $status); see the report above" >&2
fi
exit "$status"
