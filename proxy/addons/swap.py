"""The swap: placeholder in, real credential out, on leased hosts only.

Runs in ``requestheaders`` of intercepted https requests to port 443. Only a
header value that *is* a credential form is a candidate:

- ``token <ph>`` / ``Bearer <ph>`` (scheme case-insensitive), and
- ``Basic base64(user:<ph>)``.

One store lookup per request fetches the session and the owners of the
candidate placeholders. A known placeholder presented by another session, to a
host its lease does not cover, in another header or scheme, or anywhere a swap
cannot happen (plain http, port != 443) is an exfiltration attempt: 403 and an
audit line. A duplicated header is never swapped (which value would be meant?).
The lease is keyed on the host mitmproxy dials, never the Host header.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from mitmproxy import http

from airlock.proxy.audit import audit_path_of
from airlock.proxy.context import ProxyContext, refused
from airlock.proxy.protocol import LeaseRule, normalize_host
from airlock.proxy.store.base import PlaceholderEntry, StoreUnavailable

_FORM = re.compile(r"^[ \t]*(token|bearer|basic)[ \t]+([^ \t]+)[ \t]*$", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    header: str
    scheme: str  # token | bearer | basic
    placeholder: str
    raw_value: str


def candidates(headers: http.Headers) -> list[Candidate]:
    """Header values shaped like a credential, with the secret part extracted."""
    out: list[Candidate] = []
    for raw_name, raw_value in headers.fields:
        try:
            value = raw_value.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes anything
            continue
        match = _FORM.match(value)
        if match is None:
            continue
        scheme = match.group(1).lower()
        secret = match.group(2)
        if scheme == "basic":
            try:
                decoded = base64.b64decode(secret, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                continue
            _, sep, secret = decoded.partition(":")
            if not sep:
                continue
        out.append(Candidate(raw_name.decode("latin-1").lower(), scheme, secret, value))
    return out


def render(rule: LeaseRule) -> str:
    token = rule.replace.token
    if rule.replace.scheme == "bearer":
        return f"Bearer {token}"
    if rule.replace.scheme == "token":
        return f"token {token}"
    raw = f"{rule.replace.username}:{token}".encode()
    return "Basic " + base64.b64encode(raw).decode()


class Swap:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        if refused(flow):
            return
        state = self.ctx.connections.get(flow.client_conn.id)
        if state is None or state.session_id is None:
            return
        sid = state.session_id
        tunnel = state.tunnel
        host = tunnel.host if tunnel is not None else normalize_host(flow.request.host)
        can_swap = (
            tunnel is not None
            and tunnel.intercept
            and tunnel.port == 443
            and flow.client_conn.tls_established
            and flow.request.scheme == "https"
        )
        found = candidates(flow.request.headers)
        # Every intercepted request costs one lookup: it also re-checks the
        # session, so a deleted session stops working inside open tunnels.
        if not found and not (tunnel is not None and tunnel.intercept):
            return
        try:
            session, owners = await self.ctx.store.lookup(
                sid, sorted({c.placeholder for c in found})
            )
        except StoreUnavailable:
            self.ctx.refuse(
                flow,
                503,
                "store_unavailable",
                "credential store unavailable",
                session=sid,
                host=host,
            )
            return
        if session is None:
            self.ctx.refuse(flow, 407, "session_gone", "session expired or deleted", session=sid)
            return
        counts: dict[str, int] = {}
        for c in found:
            counts[c.header] = counts.get(c.header, 0) + 1
        for c in found:
            entry = owners.get(c.placeholder)
            if entry is None:
                continue
            rule = self._check(flow, c, entry, sid, host, can_swap)
            if rule is None:
                return
            if counts[c.header] > 1 or len(flow.request.headers.get_all(c.header)) != 1:
                self.ctx.audit.write(
                    "swap_skipped",
                    reason="duplicate_header",
                    session=sid,
                    lease=entry.lease_id,
                    host=host,
                    header=c.header,
                )
                continue
            flow.request.headers[c.header] = render(rule)
            token = rule.replace.token.encode()
            state.scrub[token] = c.placeholder.encode()
            if rule.replace.scheme == "basic":
                real_b64 = base64.b64encode(
                    f"{rule.replace.username}:{rule.replace.token}".encode()
                )
                state.scrub[real_b64] = c.raw_value.split()[-1].encode()
            self.ctx.metrics.swaps.labels(host=host).inc()
            self.ctx.audit.write(
                "swap",
                session=sid,
                lease=entry.lease_id,
                host=host,
                method=flow.request.method,
                path=audit_path_of(flow.request.path),
            )

    def _check(
        self,
        flow: http.HTTPFlow,
        c: Candidate,
        entry: PlaceholderEntry,
        sid: str,
        host: str,
        can_swap: bool,
    ) -> LeaseRule | None:
        """The matching rule, or None after refusing the flow."""
        fields = {"session": sid, "host": host, "lease": entry.lease_id}
        if entry.session_id != sid:
            self.ctx.refuse(
                flow,
                403,
                "exfiltration_wrong_session",
                "placeholder belongs to another session",
                session=sid,
                host=host,
                owner_session=entry.session_id,
            )
            return None
        rules = [r for r in entry.rules if r.host == host]
        if not rules:
            self.ctx.refuse(
                flow,
                403,
                "exfiltration_wrong_host",
                "placeholder not leased for this host",
                **fields,
            )
            return None
        if not can_swap:
            self.ctx.refuse(
                flow,
                403,
                "exfiltration_insecure",
                "placeholders are only swapped on https to port 443",
                **fields,
            )
            return None
        for rule in rules:
            if rule.header == c.header and c.scheme in rule.schemes:
                return rule
        self.ctx.refuse(
            flow,
            403,
            "exfiltration_wrong_form",
            "placeholder not leased for this header or scheme",
            **fields,
        )
        return None
