"""The mitmproxy master airlock runs: only the addons the proxy needs.

mitmproxy's ``DumpMaster`` loads mitmdump's 34 default addons, and mitmproxy
walks every addon for every event (a dozen or more per request: each
lifecycle hook, then an ``update`` hook after it). Almost all of them are
inert here (playback, map-local, cookies, HAR export, the command history,
script loading), some are surface a credential broker should not carry
(the ``mitm.it`` onboarding app, ``scripts``, ``save_stream_file``), and
walking them cost measurably on every swapped request (``bench_proxy``).

Kept, each because the proxy does not work without it:

- ``Core``: option validation and the command manager;
- ``Proxyserver``: the listener and the connection handlers;
- ``NextLayer``: which layer (TLS, HTTP, TCP) a connection gets;
- ``TlsConfig``: certificates for intercepted hosts, upstream verification;
- ``DisableH2C``: drops an ``h2c`` upgrade from a plain-HTTP request, which
  mitmproxy cannot relay.

Not kept, notably ``Block`` (its ``block_global`` would refuse every sandbox
not on loopback; airlock's own policy decides who may connect) and
``ErrorCheck`` (only mitmdump's own ``main`` reads it; the runner checks the
listener itself).
"""

from __future__ import annotations

from mitmproxy.addons import core, disable_h2c, next_layer, proxyserver, tlsconfig
from mitmproxy.master import Master
from mitmproxy.options import Options

# Names of the mitmproxy addons loaded, in order (a test pins the list).
ADDONS = ("core", "proxyserver", "nextlayer", "tlsconfig", "disableh2c")


def lean_master(opts: Options) -> Master:
    """A mitmproxy master with only the addons in :data:`ADDONS`; airlock adds its own after."""
    master = Master(opts, with_termlog=False)
    master.addons.add(  # type: ignore[no-untyped-call]
        core.Core(),
        proxyserver.Proxyserver(),  # type: ignore[no-untyped-call]
        next_layer.NextLayer(),
        tlsconfig.TlsConfig(),
        disable_h2c.DisableH2C(),
    )
    return master
