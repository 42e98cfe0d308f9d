#!/usr/bin/env bash
# Start or stop a dockerd for CI and `make images-smoke` on a machine without
# an init system (a CI runner, a VM without systemd).
#
#   scripts/dockerd.sh start   # no-op when a daemon already answers
#   scripts/dockerd.sh stop    # stops only the dockerd this script started
#
# State: $AIRLOCK_DOCKERD_DIR (default /var/tmp/airlock-dockerd) holds the pid
# file and the log. A dockerd that cannot start is an error with the last lines
# of its log, never a silent skip.
set -euo pipefail

dir="${AIRLOCK_DOCKERD_DIR:-/var/tmp/airlock-dockerd}"
pidfile="$dir/dockerd.pid"
logfile="$dir/dockerd.log"
wait_s="${AIRLOCK_DOCKERD_WAIT_S:-60}"

die() { echo "dockerd.sh: $*" >&2; exit 1; }

case "${1:-}" in
  start)
    if docker info >/dev/null 2>&1; then
      echo "dockerd.sh: a Docker daemon already answers; using it"
      exit 0
    fi
    command -v dockerd >/dev/null || die "dockerd is not installed: apt-get install -y docker.io"
    [ "$(id -u)" = 0 ] || die "starting dockerd needs root (or start Docker yourself and re-run)"
    mkdir -p "$dir"
    # setsid: the daemon outlives this shell but not the caller's `stop`.
    setsid dockerd --host unix:///var/run/docker.sock >"$logfile" 2>&1 </dev/null &
    echo $! >"$pidfile"
    for _ in $(seq 1 "$((wait_s * 4))"); do
      if docker info >/dev/null 2>&1; then
        echo "dockerd.sh: dockerd is up (pid $(cat "$pidfile"), log $logfile)"
        exit 0
      fi
      kill -0 "$(cat "$pidfile")" 2>/dev/null || break
      sleep 0.25
    done
    tail -20 "$logfile" >&2 || true
    die "dockerd did not come up within ${wait_s}s (log: $logfile); the images smoke cannot run"
    ;;
  stop)
    [ -s "$pidfile" ] || { echo "dockerd.sh: nothing started here"; exit 0; }
    pid=$(cat "$pidfile")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid"
      for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
    echo "dockerd.sh: stopped dockerd (pid $pid)"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 64
    ;;
esac
