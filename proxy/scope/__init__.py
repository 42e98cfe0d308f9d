"""Lease scopes: what a leased credential may do, decided by pure functions.

Nothing here imports mitmproxy or touches I/O, so every rule has fast unit
tests (tests/proxy/scope/). The swap concern (``airlock.proxy.addons.swap``)
only calls :func:`.check.check_head` and, for bodies that must be seen before
anything is sent (GraphQL, a git push's command list), a gate from
:mod:`.check`.
"""
