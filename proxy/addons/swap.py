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
The lease is keyed on the host mitmproxy dials, never the Host header, and a
request inside an intercepted tunnel must name the tunnel's host in Host or
``:authority`` (else 403 ``host_mismatch``, before anything is swapped or sent):
a swapped credential must not reach another virtual host behind the same edge
(``attacker-app.vercel.app`` inside a ``vercel.com`` tunnel).

Each swap adds the real token's forms (raw, Basic, base64; see
:func:`airlock.proxy.scrubber.token_forms`) to the scrub map before the request
leaves, so any echo of it is scrubbed on the way back. Every intercepted
connection of a session shares one map: an echo on another connection of the
same session is scrubbed too.
"""

from __future__ import annotations

import base64
import binascii
import collections
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from mitmproxy import http
from mitmproxy.net.http import url

from ..audit import audit_path_of
from ..context import ProxyContext, refused
from ..credentials import CredentialUnavailable
from ..mitm import BODY_GATE
from ..protocol import LeaseRule, normalize_host
from ..scope.check import BodyGate, Refusal, check_head
from ..scrubber import token_forms
from ..state import ClientState, Tunnel
from ..store.base import PlaceholderEntry, StoreUnavailable

_FORM = re.compile(r"^[ \t]*(token|bearer|basic)[ \t]+([^ \t]+)[ \t]*$", re.IGNORECASE)


@dataclass(frozen=True)
class Candidate:
    header: str
    scheme: str  # token | bearer | basic
    placeholder: str
    raw_value: str
    users: tuple[str, ...] = ()  # the Basic user name the sandbox sent


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
            user, sep, secret = decoded.partition(":")
            if not sep:
                continue
            users: tuple[str, ...] = (user,)
        else:
            users = ()
        out.append(Candidate(raw_name.decode("latin-1").lower(), scheme, secret, value, users))
    return out


def host_mismatch(request: http.Request, tunnel: Tunnel) -> str | None:
    """Why ``request`` does not name its tunnel's host, or None when it does.

    Compared are the values the sandbox sent, never ``request.host``: inside a
    tunnel mitmproxy has already overwritten that with the CONNECT destination.
    Every Host header and the ``:authority`` (HTTP/2) or absolute-form target
    (HTTP/1) must name the CONNECT host and port (default 443, the tunnel is
    TLS); at least one must be present, and at most one Host header.
    """
    named = request.headers.get_all("host")
    if len(named) > 1:
        return "several Host headers"
    if request.authority:
        named.append(request.authority)
    if not named:
        return "no Host header"
    for value in named:
        try:
            host, port = url.parse_authority(value, check=True)
        except ValueError:
            return "unparseable Host"
        if normalize_host(host) != tunnel.host or (port or 443) != tunnel.port:
            return "names another host"
    return None


def render(rule: LeaseRule, token: str) -> str:
    if rule.replace.scheme == "bearer":
        return f"Bearer {token}"
    if rule.replace.scheme == "token":
        return f"token {token}"
    raw = f"{rule.replace.username}:{token}".encode()
    return "Basic " + base64.b64encode(raw).decode()


def _small_body(request: http.Request, bound: int) -> bool:
    """A declared Content-Length within ``bound`` (mitmproxy then reads the body whole)."""
    declared = request.headers.get_all("content-length")
    return (
        len(declared) == 1
        and declared[0].isdigit()
        and int(declared[0]) <= bound
        and "transfer-encoding" not in request.headers
        and not request.stream
    )


# Sessions whose scrub map is kept (most recently used first out): a bound on
# memory, not on correctness of a live connection (it keeps its map).
MAX_SESSION_MAPS = 50_000


class Swap:
    def __init__(self, ctx: ProxyContext) -> None:
        self.ctx = ctx
        # session id -> the scrub map every one of its connections shares
        self._session_maps: collections.OrderedDict[str, dict[bytes, bytes]] = (
            collections.OrderedDict()
        )

    def _share_scrub_map(self, state: ClientState, sid: str) -> None:
        """Give the connection its session's scrub map (the same dict object).

        A token swapped on one connection is then scrubbed on every connection
        of the session, including responses already streaming. Runs before the
        first response on a connection exists, so no scrubber holds the old map.
        """
        shared = self._session_maps.get(sid)
        if shared is None:
            shared = self._session_maps[sid] = {}
            while len(self._session_maps) > MAX_SESSION_MAPS:
                self._session_maps.popitem(last=False)
        else:
            self._session_maps.move_to_end(sid)
        if state.scrub is not shared:
            for real, shown in state.scrub.items():
                shared.setdefault(real, shown)
            state.scrub = shared

    async def requestheaders(self, flow: http.HTTPFlow) -> None:
        state = self.ctx.unanswered_state(flow)
        if state is None or state.session_id is None:
            return
        sid = state.session_id
        tunnel = state.tunnel
        if tunnel is not None and tunnel.intercept:
            self._share_scrub_map(state, sid)
        if tunnel is not None and tunnel.intercept and flow.client_conn.tls_established:
            problem = host_mismatch(flow.request, tunnel)
            if problem is not None:
                self.ctx.refuse(
                    flow,
                    403,
                    "host_mismatch",
                    f"requests in a tunnel to {tunnel.host}:{tunnel.port} must name that host "
                    f"in Host/:authority ({problem}); open a tunnel to the host you mean",
                    session=sid,
                    host=tunnel.host,
                    port=tunnel.port,
                )
                return
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
        actions: list[Callable[[], None]] = []
        gates: list[BodyGate] = []
        leases: set[str] = set()
        for c in found:
            entry = owners.get(c.placeholder)
            if entry is None:
                continue
            rule = self._check(flow, c, entry, sid, host, can_swap)
            if rule is None:
                await self._after_exfiltration(sid)
                return
            if counts[c.header] > 1 or len(flow.request.headers.get_all(c.header)) != 1:
                self.ctx.audit.write(
                    "swap_skipped",
                    reason="duplicate_header",
                    session=sid,
                    lease=entry.lease_id,
                    host=host,
                    header=c.header,
                    trace_id=entry.trace_id,
                )
                continue
            if rule.allow is not None:
                decision = check_head(
                    rule.allow,
                    host,
                    flow.request.method,
                    flow.request.path,
                    content_encoding=flow.request.headers.get("content-encoding", ""),
                )
                if isinstance(decision, Refusal):
                    self._refuse_scope(flow, sid, entry.lease_id, host, decision.message)
                    return
                if isinstance(decision, BodyGate):
                    gates.append(decision)
            try:
                token = await self.ctx.credentials.token_for(rule.replace)
            except CredentialUnavailable as exc:
                self.ctx.refuse(
                    flow,
                    502,
                    "credential_unavailable",
                    f"the credential for {host} cannot be had ({exc.reason}); "
                    "the orchestrator must fix the lease or the GitHub App",
                    session=sid,
                    lease=entry.lease_id,
                    host=host,
                    cause=exc.reason,
                )
                return
            leases.add(entry.lease_id)
            actions.append(
                functools.partial(self._swap, flow, state, c, rule, token, entry, sid, host)
            )
        if not gates:
            for action in actions:
                action()
            return
        # Nothing is swapped or sent until every gate has seen enough body.
        flow.metadata[BODY_GATE] = self._gate(
            flow, gates, actions, sid, ",".join(sorted(leases)), host
        )
        if not _small_body(flow.request, min(g.bound for g in gates)):
            # Held and fed in bounded steps by airlock.proxy.mitm.body_gate;
            # a small declared body is read whole by mitmproxy and judged in ``request``.
            flow.request.stream = True

    def request(self, flow: http.HTTPFlow) -> None:
        """A gated request whose body mitmproxy read whole (small, or no body at all)."""
        gate = flow.metadata.pop(BODY_GATE, None)
        if gate is None or refused(flow):
            return
        gate(flow.request.raw_content or b"", True)

    def _gate(
        self,
        flow: http.HTTPFlow,
        gates: list[BodyGate],
        actions: list[Callable[[], None]],
        sid: str,
        lease: str,
        host: str,
    ) -> Callable[[bytes, bool], bool | None]:
        pending = list(gates)

        def feed(data: bytes, end: bool) -> bool | None:
            for gate in list(pending):
                decision = gate.feed(data, end)
                if isinstance(decision, Refusal):
                    self._refuse_scope(flow, sid, lease, host, decision.message)
                    return False
                if decision is not None:
                    pending.remove(gate)
            if pending:
                return None
            for action in actions:
                action()
            return True

        return feed

    def _refuse_scope(
        self, flow: http.HTTPFlow, sid: str, lease: str, host: str, message: str
    ) -> None:
        self.ctx.refuse(
            flow,
            403,
            "lease_scope",
            message,
            session=sid,
            lease=lease,
            host=host,
            method=flow.request.method,
            path=audit_path_of(flow.request.path),
            detail=message,
        )

    async def _after_exfiltration(self, sid: str) -> None:
        """With ``--on-exfiltration revoke``: every lease of the session goes, now."""
        if self.ctx.config.on_exfiltration != "revoke":
            return
        try:
            leases = await self.ctx.store.list_leases(sid)
            for lease in leases:
                if await self.ctx.store.delete_lease(sid, lease.lease_id):
                    self.ctx.expiry.forget(sid, lease.lease_id)
                    self.ctx.audit.write(
                        "lease_deleted", session=sid, lease=lease.lease_id, cause="exfiltration"
                    )
        except StoreUnavailable:
            self.ctx.audit.write("revoke_failed", session=sid, reason="store_unavailable")

    def _swap(
        self,
        flow: http.HTTPFlow,
        state: ClientState,
        c: Candidate,
        rule: LeaseRule,
        token: str,
        entry: PlaceholderEntry,
        sid: str,
        host: str,
    ) -> None:
        flow.request.headers[c.header] = render(rule, token)
        # Scrub map first: the swapped request must not leave before it.
        forms = token_forms(token, c.placeholder, [rule.replace.username, *c.users])
        for real, shown in forms.items():
            state.scrub.setdefault(real, shown)
        self.ctx.swapped_forms.remember(forms)
        self.ctx.metrics.swaps.labels(host=host).inc()
        self.ctx.audit.write(
            "swap",
            session=sid,
            lease=entry.lease_id,
            host=host,
            method=flow.request.method,
            path=audit_path_of(flow.request.path),
            trace_id=entry.trace_id,
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
