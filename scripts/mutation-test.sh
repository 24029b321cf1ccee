#!/usr/bin/env bash
# Proves the kit can fail: certifies every known-bad adapter and every source
# mutant of the reference, and writes the kill matrix (which mutants make each
# requirement fail) as JSON and Markdown.
#
#   bash scripts/mutation-test.sh [--matrix FILE] [--only NAME[,NAME...]]
#
# FILE defaults to build/kill-matrix.json; the Markdown goes beside it (.md).
# Exits 1 when a mutant survives, or a MUST requirement of an enforced profile
# is neither killed nor justified in spec/requirements.json.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/install-deps.sh
exec /usr/bin/python3 scripts/mutation_test.py "$@"
