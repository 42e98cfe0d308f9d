#!/usr/bin/env bash
# Keep a sandbox network away from the Docker host itself.
#
#   scripts/sandbox-firewall.sh add BRIDGE      # e.g. airlock-sbx0 (compose's sandbox network)
#   scripts/sandbox-firewall.sh remove BRIDGE
#   scripts/sandbox-firewall.sh check BRIDGE    # exit 0 when the rule is in place
#
# Why: a Docker network with `internal: true` has no route out, but the host
# still owns an address on the network's bridge, and a packet from a container
# to that address is delivered to the host's own sockets (the INPUT chain, not
# FORWARD, so DOCKER-USER rules never see it). Any service on the host bound to
# 0.0.0.0 (a metrics agent, the Docker API on TCP, a database) is then reachable
# from the sandbox. This adds `iptables -I INPUT -i BRIDGE -j DROP` (and the
# ip6tables twin): every packet from the sandbox bridge to the host is dropped.
# Container-to-container traffic on the bridge (sandbox -> proxy) and Docker's
# embedded DNS (inside each container's namespace) are unaffected.
# Idempotent; needs root. Kubernetes uses deploy/k8s/networkpolicy.yaml instead.
set -euo pipefail
action="${1:-}"
bridge="${2:-}"
[ -n "$action" ] && [ -n "$bridge" ] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 64; }
comment="airlock-sandbox-no-host"
tables=(iptables)
command -v ip6tables >/dev/null 2>&1 && tables+=(ip6tables)

rule() { "$1" "$2" INPUT -i "$bridge" -m comment --comment "$comment" -j DROP; }

case "$action" in
  add)
    for t in "${tables[@]}"; do
      rule "$t" -C 2>/dev/null || rule "$t" -I
    done
    echo "sandbox-firewall: $bridge -> host dropped"
    ;;
  remove)
    for t in "${tables[@]}"; do
      while rule "$t" -C 2>/dev/null; do rule "$t" -D; done
    done
    ;;
  check)
    rule iptables -C
    ;;
  *) echo "sandbox-firewall: unknown action $action" >&2; exit 64 ;;
esac
