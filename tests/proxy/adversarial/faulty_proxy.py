"""airlock-proxy with a concern broken on purpose (a test double of a bug).

``python faulty_proxy.py FAULT <airlock-proxy args...>``:

- ``raise``: Swap raises *after* it rewrote the credential header when the path
  contains ``/raise-request``; Scrub raises in ``responseheaders`` for
  ``/raise-headers`` and in ``response`` for ``/raise-response``. Every
  exception message quotes the request's Authorization header (the real token
  after the swap), so a proxy that logged or returned it would leak.
- ``typo``: Swap grows a misspelt hook ``request_headers``.
- ``unscrubbed:HOOK[,HOOK...]``: scrubbing hooks switched off, to show the
  connection-level guard alone keeps the token from the sandbox. ``headers``
  (``Scrub.responseheaders``: head and streamed bodies), ``response``
  (``Scrub.response``: buffered bodies, trailers), ``websocket``
  (``Scrub.websocket_message``), ``control`` (WebSocket ping, pong and close
  payloads), ``hints`` (relayed 103 Early Hints).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from airlock.proxy import cli
from airlock.proxy.addons.scrub import Scrub
from airlock.proxy.addons.swap import Swap
from airlock.proxy.mitm import early_hints, upgrade


def _off(_self: Any, _flow: Any) -> None:
    return None


def _unscrub(hooks: list[str]) -> None:
    """Switch scrubbing hooks off (a test double of a hook that misses a path)."""
    for hook in hooks:
        if hook == "headers":
            Scrub.responseheaders = _off  # type: ignore[method-assign, assignment]
        elif hook == "response":
            Scrub.response = _off  # type: ignore[method-assign, assignment]
        elif hook == "websocket":
            Scrub.websocket_message = _off  # type: ignore[method-assign, assignment]
        elif hook == "control":
            upgrade.scrub_control = lambda event, pairs: event
        elif hook == "hints":
            # The module's own bindings of the scrubber's functions (names it imported).
            vars(early_hints)["scrub"] = lambda data, pairs: data
            vars(early_hints)["scrub_name"] = lambda name, pairs: name
        else:
            raise SystemExit(f"unknown hook {hook!r}")


def _wrap(cls: type, hook: str, marker: str) -> None:
    original = getattr(cls, hook)

    async def broken(self: Any, flow: Any) -> None:
        result = original(self, flow)
        if inspect.isawaitable(result):
            await result
        if marker in flow.request.path:
            raise RuntimeError(f"broken on purpose: {flow.request.headers.get('authorization')}")

    setattr(cls, hook, broken)


def main() -> int:
    fault = sys.argv.pop(1)
    if fault == "typo":

        def request_headers(self: Any, flow: Any) -> None:
            return None

        Swap.request_headers = request_headers  # type: ignore[attr-defined]
    elif fault == "raise":
        _wrap(Swap, "requestheaders", "/raise-request")
        _wrap(Scrub, "responseheaders", "/raise-headers")
        _wrap(Scrub, "response", "/raise-response")
    elif fault.startswith("unscrubbed:"):
        _unscrub(fault.split(":", 1)[1].split(","))
    else:
        raise SystemExit(f"unknown fault {fault!r}")
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
