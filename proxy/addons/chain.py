"""One mitmproxy addon that runs the airlock concerns in order.

mitmproxy walks every registered addon for every event (dozens per request),
so five separately registered addons cost measurably on the hot path. The
concerns stay separate classes, one per module; this chain is the only thing
mitmproxy sees, and it calls each concern's hook in the fixed order:

    SessionAuth -> EgressPolicy -> InterceptDecision -> Swap -> Scrub

A hook that an earlier concern answered (``flow.response`` set) is still
delivered, and each concern checks :func:`airlock.proxy.context.refused`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

HOOKS = (
    "http_connect",
    "requestheaders",
    "responseheaders",
    "response",
    "websocket_message",
    "tls_clienthello",
    "tls_start_client",
    "server_connect",
    "server_connected",
    "server_connect_error",
    "client_disconnected",
)


class Chain:
    def __init__(self, concerns: Sequence[object]) -> None:
        self.concerns = list(concerns)
        for hook in HOOKS:
            handlers = [getattr(c, hook) for c in self.concerns if hasattr(c, hook)]
            if handlers:
                setattr(self, hook, self._make(handlers))

    @staticmethod
    def _make(handlers: list[Callable[..., Any]]) -> Callable[..., Any]:
        if any(inspect.iscoroutinefunction(h) for h in handlers):

            async def run_async(data: Any) -> None:
                for handler in handlers:
                    result = handler(data)
                    if inspect.isawaitable(result):
                        await result

            return run_async

        def run_sync(data: Any) -> None:
            for handler in handlers:
                handler(data)

        return run_sync
