"""One airlock-proxy process: mitmproxy and the control API in one event loop.

mitmproxy 11 is embedded as a ``DumpMaster`` with ``with_termlog=False`` and
``with_dumper=False``: nothing prints flows or headers. Our concerns run after
mitmproxy's defaults, through one :class:`~airlock.proxy.addons.chain.Chain`
addon, in this order:

    SessionAuth -> EgressPolicy -> InterceptDecision -> Swap -> Scrub

Sharing the loop means the control API and the swap see the same in-memory
store without locks, and a lease PUT is visible to the very next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import certifi
from aiohttp import web
from mitmproxy.options import Options
from mitmproxy.tools.dump import DumpMaster

from airlock.proxy import ca as ca_mod
from airlock.proxy.addons.auth import SessionAuth
from airlock.proxy.addons.chain import Chain
from airlock.proxy.addons.intercept import InterceptDecision
from airlock.proxy.addons.policy import EgressPolicy
from airlock.proxy.addons.scrub import Scrub
from airlock.proxy.addons.swap import Swap
from airlock.proxy.audit import AuditLog
from airlock.proxy.config import ProxyConfig
from airlock.proxy.context import ProxyContext
from airlock.proxy.control import ControlAPI
from airlock.proxy.egress import Egress
from airlock.proxy.expiry import ExpiryWatcher
from airlock.proxy.metrics import Metrics
from airlock.proxy.state import Connections
from airlock.proxy.store.base import Store

log = logging.getLogger("airlock.proxy")


def make_store(url: str) -> Store:
    if url == "memory":
        from airlock.proxy.store.memory import MemoryStore

        return MemoryStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from airlock.proxy.store.redis import RedisStore

        return RedisStore(url)
    raise ValueError(f"--store: expected 'memory' or redis://..., got {url!r}")


def _trust_bundle(state_dir: Path, upstream_ca: Path | None) -> Path:
    """certifi's roots plus ``--upstream-ca``: the CA adds trust, never replaces."""
    bundle = Path(certifi.where()).read_bytes()
    if upstream_ca is not None:
        bundle += b"\n" + upstream_ca.read_bytes()
    target = state_dir / "upstream-trust.pem"
    target.write_bytes(bundle)
    return target


def _prepare_state(config: ProxyConfig) -> tuple[ca_mod.ProxyCA, Path, Path]:
    config.state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(config.state_dir, 0o700)
    ca = ca_mod.load_or_create(config.state_dir, config.intercept)
    confdir = config.state_dir / "mitmproxy"
    ca.install(confdir)
    trust = _trust_bundle(config.state_dir, config.upstream_ca)
    return ca, confdir, trust


async def _start_control(api: ControlAPI, config: ProxyConfig) -> web.AppRunner:
    runner = web.AppRunner(api.app(), access_log=None, handle_signals=False)
    await runner.setup()
    ep = config.control
    site: web.BaseSite
    if ep.kind == "unix":
        assert ep.path is not None
        ep.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(ep.path.lstat().st_mode):
                ep.path.unlink()
        site = web.UnixSite(runner, str(ep.path))
        await site.start()
        os.chmod(ep.path, 0o600)
    else:
        site = web.TCPSite(runner, ep.host, ep.port)
        await site.start()
    return runner


class _OnRunning:
    """mitmproxy's ``running`` hook: the proxy servers are bound."""

    def __init__(self, callback: Callable[[], Awaitable[None]]) -> None:
        self._callback = callback

    async def running(self) -> None:
        await self._callback()


class ProxyServer:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config

    async def run(self) -> int:
        config = self.config
        ca, confdir, trust = await asyncio.to_thread(_prepare_state, config)
        store = make_store(config.store_url)
        audit = AuditLog(config.audit_path)
        ctx = ProxyContext(
            config=config,
            store=store,
            audit=audit,
            metrics=Metrics(),
            connections=Connections(),
            egress=Egress(config),
            expiry=ExpiryWatcher(store, audit),
        )
        opts = Options(
            listen_host=config.listen_host,
            listen_port=config.listen_port,
            confdir=str(confdir),
        )
        master = DumpMaster(opts, with_termlog=False, with_dumper=False)
        opts.update(  # type: ignore[no-untyped-call]
            upstream_cert=False,
            ssl_verify_upstream_trusted_ca=str(trust),
            ssl_insecure=False,
            http2=True,
            websocket=True,
            connection_strategy="lazy",
            block_global=False,
            # Big bodies (git packs) stream instead of sitting in memory; the
            # scrubber still sees every chunk (see addons/scrub.py).
            stream_large_bodies="4m",
        )
        master.addons.add(  # type: ignore[no-untyped-call]
            Chain(
                [
                    SessionAuth(ctx),
                    EgressPolicy(ctx),
                    InterceptDecision(ctx),
                    Swap(ctx),
                    Scrub(ctx),
                ]
            )
        )
        api = ControlAPI(ctx, ca.cert_pem)
        runners: list[web.AppRunner] = []
        failures: list[str] = []

        async def start_control() -> None:
            """Called by mitmproxy once the proxy port is bound: health means ready."""
            try:
                runners.append(await _start_control(api, config))
            except OSError as exc:
                failures.append(f"control API: {exc}")
                log.error("control API failed to start on %s: %s", config.control.describe(), exc)
                master.shutdown()  # type: ignore[no-untyped-call]
                return
            log.info(
                "airlock-proxy listening on %s:%d, control %s, store %s",
                config.listen_host,
                config.listen_port,
                config.control.describe(),
                store.kind,
            )
            audit.write("proxy_started", listen=f"{config.listen_host}:{config.listen_port}")

        master.addons.add(_OnRunning(start_control))  # type: ignore[no-untyped-call]
        expiry_task = asyncio.create_task(ctx.expiry.run(), name="airlock-expiry")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, master.shutdown)
        try:
            await master.run()
        finally:
            expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await expiry_task
            for runner in runners:
                await runner.cleanup()
            if runners and config.control.kind == "unix" and config.control.path is not None:
                with contextlib.suppress(FileNotFoundError):
                    config.control.path.unlink()
            await store.close()
            audit.write("proxy_stopped")
            audit.close()
        # mitmproxy exits cleanly even when it could not bind: report that.
        return 0 if runners and not failures else 1
