"""Linux network namespaces for the end-to-end topology.

``Topology`` builds, with ``ip netns`` and veth pairs:

    sandbox ns  10.231.X.2/30 ──veth── 10.231.X.1/30  root ns (proxies, Redis on 127.0.0.1)
    internet ns 10.231.X.6/30 ──veth── 10.231.X.5/30  root ns

The sandbox namespace has exactly one route, the connected /30 to the proxies'
address; no default route. The internet namespace only knows its /30 too, so it
answers the root namespace (the proxies) and nothing else. The addresses are a
free /24 of 10.231.0.0/16 picked at random and never routed anywhere else.

``listen_in`` creates a listening TCP socket *inside* a namespace and hands it to
this process (SCM_RIGHTS). A socket keeps the namespace it was created in, so an
in-process aiohttp server serving it is reachable only from that namespace's
side: that is how the local GitHub runs "in the internet" while the test can
still inspect its state directly.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

SUBNET = ipaddress.ip_network("10.231.0.0/16")


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


@dataclass
class Topology:
    tag: str
    octet: int

    @property
    def sandbox_ns(self) -> str:
        return f"{self.tag}-sbx"

    @property
    def internet_ns(self) -> str:
        return f"{self.tag}-net"

    @property
    def proxy_addr(self) -> str:
        """The root namespace's address on the sandbox link: where the proxies listen."""
        return f"10.231.{self.octet}.1"

    @property
    def sandbox_addr(self) -> str:
        return f"10.231.{self.octet}.2"

    @property
    def egress_addr(self) -> str:
        """The root namespace's address on the internet link."""
        return f"10.231.{self.octet}.5"

    @property
    def internet_addr(self) -> str:
        return f"10.231.{self.octet}.6"

    @property
    def _veths(self) -> tuple[str, str, str, str]:
        # Interface names are limited to 15 bytes.
        return (f"{self.tag}s0", f"{self.tag}s1", f"{self.tag}n0", f"{self.tag}n1")

    def exec_prefix(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def run_in(self, ns: str, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.exec_prefix(ns), *argv], capture_output=True, text=True, timeout=60, check=False
        )

    def create(self) -> None:
        sbx_root, sbx_in, net_root, net_in = self._veths
        o = self.octet
        steps = [
            ("netns", "add", self.sandbox_ns),
            ("netns", "add", self.internet_ns),
            ("link", "add", sbx_root, "type", "veth", "peer", "name", sbx_in),
            ("link", "set", sbx_in, "netns", self.sandbox_ns),
            ("addr", "add", f"10.231.{o}.1/30", "dev", sbx_root),
            ("link", "set", sbx_root, "up"),
            ("-n", self.sandbox_ns, "addr", "add", f"10.231.{o}.2/30", "dev", sbx_in),
            ("-n", self.sandbox_ns, "link", "set", sbx_in, "up"),
            ("-n", self.sandbox_ns, "link", "set", "lo", "up"),
            ("link", "add", net_root, "type", "veth", "peer", "name", net_in),
            ("link", "set", net_in, "netns", self.internet_ns),
            ("addr", "add", f"10.231.{o}.5/30", "dev", net_root),
            ("link", "set", net_root, "up"),
            ("-n", self.internet_ns, "addr", "add", f"10.231.{o}.6/30", "dev", net_in),
            ("-n", self.internet_ns, "link", "set", net_in, "up"),
            ("-n", self.internet_ns, "link", "set", "lo", "up"),
        ]
        for step in steps:
            _ip(*step)

    def routes(self, ns: str) -> list[str]:
        out = _ip("-n", ns, "-4", "route", "show").stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def destroy(self) -> None:
        """Remove everything; safe to call on a half-built topology."""
        for ns in (self.sandbox_ns, self.internet_ns):
            _ip("netns", "del", ns, check=False)
        for dev in (self._veths[0], self._veths[2]):
            _ip("link", "del", dev, check=False)


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
