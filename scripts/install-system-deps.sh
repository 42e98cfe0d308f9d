#!/usr/bin/env bash
# Install the system tools the test suite runs for real, on Debian or Ubuntu.
#
#   scripts/install-system-deps.sh            # install what is missing (root), else
#                                             # print the one command to run and fail
#   scripts/install-system-deps.sh --dry-run  # print what it would do; change nothing
#   scripts/install-system-deps.sh --list     # the packages, one a line
#   scripts/install-system-deps.sh --with-images [--dry-run]
#                                             # also what `make images-smoke` needs
#                                             # (docker.io, debootstrap, iptables)
#
# `make test` runs it first. Idempotent and fast when everything is present
# (one `dpkg-query` and a few `command -v`); apt runs only for what is missing.
# Tools are checked by command where a package from another source may provide
# them (e.g. nodejs from NodeSource, kubectl from Google's repository).
set -euo pipefail

# package -> the command that proves it is installed ("-" = check the package itself)
PACKAGES=(
  "git:git"
  "gh:gh"
  "redis-server:redis-server"
  "ripgrep:rg"
  "curl:curl"
  "iproute2:ip"
  "util-linux:setpriv"
  "nodejs:node"
  "npm:npm"
  "make:make"
  "python3-venv:-"
  "kubernetes-client:kubectl"
  "docker-compose:docker-compose"
)

IMAGE_PACKAGES=(
  "docker.io:dockerd"
  "debootstrap:debootstrap"
  "iptables:iptables"
)

mode=install
for arg in "$@"; do
  case "$arg" in
    --dry-run|-n) mode=dry-run ;;
    --list) mode=list ;;
    --with-images) PACKAGES+=("${IMAGE_PACKAGES[@]}") ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-system-deps: unknown argument $arg (see --help)" >&2; exit 64 ;;
  esac
done

if [ "$mode" = list ]; then
  for entry in "${PACKAGES[@]}"; do echo "${entry%%:*}"; done
  exit 0
fi

missing=()
for entry in "${PACKAGES[@]}"; do
  pkg="${entry%%:*}"
  cmd="${entry#*:}"
  if [ "$cmd" = "-" ]; then
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  else
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-system-deps: every system tool the tests need is installed"
  exit 0
fi

command="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$mode" = dry-run ]; then
  echo "install-system-deps: missing: ${missing[*]}"
  echo "install-system-deps: would run: $command"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: not a Debian/Ubuntu machine; install the equivalents of: ${missing[*]}" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-system-deps: missing: ${missing[*]}. Run this once, then make test again:" >&2
  echo "  sudo sh -c '$command'" >&2
  exit 1
fi

echo "install-system-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-system-deps: done"
