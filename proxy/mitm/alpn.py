"""HTTP/1.1 towards the sandbox: the ALPN callback of the certificate mitmproxy presents.

It only ever selects ``http/1.1`` (the upstream side still negotiates HTTP/2
when it can), so the stream guard (:mod:`airlock.proxy.mitm.guard_layer`)
parses one framing. :class:`airlock.proxy.addons.intercept.InterceptDecision`
sets it on the TLS context of every intercepted tunnel.
"""

from __future__ import annotations

from typing import Any

from OpenSSL import SSL


def select_http1(conn: SSL.Connection, options: list[bytes]) -> Any:
    """ALPN towards the sandbox: ``http/1.1`` or nothing (HTTP/1.1 all the same)."""
    return b"http/1.1" if b"http/1.1" in options else SSL.NO_OVERLAPPING_PROTOCOLS
