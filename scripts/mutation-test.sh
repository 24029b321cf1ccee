#!/usr/bin/env bash
# Proves the kit can fail, two ways.
#
# The curated mutants: certifies every known-bad adapter, every curated source
# mutant of the reference and every lying nxmem plugin, checks that every
# known-bad plugin is refused at load, and writes the kill matrix (which
# mutants make each requirement fail, and which ABI rule each refused plugin
# broke) as JSON and Markdown.
#
#   bash scripts/mutation-test.sh [--matrix FILE] [--only NAME[,NAME...]] [--adapter-reports DIR]
#   bash scripts/mutation-test.sh --curated-sample-seconds S [--seed N]
#       CI: refuses the committed matrix (reports/mutation/kill-matrix.json)
#       unless it is whole, green and of the current sources, then judges a
#       seeded sample of the curated mutants for S seconds
#   bash scripts/mutation-test.sh --check-committed
#       only the refusal above (a second): CI runs it before any build
#
# FILE defaults to build/kill-matrix.json; the Markdown goes beside it (.md).
# To commit it: ctest --preset kill, then --matrix reports/mutation/kill-matrix.json
# --adapter-reports build/default/test-reports.
# DIR is where ctest left its reports (build/default/test-reports): adapter
# mutants and plugin lies with a current report there are not run again.
# Plugins are named plugin:NAME in --only and in the matrix.
# Exits 1 when a mutant or lie survives or fails more than its manifest says,
# a known-bad plugin loads, or a MUST requirement of an enforced profile is
# neither killed nor justified in spec/requirements.json.
#
# The generated mutants (scripts/mutate/campaign.py, on clang's AST):
#
#   bash scripts/mutation-test.sh --full [--file GLOB] [--operator OP]
#       the campaign: every mutant without a current result, resumable;
#       results and summary in reports/mutation/; removed locks are judged
#       on a ThreadSanitizer build (--operator lock-removal runs only them)
#   bash scripts/mutation-test.sh --sample-seconds S [--seed N]
#       CI's sample (no removed locks: it has no TSan build): exits 1 when its
#       score is under reports/mutation/floor.json or a mutant the committed
#       campaign killed survives
# Both need the default build's compile_commands.json (bash scripts/test.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
case "${1:-}" in
  --full|--sample-seconds|--report|--list) exec /usr/bin/python3 scripts/mutate/campaign.py "$@" ;;
  *) exec /usr/bin/python3 scripts/mutation_test.py "$@" ;;
esac
