#!/usr/bin/env bash
# The CUDA parts reach the driver through cudaGetDriverEntryPointByVersion
# and link cudart statically, so no binary may need libcuda or libcudart to
# load: they must start on machines with no GPU and no driver.
set -uo pipefail
for binary in "$@"; do
  needed=$(ldd "$binary") || { echo "ldd $binary failed"; exit 1; }
  if grep -Eq 'libcuda\.so|libcudart\.so' <<<"$needed"; then
    echo "$binary links the CUDA driver or runtime dynamically:"
    grep -E 'libcuda|libcudart' <<<"$needed"
    exit 1
  fi
done
echo "no libcuda or libcudart in: $*"
