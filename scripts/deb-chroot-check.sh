#!/usr/bin/env bash
# Installs the kit's Debian packages with dpkg -i in a fresh Debian 12 chroot
# (mmdebstrap, from Debian's archive) and certifies from there: the host
# reference with the installed ortmem-cts, and examples/out-of-tree built
# against the installed -dev package. The chroot starts with only what the
# packages' own Depends name (plus a compiler and Ninja for the example), so
# a missing dependency shows as a failed dpkg -i or a binary that cannot load.
# Needs root and the network to Debian's archive; not run by CI (minutes of
# downloads). Usage:
#   bash scripts/deb-chroot-check.sh [BUILD_DIR]   # default build/default
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build/default}
[[ $(id -u) -eq 0 ]] || { echo "deb-chroot-check.sh: mmdebstrap needs root here; run it as root" >&2; exit 2; }
[[ -f $build/CPackConfig.cmake ]] || { echo "deb-chroot-check.sh: $build is not a configured build; run bash scripts/test.sh first" >&2; exit 2; }
command -v mmdebstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$build" && cpack -G DEB -B "$scratch/out" >/dev/null)
version=$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")
runtime=$scratch/out/ortmem-cts_${version}_amd64.deb
dev=$scratch/out/ortmem-cts-dev_${version}_amd64.deb

# What dpkg -i will ask for: the packages' Depends, less the kit itself.
depends_of() { dpkg-deb -f "$1" Depends | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/ //g' | grep -v '^ortmem-cts$' | grep -v '^$'; }
include=$( (depends_of "$runtime"; depends_of "$dev"; echo g++; echo ninja-build) | sort -u | paste -sd, -)
echo "deb-chroot-check: a bookworm chroot with $include"

cp "$runtime" "$dev" "$scratch/"
cp -r examples/out-of-tree "$scratch/example"
mmdebstrap --variant=apt --include="$include" \
  --customize-hook="copy-in $runtime $dev /tmp" \
  --customize-hook="copy-in $scratch/example /tmp" \
  --customize-hook="chroot \"\$1\" dpkg -i /tmp/$(basename "$runtime") /tmp/$(basename "$dev")" \
  --customize-hook="chroot \"\$1\" ortmem-cts --version" \
  --customize-hook="chroot \"\$1\" ortmem-cts run --adapter host --quiet --report /tmp/host.json" \
  --customize-hook="chroot \"\$1\" sh -c 'cmake -S /tmp/example -B /tmp/example-build -G Ninja >/dev/null && cmake --build /tmp/example-build >/dev/null'" \
  --customize-hook="chroot \"\$1\" /tmp/example-build/aligned-cts run --adapter aligned-alloc --quiet --report /tmp/aligned.json" \
  bookworm "$scratch/chroot.tar" http://deb.debian.org/debian
echo "deb-chroot-check: dpkg -i installed both packages in a fresh bookworm chroot; host and examples/out-of-tree certified conformant there"
