"""The proxy's mitmproxy master carries only the addons it needs (proxy/mitm/master.py)."""

from __future__ import annotations

from mitmproxy.options import Options

from airlock.proxy.mitm.master import ADDONS, lean_master


async def test_only_the_needed_addons_are_loaded_in_order() -> None:
    master = lean_master(Options())
    assert tuple(master.addons.lookup) == ADDONS
    assert len(master.addons.chain) == len(ADDONS)


async def test_mitmdumps_surface_is_absent() -> None:
    """No onboarding app, no script loader, no flow saving, no playback: their options
    do not even exist, so no configuration can switch them on."""
    master = lean_master(Options())
    for name in ("onboarding", "scripts", "save_stream_file", "server_replay", "map_local"):
        assert name not in master.options, name
    for addon in ("onboarding", "scriptloader", "save", "block", "errorcheck"):
        assert addon not in master.addons.lookup, addon


async def test_the_options_the_runner_sets_exist() -> None:
    """``ProxyServer.run`` sets these; an addon dropped by mistake would make it fail."""
    master = lean_master(Options())
    master.options.update(  # type: ignore[no-untyped-call]
        upstream_cert=False,
        ssl_insecure=False,
        http2=True,
        websocket=True,
        connection_strategy="lazy",
        stream_large_bodies="4m",
    )
    assert master.options.connection_strategy == "lazy"
