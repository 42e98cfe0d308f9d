"""Linux network namespaces for the end-to-end topology.

``Topology`` builds three namespaces joined by veth pairs, each pair a /30 of a
random free /24 (10.231.O.0/24) of 10.231.0.0/16, routed nowhere else:

    sandbox ns  .2 ──── .1  proxy ns  .5 ──── .6  internet ns
                            .9                 .14
                             │                  │
                            .10   root ns      .13
                          (the test: orchestrator, control sockets)

- The sandbox's only route is its /30 to the proxy namespace: no default route.
- The proxy namespace does not forward (ip_forward=0), so nothing crosses it:
  the sandbox can reach exactly what listens in the proxy namespace on .1.
- The root namespace (the test, playing the orchestrator) reaches the proxy
  namespace on .9 (the harness's readiness checks, Redis) and the internet on
  .14 (GitHub App token minting, as a real orchestrator would).

``listen_in`` creates a listening TCP socket *inside* a namespace and hands it to
this process (SCM_RIGHTS). A socket keeps the namespace it was created in, so an
in-process aiohttp server serving it is reachable only from that namespace's
side: that is how the local GitHub runs "in the internet" while the test can
still inspect its state directly.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


class NamespacesUnavailable(RuntimeError):
    """This machine cannot create network namespaces (not root, no iproute2, seccomp)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def _used_third_octets() -> set[int]:
    out = _ip("-o", "-4", "addr", "show", check=False).stdout
    used: set[int] = set()
    for word in out.split():
        if word.startswith("10.231."):
            used.add(int(word.split(".")[2]))
    return used


@dataclass(frozen=True)
class Link:
    """One veth pair: end ``a`` in ``ns_a`` (None = root) with host number ``host_a``."""

    a: str
    ns_a: str | None
    b: str
    ns_b: str | None
    host_a: int
    host_b: int


class Topology:
    """Three namespaces (named after ``tag``) on four /30 links of ``10.231.OCTET.0/24``.

    ``proxy_addr``: the proxy namespace's address on the sandbox link, where
    sandboxes send egress. ``internet_addr``: the internet namespace's address
    as the proxies see it (their --resolve target). ``proxy_admin_addr``: the
    proxy namespace's address on the root link (readiness checks, Redis).
    ``internet_public_addr``: the internet namespace's address as the
    orchestrator (root namespace) sees it.
    """

    def __init__(self, tag: str, octet: int) -> None:
        self.tag = tag
        self.octet = octet
        self.sandbox_ns, self.proxy_ns, self.internet_ns = (
            f"{tag}-{kind}" for kind in ("sbx", "prx", "net")
        )
        (
            self.proxy_addr,
            self.sandbox_addr,
            self.proxy_egress_addr,
            self.internet_addr,
            self.proxy_admin_addr,
            self.internet_public_addr,
        ) = (self._addr(host) for host in (1, 2, 5, 6, 9, 14))

    def _addr(self, host: int) -> str:
        return f"10.231.{self.octet}.{host}"

    def _links(self) -> list[Link]:
        t = self.tag
        return [
            Link(f"{t}a0", self.proxy_ns, f"{t}a1", self.sandbox_ns, 1, 2),
            Link(f"{t}b0", self.proxy_ns, f"{t}b1", self.internet_ns, 5, 6),
            Link(f"{t}c0", self.proxy_ns, f"{t}c1", None, 9, 10),
            Link(f"{t}d0", None, f"{t}d1", self.internet_ns, 13, 14),
        ]

    def exec_prefix(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def run_in(self, ns: str, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.exec_prefix(ns), *argv], capture_output=True, text=True, timeout=60, check=False
        )

    def create(self) -> None:
        for ns in (self.sandbox_ns, self.proxy_ns, self.internet_ns):
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        # Nothing may cross the proxy namespace: it terminates, never routes.
        off = self.run_in(self.proxy_ns, ["sh", "-c", "echo 0 > /proc/sys/net/ipv4/ip_forward"])
        if off.returncode != 0:
            raise RuntimeError(f"cannot disable forwarding: {off.stderr.strip()}")
        for link in self._links():
            _ip("link", "add", link.a, "type", "veth", "peer", "name", link.b)
            for name, target, host in (
                (link.a, link.ns_a, link.host_a),
                (link.b, link.ns_b, link.host_b),
            ):
                where = ["-n", target] if target else []
                if target:
                    _ip("link", "set", name, "netns", target)
                _ip(*where, "addr", "add", f"{self._addr(host)}/30", "dev", name)
                _ip(*where, "link", "set", name, "up")

    def routes(self, ns: str) -> list[str]:
        out = _ip("-n", ns, "-4", "route", "show").stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def destroy(self) -> None:
        """Remove everything; safe to call on a half-built topology."""
        for ns in (self.sandbox_ns, self.proxy_ns, self.internet_ns):
            _ip("netns", "del", ns, check=False)
        for link in self._links():
            for name in (link.a, link.b):
                _ip("link", "del", name, check=False)


def can_create_namespaces() -> str | None:
    """None when namespaces work here, else the reason they do not."""
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"alp{os.getpid() % 100000}"
    try:
        _ip("netns", "add", probe)
        # A veth pair inside the probe namespace: the topology needs veth too.
        _ip("-n", probe, "link", "add", "p0", "type", "veth", "peer", "name", "p1")
    except subprocess.CalledProcessError as exc:
        return f"`ip {' '.join(exc.cmd[1:])}` failed: {exc.stderr.strip()}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


@contextlib.contextmanager
def topology() -> Iterator[Topology]:
    """A fresh topology with unique names and a free /24; always torn down."""
    used = _used_third_octets()
    free = [o for o in range(256) if o not in used]
    if not free:
        raise NamespacesUnavailable("no free /24 in 10.231.0.0/16")
    tag = f"al{os.getpid() % 1000:03d}{random.randrange(100):02d}"
    topo = Topology(tag=tag, octet=random.choice(free))
    try:
        topo.create()
        yield topo
    finally:
        topo.destroy()


_LISTENER = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[2], 0))
s.listen(128)
socket.send_fds(socket.socket(fileno=int(sys.argv[1])), [b"L"], [s.fileno()])
"""


def listen_in(ns: str, address: str) -> socket.socket:
    """A listening TCP socket on ``address`` (port chosen by the kernel) inside ``ns``."""
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with parent, child:
        proc = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                ns,
                sys.executable,
                "-c",
                _LISTENER,
                str(child.fileno()),
                address,
            ],
            pass_fds=[child.fileno()],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"could not listen in {ns}: {proc.stderr.strip()}")
        _, fds, _, _ = socket.recv_fds(parent, 1, 1)
    sock = socket.socket(fileno=fds[0])
    sock.setblocking(False)
    return sock
