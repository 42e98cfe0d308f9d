"""One mitmproxy addon that runs the airlock concerns in order, failing closed.

mitmproxy walks every registered addon for every event (dozens per request),
so separately registered addons cost measurably on the hot path. The
concerns stay separate classes, one per module; this chain is the only thing
mitmproxy sees, and it calls each concern's hook in the fixed order given.

Hook names are checked when the chain is built: every public method of a
concern must be one of mitmproxy's event names (``mitmproxy.hooks.all_hooks``),
so a typo is a start-up error instead of a hook that silently never runs.
Helpers stay private (``_name``).

mitmproxy's own addon manager logs an exception from an addon and carries on,
which for a credential broker is failing open (a concern that crashed before
its check would let the flow through). Here an exception in any concern ends
that flow: a request-side hook answers 502 with airlock's JSON error body, so
upstream never receives the request; a response-side hook replaces the
response with that 502 (the upstream body never reaches the client); a
WebSocket hook kills the flow; a connection-level hook closes the client
connection. Every case is audited as ``addon_error`` (concern, hook, exception
type: never the message, which could quote a header).

A hook that an earlier concern answered (``flow.response`` set) is still
delivered, and each concern checks :func:`airlock.proxy.context.refused`.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from typing import Any

import mitmproxy.log
import mitmproxy.proxy.layers  # noqa: F401  (defines the http/tcp/udp/tls/websocket/dns hooks)
from mitmproxy import connection, flow, http, tls
from mitmproxy.hooks import all_hooks
from mitmproxy.proxy import server_hooks

from ..context import REFUSED, ProxyContext
from ..protocol import error_json

log = logging.getLogger("airlock.proxy.chain")

FAILED = "airlock_addon_error"
# Hooks after which mitmproxy may still send the upstream's response: a
# failure marked in one of them is re-applied in the next.
_RESPONSE_SIDE = frozenset({"responseheaders", "response"})


class ChainError(ValueError):
    """A concern defines something that is not a mitmproxy hook."""


def hooks_of(concern: object) -> list[str]:
    """The concern's hook names; raises :class:`ChainError` for a non-hook."""
    names: list[str] = []
    for name, member in inspect.getmembers(type(concern)):
        if name.startswith("_") or not callable(member):
            continue
        if name not in all_hooks:
            raise ChainError(
                f"{type(concern).__name__}.{name} is not a mitmproxy hook "
                "(typo? helpers must start with an underscore)"
            )
        names.append(name)
    return names


def _client_of(data: Any) -> connection.Client | None:
    if isinstance(data, connection.Client):
        return data
    if isinstance(data, flow.Flow):
        return data.client_conn
    if isinstance(data, server_hooks.ServerConnectionHookData):
        return data.client
    if isinstance(data, tls.ClientHelloData | tls.TlsData):
        return data.context.client
    return None


class Chain:
    def __init__(self, concerns: Sequence[object], ctx: ProxyContext | None = None) -> None:
        self.concerns = list(concerns)
        self.ctx = ctx
        per_hook: dict[str, list[tuple[str, Callable[..., Any]]]] = {}
        for concern in self.concerns:
            for hook in hooks_of(concern):
                per_hook.setdefault(hook, []).append(
                    (type(concern).__name__, getattr(concern, hook))
                )
        self.hooks = sorted(per_hook)
        for hook, handlers in per_hook.items():
            setattr(self, hook, self._make(hook, handlers))

    # -- failing closed -------------------------------------------------
    def _fail(self, hook: str, concern: str, data: Any, exc: BaseException) -> None:
        client = _client_of(data)
        fields: dict[str, Any] = {"concern": concern, "hook": hook, "error": type(exc).__name__}
        if self.ctx is not None and client is not None:
            state = self.ctx.connections.get(client.id)
            if state is not None:
                fields["session"] = state.session_id
                if state.tunnel is not None:
                    fields["host"] = state.tunnel.host
        log.error("concern %s failed in %s: %s", concern, hook, type(exc).__name__)
        if self.ctx is not None:
            self.ctx.metrics.refusals.labels(reason="addon_error").inc()
            self.ctx.audit.write("addon_error", **fields)
        if isinstance(data, http.HTTPFlow):
            if hook == "websocket_message" or hook.startswith("websocket"):
                data.kill()  # type: ignore[no-untyped-call]
            else:
                data.metadata[FAILED] = f"{concern}.{hook}"
                self._answer_502(data)
            return
        if isinstance(data, server_hooks.ServerConnectionHookData):
            data.server.error = "airlock: internal error"
        if client is not None and self.ctx is not None and hook != "client_disconnected":
            self.ctx.connections.kill(client.id, "addon_error")

    @staticmethod
    def _answer_502(data: http.HTTPFlow) -> None:
        body = error_json(
            "addon_error",
            "airlock-proxy failed while handling this request; "
            "nothing was forwarded upstream; retry, and report it if it persists",
        )
        data.response = http.Response.make(
            502,
            body,
            {"content-type": "application/json", "x-airlock-refusal": "addon_error"},
        )
        data.response.stream = False
        data.metadata[REFUSED] = "addon_error"

    def _make(
        self, hook: str, handlers: list[tuple[str, Callable[..., Any]]]
    ) -> Callable[..., Any]:
        reapply = hook in _RESPONSE_SIDE
        # Connection-level teardown: every concern must get its chance.
        keep_going = hook in ("client_disconnected", "server_disconnected", "done")

        if any(inspect.iscoroutinefunction(h) for _, h in handlers):

            async def run_async(data: Any) -> None:
                if reapply and isinstance(data, http.HTTPFlow) and FAILED in data.metadata:
                    self._answer_502(data)
                    return
                for name, handler in handlers:
                    try:
                        result = handler(data)
                        if inspect.isawaitable(result):
                            await result
                    except Exception as exc:
                        self._fail(hook, name, data, exc)
                        if not keep_going:
                            return

            return run_async

        def run_sync(data: Any) -> None:
            if reapply and isinstance(data, http.HTTPFlow) and FAILED in data.metadata:
                self._answer_502(data)
                return
            for name, handler in handlers:
                try:
                    handler(data)
                except Exception as exc:
                    self._fail(hook, name, data, exc)
                    if not keep_going:
                        return

        return run_sync
