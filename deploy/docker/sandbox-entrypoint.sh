#!/bin/sh
# airlock sandbox entrypoint.
#
# 1. Trusts the airlock-proxy CA (public cert only) for every TLS stack in the
#    sandbox: through the system store when run as root (update-ca-certificates),
#    else through a private bundle (system bundle + proxy CA) in a writable dir,
#    and in both cases through SSL_CERT_FILE, GIT_SSL_CAINFO, REQUESTS_CA_BUNDLE,
#    CURL_CA_BUNDLE and NODE_EXTRA_CA_CERTS, which airlockd's children inherit.
# 2. Prepares the daemon socket directory (shared with the host or orchestrator).
# 3. Drops to an unprivileged user and execs the command (default: airlockd).
#    The default airlockd with AIRLOCK_EXEC_USER set (the image sets `agent`)
#    is the one exception: it keeps uid 0 (group AIRLOCK_RUN_AS, so the socket
#    is group-accessible as before) only to switch to the exec user for every
#    command it runs (`airlockd --exec-user agent`); the agent's processes get
#    no capability and cannot read the daemon's token, journals or artifacts.
#
# It fails closed: no CA (unless explicitly optional), a CA file that holds a
# private key, or a request to run the command as root all stop the container.
#
# Every path is an environment variable so the script can be exercised outside
# the image (the tests run it in a temp root with a fake CA).
set -eu

CA_SRC="${AIRLOCK_PROXY_CA:-/etc/airlock/proxy-ca.pem}"
CA_WAIT_S="${AIRLOCK_PROXY_CA_WAIT_S:-0}"
REQUIRE_CA="${AIRLOCK_REQUIRE_PROXY_CA:-1}"
ANCHOR_DIR="${AIRLOCK_CA_ANCHOR_DIR:-/usr/local/share/ca-certificates}"
SYSTEM_BUNDLE="${AIRLOCK_SYSTEM_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
UPDATE_CA="${AIRLOCK_UPDATE_CA_CERTIFICATES:-update-ca-certificates}"
BUNDLE_DIR="${AIRLOCK_CA_BUNDLE_DIR:-/tmp/airlock-ca}"
SOCKET_DIR="${AIRLOCK_SOCKET_DIR:-/run/airlock}"
RUN_AS="${AIRLOCK_RUN_AS-airlock}"
EXEC_USER="${AIRLOCK_EXEC_USER-}"
TYPESCRIPT_PREFIX="${AIRLOCK_TYPESCRIPT_PREFIX:-/opt/typescript/lib}"

