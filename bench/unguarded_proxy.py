"""airlock-proxy without the connection-level guard: the "before" of the guard's bench.

``python bench/unguarded_proxy.py <airlock-proxy args...>`` runs the real
proxy with :func:`airlock.proxy.mitm.guard_layer.install` made a no-op, so
``bench_proxy`` can compare guard on and off in one run. Never a product
option: the guard has no switch.
"""

from __future__ import annotations

import sys

from airlock.proxy import cli, mitm


def main() -> int:
    mitm.guard_layer.install = lambda guard: None  # type: ignore[assignment]
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
