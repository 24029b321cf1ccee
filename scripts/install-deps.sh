#!/usr/bin/env bash
# Installs every Debian package that building and testing ortmem-cts needs.
# Idempotent: when everything is already present it prints nothing and makes no
# network call, so CI and the README's commands can run it unconditionally.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang ccache
  libgtest-dev libgmock-dev librapidcheck-dev
  nlohmann-json3-dev libexpected-dev libcli11-dev libbenchmark-dev
  python3 python3-jsonschema libsodium-dev pkg-config
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root (or with sudo)." >&2
  exit 2
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