log() { printf 'airlock-sandbox: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 78; }  # 78 = EX_CONFIG

# --- 1. the proxy CA -------------------------------------------------------
waited=0
while [ ! -s "$CA_SRC" ] && [ "$waited" -lt "$CA_WAIT_S" ]; do
  sleep 1
  waited=$((waited + 1))
done

if [ -s "$CA_SRC" ]; then
  grep -q -- '-----BEGIN CERTIFICATE-----' "$CA_SRC" \
    || die "$CA_SRC is not a PEM certificate"
  if grep -q -- 'PRIVATE KEY-----' "$CA_SRC"; then
    die "$CA_SRC contains a private key; give the sandbox only the proxy CA's public certificate"
  fi
  # The first base64 line of the cert identifies it inside a bundle.
  ca_marker="$(sed -n '/-----BEGIN CERTIFICATE-----/{n;p;q;}' "$CA_SRC")"

  if [ "$(id -u)" = 0 ] && mkdir -p "$ANCHOR_DIR" 2>/dev/null && [ -w "$ANCHOR_DIR" ]; then
    cp "$CA_SRC" "$ANCHOR_DIR/airlock-proxy-ca.crt"
    chmod 0644 "$ANCHOR_DIR/airlock-proxy-ca.crt"
    "$UPDATE_CA" >/dev/null 2>&1 || die "$UPDATE_CA failed"
    bundle="$SYSTEM_BUNDLE"
    node_extra="$ANCHOR_DIR/airlock-proxy-ca.crt"
  else
    # Non-root (e.g. Kubernetes with runAsNonRoot): the system store is read-only
    # to us, so build a private bundle that the environment points every tool at.
    mkdir -p "$BUNDLE_DIR"
    tmp="$BUNDLE_DIR/.ca-bundle.$$"
    { if [ -r "$SYSTEM_BUNDLE" ]; then cat "$SYSTEM_BUNDLE"; echo; fi; cat "$CA_SRC"; } >"$tmp"
    chmod 0644 "$tmp"
    mv "$tmp" "$BUNDLE_DIR/ca-bundle.pem"
    cp "$CA_SRC" "$BUNDLE_DIR/proxy-ca.pem"
    chmod 0644 "$BUNDLE_DIR/proxy-ca.pem"
    bundle="$BUNDLE_DIR/ca-bundle.pem"
    node_extra="$BUNDLE_DIR/proxy-ca.pem"
  fi
  grep -qF -- "$ca_marker" "$bundle" || die "the proxy CA did not make it into $bundle"

  export SSL_CERT_FILE="$bundle"
  export GIT_SSL_CAINFO="$bundle"
  export REQUESTS_CA_BUNDLE="$bundle"
  export CURL_CA_BUNDLE="$bundle"
  export NODE_EXTRA_CA_CERTS="$node_extra"
  log "trusting the proxy CA from $CA_SRC via $bundle"
elif [ "$REQUIRE_CA" = 1 ]; then
  die "no proxy CA at $CA_SRC: every intercepted HTTPS request would fail; mount the proxy's /v1/ca.pem there (or set AIRLOCK_REQUIRE_PROXY_CA=0 for a sandbox without the proxy)"
else
  log "warning: no proxy CA at $CA_SRC; continuing because AIRLOCK_REQUIRE_PROXY_CA=0"
fi

# --- 2. the socket directory ----------------------------------------------
mkdir -p "$SOCKET_DIR"

# The optional TypeScript checker (image build arg AIRLOCK_SANDBOX_TYPESCRIPT).
if [ -z "${AIRLOCK_TYPESCRIPT:-}" ] && [ -d "$TYPESCRIPT_PREFIX/node_modules/typescript" ]; then
  export AIRLOCK_TYPESCRIPT="$TYPESCRIPT_PREFIX"
fi

# --- 3. drop privileges and run ---------------------------------------------
daemon_switches_users=0
if [ "$#" -eq 0 ]; then
  set -- airlockd --workspace "${AIRLOCK_WORKSPACE:-/workspace}" --socket "$SOCKET_DIR/airlockd.sock"
  if [ -n "$EXEC_USER" ] && [ "$(id -u)" != 0 ]; then
    # Started non-root (e.g. Kubernetes runAsNonRoot): no way to switch users,
    # so commands run as this user; the pod's securityContext is the boundary.
    log "note: started as uid $(id -u); AIRLOCK_EXEC_USER=$EXEC_USER needs root to switch users, commands run as uid $(id -u)"
  elif [ -n "$EXEC_USER" ]; then
    if airlockd --help 2>/dev/null | grep -q -- '--exec-user'; then
      set -- "$@" --exec-user "$EXEC_USER"
      daemon_switches_users=1
    else
      log "warning: this airlockd has no --exec-user; agent commands run as ${RUN_AS:-the daemon user}"
    fi
  fi
fi

if [ "$daemon_switches_users" = 1 ] && [ "$(id -u)" = 0 ]; then
  exec_uid="$(id -u "${EXEC_USER%%:*}" 2>/dev/null)" || die "AIRLOCK_EXEC_USER: no user ${EXEC_USER%%:*}"
  [ "$exec_uid" != 0 ] || die "AIRLOCK_EXEC_USER=$EXEC_USER is root; refusing"
  [ -n "$RUN_AS" ] || die "set AIRLOCK_RUN_AS to the group that may use the socket"
  sock_gid="$(id -g "$RUN_AS" 2>/dev/null)" || die "user $RUN_AS does not exist"
  chown "0:$sock_gid" "$SOCKET_DIR"
  chmod 0750 "$SOCKET_DIR"
  exec setpriv --regid="$sock_gid" --clear-groups -- "$@"
fi

if [ "$(id -u)" = 0 ]; then
  [ -n "$RUN_AS" ] || die "refusing to run $1 as root; set AIRLOCK_RUN_AS to an unprivileged user"
  uid="$(id -u "$RUN_AS" 2>/dev/null)" || die "user $RUN_AS does not exist"
  [ "$uid" != 0 ] || die "AIRLOCK_RUN_AS=$RUN_AS is root; refusing"
  gid="$(id -g "$RUN_AS")"
  chown "$uid:$gid" "$SOCKET_DIR"
  chmod 0750 "$SOCKET_DIR"
  home="$(getent passwd "$RUN_AS" | cut -d: -f6)"
  export HOME="${home:-/tmp}" USER="$RUN_AS" LOGNAME="$RUN_AS"
  exec setpriv --reuid="$uid" --regid="$gid" --init-groups --no-new-privs \
    --inh-caps=-all -- "$@"
fi
exec "$@"
