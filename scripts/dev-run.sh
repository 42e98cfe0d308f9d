#!/usr/bin/env bash
# `make run`: airlockd on this directory and airlock-proxy beside it, both in the
# foreground of this terminal (Ctrl-C stops both). Sockets and state under ./.airlock/.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
state="$root/.airlock"
bin="$root/.venv/bin"
mkdir -p "$state"
# The daemon's journals may not live inside a root it serves (airlockd refuses that).
daemon_state="${XDG_STATE_HOME:-$HOME/.local/state}/airlock/daemon-$(printf %s "$root" | sha256sum | cut -c1-12)"

"$bin/airlock-proxy" --listen 127.0.0.1:8080 --control "unix:$state/proxy.sock" \
  --state-dir "$state/proxy" --store memory >"$state/proxy.log" 2>&1 &
proxy_pid=$!
"$bin/airlockd" --workspace "$root" --socket "$state/airlockd.sock" \
  --artifacts-dir "$state/artifacts" --state-dir "$daemon_state" >"$state/airlockd.log" 2>&1 &
daemon_pid=$!
trap 'kill -TERM $proxy_pid $daemon_pid 2>/dev/null; wait' EXIT INT TERM

for _ in $(seq 1 100); do
  [ -S "$state/airlockd.sock" ] && [ -S "$state/proxy.sock" ] && break
  sleep 0.1
done

cat <<MSG
airlockd serves $root on $state/airlockd.sock   (log: .airlock/airlockd.log)
airlock-proxy listens on 127.0.0.1:8080, control on $state/proxy.sock   (log: .airlock/proxy.log)

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
