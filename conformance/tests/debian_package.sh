#!/usr/bin/env bash
# The Debian packages hold the kit: builds them with cpack from this build,
# checks each one's contents and Depends, then certifies the host reference
# with the ortmem-cts extracted from the runtime package (dpkg-deb -x) and
# builds examples/out-of-tree against the extracted -dev package.
# (scripts/deb-chroot-check.sh installs them with dpkg -i in a fresh chroot.)
set -euo pipefail
build=$1 source=$2 version=$3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fail() { echo "debian package: $*"; exit 1; }
# What this judges is the runner and its files, not how hard the checks
# push: a small model budget (as runner_environment.sh) keeps each run short.
small=(--model-runs 5 --model-length 20)

(cd "$build" && cpack -G DEB -B "$scratch/out" >"$scratch/cpack.log" 2>&1) || { cat "$scratch/cpack.log"; fail "cpack -G DEB failed"; }
runtime=$scratch/out/ortmem-cts_${version}_amd64.deb
dev=$scratch/out/ortmem-cts-dev_${version}_amd64.deb
[[ -f $runtime && -f $dev ]] || fail "cpack made $(cd "$scratch/out" && ls ./*.deb | tr '\n' ' '), expected $(basename "$runtime") and $(basename "$dev")"

# Each path the package must hold (+) or must not (-), as dpkg-deb --contents names them.
expect_contents() {
  local deb=$1 listing
  shift
  listing=$(dpkg-deb --contents "$deb" | awk '{print $NF}')
  for want in "$@"; do
    case "$want" in
      +*) grep -qx "./${want#+}" <<<"$listing" || fail "$(basename "$deb") lacks /${want#+}" ;;
      -*) ! grep -q "^\./${want#-}" <<<"$listing" || fail "$(basename "$deb") holds /${want#-}, which belongs elsewhere" ;;
    esac
  done
}
expect_contents "$runtime" +usr/bin/ortmem-cts +usr/share/ortmem-cts/spec/requirements.json \
  +usr/share/ortmem-cts/schema/report.schema.json -usr/include -usr/lib
expect_contents "$dev" +usr/include/ortmem/cts/adapter.hpp +usr/include/nxmem/nxmem_abi.h +usr/lib/libortmem_cts.a \
  +usr/lib/cmake/ortmem-cts/ortmem-cts-config.cmake +usr/lib/pkgconfig/nxmem.pc -usr/bin -usr/include/ortmem/cts/suite.hpp

# Depends: the runtime's from dpkg-shlibdeps (the shared libraries the binary
# links: the C++ runtime, Google Benchmark, libsodium), the -dev one's the
# runtime at the same version and the -dev packages its archives need.
depends=$(dpkg-deb -f "$runtime" Depends)
for package in libc6 libstdc++6 libbenchmark1debian libsodium23; do
  grep -q "\b$package\b" <<<"$depends" || fail "ortmem-cts does not depend on $package (Depends: $depends)"
done
depends=$(dpkg-deb -f "$dev" Depends)
for package in "ortmem-cts (= $version)" libgtest-dev librapidcheck-dev libbenchmark-dev libsodium-dev; do
  grep -qF "$package" <<<"$depends" || fail "ortmem-cts-dev does not depend on $package (Depends: $depends)"
done

root=$scratch/root
dpkg-deb -x "$runtime" "$root"
dpkg-deb -x "$dev" "$root"
"$root/usr/bin/ortmem-cts" --version | grep -q "^ortmem-cts $version" || fail "the packaged ortmem-cts --version is not $version"
code=0
"$root/usr/bin/ortmem-cts" run --adapter host "${small[@]}" --quiet --report "$scratch/host.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 0 ]] || fail "the packaged ortmem-cts certified host with exit $code, expected 0 (conformant)"
cmake -S "$source/examples/out-of-tree" -B "$scratch/example" -G Ninja -DCMAKE_PREFIX_PATH="$root/usr" >"$scratch/example.log" 2>&1 &&
  cmake --build "$scratch/example" >>"$scratch/example.log" 2>&1 || { cat "$scratch/example.log"; fail "examples/out-of-tree does not build against the extracted -dev package"; }
code=0
"$scratch/example/aligned-cts" run --adapter aligned-alloc "${small[@]}" --quiet --report "$scratch/aligned.json" >/dev/null 2>&1 || code=$?
[[ $code -eq 0 ]] || fail "the out-of-tree adapter built on the -dev package certified with exit $code, expected 0"
echo "debian package: $(basename "$runtime") and $(basename "$dev") hold what they should; the extracted kit certified host and built and certified examples/out-of-tree"
