#!/usr/bin/env bash
# Build the images and smoke-test the compose stack (`make images`, `make images-smoke`).
#
#   scripts/images.sh build   # base (if local) + sandbox, proxy, orchestrator, redis
#   scripts/images.sh smoke   # build, then: compose up Redis + two proxies + sandbox,
#                             # wait healthy, create a proxy session and call the
#                             # daemon through its socket from the orchestrator image,
#                             # check the sandbox cannot reach the Docker host;
#                             # always tears the stack down (and the firewall rule)
#
# Environment: PYTHON_IMAGE (default airlock-base:bookworm: built here from Debian
# packages by scripts/base-image.sh, cached), EXTRA_CA (CA bundle the base image
# trusts, e.g. an intercepting proxy's), DOCKER, COMPOSE (default: docker-compose
# v1 if installed, else `docker compose`). Prints the time each step took.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

PYTHON_IMAGE="${PYTHON_IMAGE:-airlock-base:bookworm}"
EXTRA_CA="${EXTRA_CA:-}"
TAG="${AIRLOCK_IMAGE_TAG:-local}"

log() { printf 'images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
now() { date +%s; }
timings=()
timed() {  # timed LABEL CMD...: run and record how long it took
  local label=$1 t0 rc=0
  shift
  t0=$(now)
  "$@" || rc=$?
  timings+=("$(printf '%-28s %5ss' "$label" "$(( $(now) - t0 ))")")
  return $rc
}
report() {
  [ ${#timings[@]} -gt 0 ] || return 0
  log "timings:"
  for t in "${timings[@]}"; do printf '  %s\n' "$t" >&2; done
}

pick_docker() {
  # A CLI that can build with BuildKit: Debian's docker.io (20.10) has it built
  # in; a newer CLI needs the buildx plugin.
  if [ -n "${DOCKER:-}" ]; then echo "$DOCKER"; return; fi
  local d
  for d in docker /usr/bin/docker; do
    command -v "$d" >/dev/null 2>&1 || continue
    if "$d" buildx version >/dev/null 2>&1; then echo "$d"; return; fi
    major=$("$d" version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)
    if [ -n "$major" ] && [ "$major" -lt 23 ] 2>/dev/null; then echo "$d"; return; fi
  done
  die "no docker CLI that builds with BuildKit (apt-get install docker.io, or install buildx)"
}
DOCKER=$(pick_docker)
export DOCKER_BUILDKIT=1

pick_compose() {
  if [ -n "${COMPOSE:-}" ]; then echo "$COMPOSE"; return; fi
  if command -v docker-compose >/dev/null 2>&1; then echo docker-compose; return; fi
  if "$DOCKER" compose version >/dev/null 2>&1; then echo "$DOCKER compose"; return; fi
  die "neither docker-compose (apt-get install docker-compose) nor the compose plugin is installed"
}

build() {
  "$DOCKER" info >/dev/null 2>&1 || die "no Docker engine answers (start dockerd: scripts/dockerd.sh start)"
  case "$PYTHON_IMAGE" in
    airlock-base:*)
      ca_args=()
      [ -n "$EXTRA_CA" ] && ca_args=(--extra-ca "$EXTRA_CA")
      timed "base image ($PYTHON_IMAGE)" scripts/base-image.sh --tag "$PYTHON_IMAGE" "${ca_args[@]+"${ca_args[@]}"}"
      ;;
  esac
  local logdir="${AIRLOCK_BUILD_LOG_DIR:-/var/tmp/airlock-build-logs}"
  mkdir -p "$logdir"
  for target in redis proxy orchestrator sandbox; do
    log "building airlock-$target:$TAG (log: $logdir/$target.log)"
    if ! timed "image airlock-$target" "$DOCKER" build --progress=plain \
      --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" \
      --target "$target" -t "airlock-$target:$TAG" . >"$logdir/$target.log" 2>&1; then
      tail -30 "$logdir/$target.log" >&2
      die "building the $target image failed (log: $logdir/$target.log)"
    fi
  done
  "$DOCKER" image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep '^airlock-' >&2 || true
}

smoke() {
  # compose, project, run_dir, bridge: globals on purpose, the EXIT trap
  # (teardown) runs after this function has returned.
  compose=$(pick_compose)
  project="airlock-smoke-$$"
  run_dir=$(mktemp -d /var/tmp/airlock-smoke.XXXXXX)
  chmod 0755 "$run_dir"  # the containers' non-root users traverse it, as they would ./run
  bridge="alsbx$$"
  bridge=${bridge:0:15}
  export AIRLOCK_RUN_DIR="$run_dir" AIRLOCK_SANDBOX_BRIDGE="$bridge" AIRLOCK_IMAGE_TAG="$TAG"
  # shellcheck disable=SC2086
  dc() { $compose -p "$project" -f "$repo/deploy/compose.yaml" "$@"; }
  teardown() {
    local rc=$?
    log "tearing down $project"
    scripts/sandbox-firewall.sh remove "$bridge" >/dev/null 2>&1 || true
    if [ "$rc" != 0 ]; then dc logs --no-color --tail 40 >&2 2>/dev/null || true; fi
    dc down -v --remove-orphans -t 5 >/dev/null 2>&1 || true
    rm -rf "$run_dir"
    report
    [ "$rc" = 0 ] && log "smoke passed" || log "smoke FAILED"
    exit "$rc"
  }
  trap teardown EXIT
  trap 'exit 130' INT TERM

  timed "compose config" dc config -q || die "compose rejected deploy/compose.yaml"
  timed "compose up" dc up -d --no-build redis proxy-a proxy-b sandbox \
    || die "compose up failed"

  log "waiting for the sandbox to be healthy"
  local cid status=""
  cid=$(dc ps -q sandbox)
  t0=$(now)
  while [ $(( $(now) - t0 )) -lt 180 ]; do
    status=$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$cid" 2>/dev/null || echo gone)
    [ "$status" = healthy ] && break
    [ "$status" = gone ] && break
    sleep 1
  done
  timings+=("$(printf '%-28s %5ss' "sandbox healthy" "$(( $(now) - t0 ))")")
  [ "$status" = healthy ] || die "the sandbox did not become healthy (status: $status)"
  for svc in proxy-a proxy-b redis; do
    s=$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$(dc ps -q "$svc")")
    [ "$s" = healthy ] || die "$svc is $s"
  done

  log "session + daemon call from the orchestrator image"
  timed "orchestrator round trip" dc run --rm --no-deps --entrypoint python orchestrator -c '
import asyncio
from airlock.client import DaemonClient, ProxyClient

async def main() -> None:
    async with ProxyClient("unix:/run/airlock-host/proxy/proxy-a.sock") as proxy:
        assert (await proxy.health()).status == "ok"
        session = await proxy.create_session(allow=["api.github.com"], ttl_s=300)
        assert session.proxy_url.startswith("http"), session
        print("session", session.session_id)
        await proxy.delete_session(session.session_id)
    async with DaemonClient(socket="/run/airlock-host/sandbox/airlockd.sock") as daemon:
        await daemon.file_write(path="smoke.txt", content="hello from the smoke test\n")
        page = await daemon.file_read(path="smoke.txt")
        assert page.content == "hello from the smoke test\n", page
        done = await daemon.exec(argv=["id", "-un"], timeout_s=30)
        print("exec ran as", done.stdout.strip())
        assert done.exit_code == 0, done

asyncio.run(main())
print("orchestrator round trip ok")
' || die "the orchestrator could not create a session or call the daemon"

  log "the sandbox reaches the proxy but not the Docker host"
  local gw port listener probe
  gw=$("$DOCKER" network inspect -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}' "${project}_sandbox")
  [ -n "$gw" ] || gw=$(ip -4 -o addr show dev "$bridge" | awk '{print $4}' | cut -d/ -f1)
  [ -n "$gw" ] || die "no host address on the sandbox bridge $bridge"
  # A listener on the host's own address on the sandbox bridge, as any host
  # service bound to 0.0.0.0 would be; it says when it is ready.
  python3 -u -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(120)' "$gw" \
    >"$run_dir/listener.port" &
  listener=$!
  for _ in $(seq 1 100); do [ -s "$run_dir/listener.port" ] && break; sleep 0.1; done
  port=$(cat "$run_dir/listener.port")
  [ -n "$port" ] || { kill "$listener"; die "the host listener did not start"; }
  # The probe prints one word: reached, or blocked:<why>; anything else is a broken probe.
  probe='import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("reached")
except OSError as exc:
    print("blocked:" + type(exc).__name__)'
  [ "$("$DOCKER" exec "$cid" python3 -c "$probe" proxy 8080)" = reached ] \
    || { kill "$listener"; die "the sandbox cannot reach the proxy (the probe is broken?)"; }
  log "sandbox -> proxy:8080 reached"
  before=$("$DOCKER" exec "$cid" python3 -c "$probe" "$gw" "$port")
  # `internal: true` alone lets the host's own bridge address answer: the rule's reason.
  log "without the firewall rule: sandbox -> host $gw:$port $before"
  timed "firewall rule" scripts/sandbox-firewall.sh add "$bridge"
  scripts/sandbox-firewall.sh check "$bridge" || { kill "$listener"; die "the firewall rule is not in place"; }
  after=$("$DOCKER" exec "$cid" python3 -c "$probe" "$gw" "$port")
  kill "$listener" 2>/dev/null || true
  case "$after" in
    blocked:*) log "with the firewall rule: sandbox -> host $gw:$port $after" ;;
    *) die "the sandbox reached a listener on the Docker host ($gw:$port): $after" ;;
  esac
}

case "${1:-}" in
  build) trap report EXIT; build ;;
  smoke) build; smoke ;;
  *) echo "usage: $0 build|smoke" >&2; exit 64 ;;
esac
