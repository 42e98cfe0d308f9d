"""airlock-proxy with a concern broken on purpose (a test double of a bug).

``python faulty_proxy.py FAULT <airlock-proxy args...>``:

- ``raise``: Swap raises *after* it rewrote the credential header when the path
  contains ``/raise-request``; Scrub raises in ``responseheaders`` for
  ``/raise-headers`` and in ``response`` for ``/raise-response``. Every
  exception message quotes the request's Authorization header (the real token
  after the swap), so a proxy that logged or returned it would leak.
- ``typo``: Swap grows a misspelt hook ``request_headers``.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from airlock.proxy import cli
from airlock.proxy.addons.scrub import Scrub
from airlock.proxy.addons.swap import Swap


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
    else:
        raise SystemExit(f"unknown fault {fault!r}")
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
