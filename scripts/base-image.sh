#!/usr/bin/env bash
# Build the images' base (`PYTHON_IMAGE`) from Debian packages, for sites that
# reach a Debian mirror and PyPI but no container registry.
#
#   scripts/base-image.sh [--tag airlock-base:bookworm] [--suite bookworm]
#                         [--mirror http://deb.debian.org/debian]
#                         [--security-mirror http://deb.debian.org/debian-security]
#                         [--extra-ca FILE]... [--cache-dir DIR] [--force]
#
# What it makes: `debootstrap --variant=minbase` of the suite with python3 (3.11
# on bookworm), python3-venv, ca-certificates and tini, imported with
# `docker import`. Every `--extra-ca FILE` (PEM, one or many certificates; e.g.
# the CA of an intercepting proxy) is added to the image's system store, and
# /etc/pip.conf points pip at that store, so `pip install` inside builds from
# this base reaches PyPI through the same proxy the host uses.
#
# Caching: the image carries a label with a key over the script, suite, mirrors
# and CA files. When an image with that tag and key exists, the script does
# nothing (seconds); otherwise it re-imports a cached rootfs tarball from
# --cache-dir when one matches, and only then runs debootstrap (minutes).
# Needs root (debootstrap, chroot), debootstrap and docker.
set -euo pipefail

tag=airlock-base:bookworm
suite=bookworm
mirror=http://deb.debian.org/debian
security_mirror=http://deb.debian.org/debian-security
cache_dir="${XDG_CACHE_HOME:-$HOME/.cache}/airlock/base-image"
force=0
extra_cas=()

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "base-image: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="${2:?--tag needs a value}"; shift 2 ;;
    --suite) suite="${2:?--suite needs a value}"; shift 2 ;;
    --mirror) mirror="${2:?--mirror needs a value}"; shift 2 ;;
    --security-mirror) security_mirror="${2:?--security-mirror needs a value}"; shift 2 ;;
    --extra-ca) extra_cas+=("${2:?--extra-ca needs a file}"); shift 2 ;;
    --cache-dir) cache_dir="${2:?--cache-dir needs a value}"; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

for ca in "${extra_cas[@]+"${extra_cas[@]}"}"; do
  [ -r "$ca" ] || die "--extra-ca $ca: not a readable file"
  grep -q -- '-----BEGIN CERTIFICATE-----' "$ca" || die "--extra-ca $ca: no PEM certificate in it"
  if grep -q -- 'PRIVATE KEY-----' "$ca"; then die "--extra-ca $ca: holds a private key"; fi
done
command -v docker >/dev/null || die "docker is not installed (apt-get install docker.io)"

# The cache key: everything that changes the rootfs.
key=$(
  {
    cat "$0"
    echo "$suite $mirror $security_mirror"
    for ca in "${extra_cas[@]+"${extra_cas[@]}"}"; do cat "$ca"; done
  } | sha256sum | cut -c1-16
)

if [ "$force" = 0 ] && have=$(docker image inspect -f '{{ index .Config.Labels "org.airlock.base-key" }}' "$tag" 2>/dev/null) \
   && [ "$have" = "$key" ]; then
  echo "base-image: $tag is up to date (key $key)"
  exit 0
fi

changes=(
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  --change "ENV LANG=C.UTF-8"
  --change "LABEL org.airlock.base-key=$key"
  --change "LABEL org.airlock.base-suite=$suite"
  --change 'CMD ["/bin/bash"]'
)

tarball="$cache_dir/$suite-$key.tar"
if [ "$force" = 0 ] && [ -s "$tarball" ]; then
  echo "base-image: importing cached rootfs $tarball"
  docker import "${changes[@]}" "$tarball" "$tag" >/dev/null
  echo "base-image: built $tag (key $key, from cache)"
  exit 0
fi

[ "$(id -u)" = 0 ] || die "debootstrap needs root: sudo $0 $*"
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"

work=$(mktemp -d /var/tmp/airlock-base.XXXXXX)
cleanup() {
  # Never leave a mount behind inside the rootfs before removing it.
  for m in proc sys dev/pts dev; do umount -l "$work/rootfs/$m" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
root="$work/rootfs"
started=$(date +%s)

echo "base-image: debootstrap $suite from $mirror (a few minutes)"
debootstrap --variant=minbase \
  --include=ca-certificates,python3,python3-venv,tini,passwd \
  "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
  || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed (log above)"; }

# Apt sources of the image: the release, its updates and security.
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security_mirror
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# Images stay small: no docs, no recommends, no package caches.
cat >"$root/etc/apt/apt.conf.d/90airlock" <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
cat >"$root/etc/dpkg/dpkg.cfg.d/90airlock-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/locale/*
EOF

# Extra CAs into the system store; pip uses the system store too (pip's own
# bundle would not know an intercepting proxy's CA).
i=0
for ca in "${extra_cas[@]+"${extra_cas[@]}"}"; do
  # update-ca-certificates takes one certificate per file: split bundles.
  awk -v dir="$root/usr/local/share/ca-certificates" -v base="airlock-extra-$i" '
    /-----BEGIN CERTIFICATE-----/ { n++; f = sprintf("%s/%s-%03d.crt", dir, base, n) }
    f { print > f }
    /-----END CERTIFICATE-----/ { close(f); f = "" }' "$ca"
  i=$((i + 1))
done
chroot "$root" update-ca-certificates >/dev/null 2>&1
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$root/etc/pip.conf"
# `python` is python3 in every image (the Dockerfile's stages call `python`).
ln -sf python3 "$root/usr/bin/python"

rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
  "$root"/var/log/*.log "$root"/usr/share/doc/*/changelog*

mkdir -p "$cache_dir"
tar --numeric-owner -C "$root" -cf "$tarball.tmp" .
mv "$tarball.tmp" "$tarball"
docker import "${changes[@]}" "$tarball" "$tag" >/dev/null
echo "base-image: built $tag (key $key) in $(( $(date +%s) - started )) s"
