#!/usr/bin/env bash
# Installs every Debian package that building and testing ortmem-cts needs,
# and the npm packages the tests check formats with (scripts/node, pinned by
# its package-lock.json). Idempotent: when everything is already present it
# prints nothing and makes no network call, so CI and the README's commands
# can run it unconditionally.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang ccache
  libgtest-dev libgmock-dev librapidcheck-dev
  nlohmann-json3-dev libexpected-dev libcli11-dev libbenchmark-dev
  python3 python3-jsonschema libsodium-dev pkg-config libxml2-utils chromium libclang-rt-14-dev
  libmimalloc-dev libjemalloc-dev libgoogle-perftools-dev
  python3-clang-14 clang-format-14  # scripts/mutate: mutants generated on clang's AST, the reformat check
  clang-tidy-14  # scripts/lint.sh: the checked set in .clang-tidy
  dpkg-dev file  # cpack -G DEB: dpkg-shlibdeps finds the runtime package's Depends
)

install_node_tools() {
  local dir
  dir="$(dirname "${BASH_SOURCE[0]}")/node"
  [[ -f $dir/node_modules/ctrf/package.json && -f $dir/node_modules/playwright-core/package.json ]] && return 0
  if ! command -v npm >/dev/null; then
    # Only when no npm is there: a Node.js from elsewhere brings its own.
    echo "install-deps: installing npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
  fi
  echo "install-deps: installing the npm test tools (scripts/node)"
  (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
}

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  install_node_tools
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root (or with sudo)." >&2
  exit 2
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_node_tools
