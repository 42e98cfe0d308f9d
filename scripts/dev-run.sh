#!/usr/bin/env bash
# `make run`: airlockd on this directory and airlock-proxy beside it, both in the
# foreground of this terminal (Ctrl-C stops both). Sockets and state under ./.airlock/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
state="${AIRLOCK_DEV_STATE:-$root/.airlock}"
bin="${AIRLOCK_DEV_BIN:-$root/.venv/bin}"
mkdir -p "$state"
# airlockd's journals and spills live outside the workspace it serves (a state
# dir inside a root is refused): one dir per checkout under XDG_STATE_HOME.
daemon_state="${XDG_STATE_HOME:-$HOME/.local/state}/airlock-dev/$(printf %s "$root" | sha256sum | cut -c1-12)"
mkdir -p "$daemon_state"

proxy_port="${AIRLOCK_DEV_PROXY_PORT:-8080}"
"$bin/airlock-proxy" --listen "127.0.0.1:$proxy_port" --control "unix:$state/proxy.sock" \
  --state-dir "$state/proxy" --store memory >"$state/proxy.log" 2>&1 &
proxy_pid=$!
"$bin/airlockd" --workspace "$root" --socket "$state/airlockd.sock" \
  --artifacts-dir "$daemon_state/artifacts" --state-dir "$daemon_state/state" \
  >"$state/airlockd.log" 2>&1 &
daemon_pid=$!
trap 'kill -TERM $proxy_pid $daemon_pid 2>/dev/null; wait' EXIT INT TERM

listening() {  # is something accepting connections on 127.0.0.1:$1?
  "$bin/python" -c 'import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()' "$1" 2>/dev/null
}
up=0
for _ in $(seq 1 300); do
  if ! kill -0 "$proxy_pid" 2>/dev/null || ! kill -0 "$daemon_pid" 2>/dev/null; then break; fi
  if [ -S "$state/airlockd.sock" ] && [ -S "$state/proxy.sock" ] && listening "$proxy_port"; then
    up=1
    break
  fi
  sleep 0.1
done
if [ "$up" != 1 ]; then
  # Say what failed instead of printing instructions for services that are not there.
  if ! kill -0 "$proxy_pid" 2>/dev/null; then
    echo "make run: airlock-proxy exited (port $proxy_port taken? set AIRLOCK_DEV_PROXY_PORT):" >&2
    tail -5 "$state/proxy.log" >&2
  elif ! kill -0 "$daemon_pid" 2>/dev/null; then
    echo "make run: airlockd exited:" >&2
    tail -5 "$state/airlockd.log" >&2
  else
    echo "make run: airlockd or airlock-proxy did not come up within 30 s (logs in .airlock/)" >&2
  fi
  exit 1
fi

cat <<MSG
airlockd serves $root on $state/airlockd.sock   (log: .airlock/airlockd.log)
airlock-proxy listens on 127.0.0.1:$proxy_port, control on $state/proxy.sock   (log: .airlock/proxy.log)

Call the daemon:
  curl -s --unix-socket .airlock/airlockd.sock http://airlockd/v1/tools/file_read -d '{"path": "README.md", "limit": 5}'
  .venv/bin/airlock call --socket .airlock/airlockd.sock file_read '{"path": "README.md", "limit": 5}'
  .venv/bin/airlock tools --socket .airlock/airlockd.sock

Use the proxy:
  .venv/bin/airlock session create --control unix:.airlock/proxy.sock --allow 'api.github.com' --ttl 3600
  # then point a client at the proxy_url it prints, trusting the proxy's CA:
  curl -s --unix-socket .airlock/proxy.sock http://proxy/v1/ca.pem > .airlock/proxy-ca.pem
  HTTPS_PROXY=<proxy_url> curl --cacert .airlock/proxy-ca.pem https://api.github.com/zen

Ctrl-C stops both.
MSG
wait
