"""Everything airlock patches in, or reaches into, mitmproxy 11.0: one package.

mitmproxy offers no option for what a credential broker needs at the
connection level, so these are done here and nowhere else (pinned to
mitmproxy 11.0.x by ``pyproject.toml``), one module per concern:

- :mod:`.connections`: end a client connection, count its bytes, pace its
  reads; read servers in larger pieces; the idle timeout.
- :mod:`.head_guard`: the HTTP/1 request head limit and timeout.
- :mod:`.guard_layer`: the stream guard below every hook
  (:mod:`airlock.proxy.guard` is the guard itself).
- :mod:`.alpn`: HTTP/1.1 towards the sandbox.
- :mod:`.body_gate`: a request body held until a lease scope decides.
- :mod:`.h2_meter`: every HTTP/2 event a client causes, reported first.
- :mod:`.errors`: airlock's JSON error pages in place of mitmproxy's.
- :mod:`.upgrade`: WebSocket control frames scrubbed; 101 pipes for WebSockets only.
- :mod:`.early_hints`: 103 Early Hints relayed, scrubbed.
- :mod:`.body_reader`: HTTP/1 trailer fields dropped instead of hanging; the
  chunks of one read handed on as one piece.
- :mod:`.logscrub`: the proxy's own log scrubbed of swapped tokens.
- :mod:`.master`: the mitmproxy master, with only the addons the proxy needs
  (not a patch: it is built, not changed).

The proxy's runner (:class:`airlock.proxy.app.ProxyServer`) calls
:func:`install` once with everything the patches need from the live proxy (a
:class:`Wiring`) and :func:`uninstall` when it stops, which puts mitmproxy
back as it was. Importing this package, or constructing an addon, patches
nothing; the hook classes in :mod:`airlock.proxy.addons` only use mitmproxy's
addon API. A test pins that no module outside this package assigns to a
mitmproxy attribute.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from mitmproxy.proxy import server as mitm_server

from . import (
    body_gate,
    body_reader,
    connections,
    early_hints,
    errors,
    guard_layer,
    h2_meter,
    head_guard,
    logscrub,
    patching,
    upgrade,
)
from .alpn import select_http1
from .body_gate import BODY_GATE, BodyGateFn
from .connections import count_client_bytes, gate_client_reads, kill_client
from .guard_layer import StreamGuard
from .h2_meter import H2Meter
from .head_guard import HeadGuard
from .logscrub import SwappedForms
from .master import lean_master
from .upgrade import PairsFor

__all__ = [
    "BODY_GATE",
    "BodyGateFn",
    "H2Meter",
    "HeadGuard",
    "PairsFor",
    "StreamGuard",
    "SwappedForms",
    "Wiring",
    "count_client_bytes",
    "gate_client_reads",
    "install",
    "installed",
    "kill_client",
    "lean_master",
    "select_http1",
    "uninstall",
]


@dataclass(frozen=True)
class Wiring:
    """What the patches need from the live proxy, handed over by its runner."""

    head: HeadGuard  # the HTTP/1 head limit and timeout, and whom they tell
    stream_guard: StreamGuard  # each tunnel's guard, and whom a violation is told
    h2_meter: H2Meter  # the session budgets' HTTP/2 event counter
    idle_timeout_s: float  # --idle-timeout
    pairs_for: PairsFor  # client id -> the scrub map for WebSocket control frames and 103s
    swapped_forms: SwappedForms  # what the log filter scrubs (the swap concern feeds it)


_installed = False


def install(wiring: Wiring) -> None:
    """Patch mitmproxy for one proxy process; refuses a second install without an uninstall."""
    global _installed
    if _installed:
        raise RuntimeError("airlock.proxy.mitm is already installed; call uninstall() first")
    _installed = True
    patching.replace(mitm_server, "TCP_TIMEOUT", max(1, round(wiring.idle_timeout_s)))
    connections.install()
    head_guard.install(wiring.head)
    guard_layer.install(wiring.stream_guard)
    body_gate.install()
    h2_meter.install(wiring.h2_meter)
    errors.install()
    upgrade.install(wiring.pairs_for)
    early_hints.install(wiring.pairs_for)
    body_reader.install()
    logscrub.install(wiring.swapped_forms)


def uninstall() -> None:
    """Put mitmproxy back as it was before :func:`install` (a no-op when not installed)."""
    global _installed
    logscrub.uninstall()
    patching.restore_all()
    _installed = False


@contextmanager
def installed(wiring: Wiring) -> Iterator[None]:
    """:func:`install` for the length of a ``with`` block."""
    install(wiring)
    try:
        yield
    finally:
        uninstall()
