"""The stream guard, wired below every hook (the guard itself is :mod:`airlock.proxy.guard`).

``ClientTLSLayer.send_data`` is the one place every plaintext byte towards the
sandbox passes on an intercepted tunnel, after every hook and every mitmproxy
code path, just before TLS encrypts it. It is wrapped so the bytes go through
the connection's :class:`~airlock.proxy.guard.ResponseGuard` first; on a
violation nothing more is encrypted, the client connection is closed at once
and the guard's ``on_violation`` is told. The guard learns the request methods
(answers to ``HEAD`` have no body) from the request heads ``Http1Server``
parses, in order (:mod:`airlock.proxy.mitm.head_guard` tells it).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mitmproxy.proxy import commands, layer
from mitmproxy.proxy.layers import tls as tls_layers

from ..guard import GuardViolation, ResponseGuard
from .patching import Setting, replace


@dataclass
class StreamGuard:
    """Whose guard checks a tunnel's bytes, and whom a violation is told."""

    make: Callable[[str], ResponseGuard]  # client id -> its guard
    on_violation: Callable[[str, GuardViolation], None]  # must end the connection


_stream_guard: Setting[StreamGuard] = Setting()
_original_send_data = tls_layers.ClientTLSLayer.send_data
_GUARDS: weakref.WeakValueDictionary[str, ResponseGuard] = weakref.WeakValueDictionary()
_GUARD_ATTR = "_airlock_stream_guard"


def active() -> bool:
    """Is a stream guard installed (then HTTP/1 heads tell it their methods)?"""
    return _stream_guard.value is not None


def guard_of(holder: Any, client_id: str) -> ResponseGuard | None:
    """The client's guard (one per client connection), kept alive by ``holder``."""
    wiring = _stream_guard.value
    if wiring is None:
        return None
    guard = getattr(holder, _GUARD_ATTR, None) or _GUARDS.get(client_id)
    if guard is None:
        guard = wiring.make(client_id)
        _GUARDS[client_id] = guard
    setattr(holder, _GUARD_ATTR, guard)
    return guard


def _guarded_send_data(self: Any, data: bytes) -> layer.CommandGenerator[None]:
    """``ClientTLSLayer.send_data``: plaintext for the sandbox passes the guard first."""
    guard = guard_of(self, self.conn.id) if self.conn is self.context.client else None
    if guard is None:
        yield from _original_send_data(self, data)
        return
    first = guard.violation is None
    try:
        data = guard.send(data)
    except GuardViolation as exc:
        if first:
            wiring = _stream_guard.value
            assert wiring is not None
            wiring.on_violation(self.conn.id, exc)
            yield commands.CloseConnection(self.conn)
        return
    if data:
        yield from _original_send_data(self, data)


def install(guard: StreamGuard) -> None:
    """Put ``guard`` on every intercepted tunnel's bytes to the sandbox.

    Needs :mod:`airlock.proxy.mitm.head_guard` (the request methods come through it).
    """
    _stream_guard.value = guard
    replace(tls_layers.ClientTLSLayer, "send_data", _guarded_send_data)
