"""One airlock-proxy process: mitmproxy and the control API in one event loop.

mitmproxy 11 is embedded as a master with only the addons the proxy needs
(:func:`airlock.proxy.mitm.lean_master`: no terminal log, no flow dumper,
none of mitmdump's other defaults). Our concerns run after those, through one :class:`~airlock.proxy.addons.chain.Chain`
addon, in this order:

    SessionAuth -> SessionLimits -> EgressPolicy -> InterceptDecision -> Swap
    -> Scrub -> TrafficAudit -> ConnectionLifecycle

The chain fails closed (see addons/chain.py). Connection-level limits (head
size and timeout, idle timeout) and the stream guard below every hook
(:mod:`airlock.proxy.guard`) are installed into mitmproxy by
:mod:`airlock.proxy.mitm`, once, by :meth:`ProxyServer.run` (and removed when
it stops); constructing an addon patches nothing. SIGHUP reopens the audit log and re-reads the
control token file; SIGTERM/SIGINT stop the proxy.

Sharing the loop means the control API and the swap see the same in-memory
store without locks, and a lease PUT is visible to the very next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import ssl
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import certifi
from aiohttp import web
from mitmproxy.master import Master
from mitmproxy.options import Options

from . import ca as ca_mod
from . import mitm
from .addons.audit_traffic import TrafficAudit
from .addons.auth import SessionAuth
from .addons.chain import Chain
from .addons.intercept import InterceptDecision
from .addons.lifecycle import ConnectionLifecycle
from .addons.limits import Budgets, SessionLimits
from .addons.policy import EgressPolicy
from .addons.scrub import Scrub, client_pairs
from .addons.swap import Swap
from .audit import AuditLog
from .config import ConfigError, ProxyConfig, read_control_token
from .context import ProxyContext
from .control import ControlAPI
from .credentials import Credentials, GitHubAppMinter
from .events import EventLog, EventTap, MemoryEvents, RedisEvents, TappedAudit
from .guard import GuardViolation, LivePairs, ResponseGuard
from .reaper import SessionReaper
from .store.base import Store

log = logging.getLogger("airlock.proxy")


def make_store(url: str, key_file: Path | None = None) -> Store:
    if url == "memory":
        from .store.memory import MemoryStore

        return MemoryStore()
    if url.startswith(("redis://", "rediss://", "unix://")):
        from .store.crypto import Sealer
        from .store.redis import RedisStore

        sealer = Sealer.from_file(key_file) if key_file is not None else None
        return RedisStore(url, sealer=sealer)
    raise ValueError(f"--store: expected 'memory' or redis://..., got {url!r}")


def make_events(url: str, key_file: Path | None = None) -> EventLog:
    """Events in this process (memory store) or in the shared Redis (see proxy/events.py)."""
    if url == "memory":
        return MemoryEvents()
    import redis.asyncio as aioredis

    from .store.crypto import Sealer

    sealer = Sealer.from_file(key_file) if key_file is not None else None
    return RedisEvents(aioredis.Redis.from_url(url, socket_connect_timeout=1.0), sealer=sealer)


def make_credentials(config: ProxyConfig, trust: Path) -> Credentials:
    """The GitHub App minter when ``--github-app-id`` is given (upstream trust applies)."""
    if config.github_app_id is None or config.github_app_key_file is None:
        return Credentials()
    context = ssl.create_default_context(cafile=str(trust))
    minter = GitHubAppMinter(
        config.github_app_id,
        config.github_app_key_file.read_bytes(),
        config.github_api_url,
        ssl_context=context,
    )
    return Credentials(minter)


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


_NO_PAIRS: dict[bytes, bytes] = {}


def _scrub_map(ctx: ProxyContext, client_id: str) -> dict[bytes, bytes]:
    """The connection's current scrub map (Swap may replace it by its session's)."""
    state = ctx.connections.get(client_id)
    return state.scrub if state is not None else _NO_PAIRS


class _OnRunning:
    """mitmproxy's ``running`` hook: the proxy servers are bound."""

    def __init__(self, callback: Callable[[], Awaitable[None]]) -> None:
        self._callback = callback

    async def running(self) -> None:
        await self._callback()


class ProxyServer:
    def __init__(self, config: ProxyConfig) -> None:
        self.config = config
        self._head_timeout: Callable[[str], None] | None = None

    def _wiring(self, ctx: ProxyContext, master: Master, budgets: Budgets) -> mitm.Wiring:
        """What :func:`airlock.proxy.mitm.install` needs: connection-level limits
        mitmproxy has no option for, the stream guard, and the scrub maps."""
        config = self.config

        def kill(client_id: str, reason: str) -> None:
            mitm.kill_client(master, client_id, reason)

        def refusal(client_id: str, status: int, reason: str) -> None:
            state = ctx.connections.get(client_id)
            ctx.metrics.refusals.labels(reason=reason).inc()
            ctx.audit.write(
                "refusal",
                reason=reason,
                status=status,
                session=state.session_id if state is not None else None,
            )

        def too_large(client_id: str) -> None:
            refusal(client_id, 431, "header_too_large")

        def head_timeout(client_id: str) -> None:
            refusal(client_id, 408, "head_timeout")
            ctx.connections.kill(client_id, "head_timeout")

        self._head_timeout = head_timeout

        def guard_violation(client_id: str, exc: GuardViolation) -> None:
            state = ctx.connections.get(client_id)
            tunnel = state.tunnel if state is not None else None
            ctx.metrics.refusals.labels(reason="guard").inc()
            ctx.audit.write(
                "guard",
                reason=exc.reason,
                detail=exc.detail,
                session=state.session_id if state is not None else None,
                host=tunnel.host if tunnel is not None else None,
            )
            log.warning("guard closed a tunnel to %s: %s", tunnel.host if tunnel else "?", exc)
            ctx.connections.kill(client_id, "guard")

        ctx.connections.set_killer(kill)
        return mitm.Wiring(
            head=mitm.HeadGuard(
                max_bytes=config.max_head_bytes,
                timeout_s=config.head_timeout_s,
                on_too_large=too_large,
                on_timeout=head_timeout,
            ),
            stream_guard=mitm.StreamGuard(
                make=lambda cid: ResponseGuard(LivePairs(lambda: _scrub_map(ctx, cid))),
                on_violation=guard_violation,
            ),
            h2_meter=budgets.h2_event,
            idle_timeout_s=config.idle_timeout_s,
            pairs_for=lambda cid: client_pairs(ctx, cid),
            swapped_forms=ctx.swapped_forms,
        )

    def _reload(self, audit: AuditLog, api: ControlAPI) -> None:
        """SIGHUP: reopen the audit log, re-read the control token. Never stops."""
        audit.reopen()
        token_file = self.config.control_token_file
        token_status = "unchanged"
        if token_file is not None:
            try:
                api.set_token(read_control_token(token_file))
                token_status = "reloaded"
            except (OSError, ConfigError) as exc:
                token_status = "kept (re-read failed)"
                log.error("SIGHUP: keeping the old control token: %s", exc)
        log.info("SIGHUP: audit log reopened, control token %s", token_status)
        audit.write("reload", audit_log="reopened", control_token=token_status)

    async def run(self) -> int:
        config = self.config
        ca, confdir, trust = await asyncio.to_thread(_prepare_state, config)
        store = make_store(config.store_url, config.store_key_file)
        audit = TappedAudit(config.audit_path, sample_per_minute=config.refusal_audit_per_minute)
        events = make_events(config.store_url, config.store_key_file)
        audit.taps.append(EventTap(events))
        await events.start()
        ctx = ProxyContext.create(
            config, store, audit, credentials=make_credentials(config, trust), events=events
        )
        opts = Options(
            listen_host=config.listen_host,
            listen_port=config.listen_port,
            confdir=str(confdir),
        )
        master = mitm.lean_master(opts)
        budgets = Budgets(ctx)
        wiring = self._wiring(ctx, master, budgets)
        opts.update(  # type: ignore[no-untyped-call]
            upstream_cert=False,
            ssl_verify_upstream_trusted_ca=str(trust),
            ssl_insecure=False,
            http2=True,
            websocket=True,
            connection_strategy="lazy",
            # Big bodies (git packs) stream instead of sitting in memory; the
            # scrubber still sees every chunk (see addons/scrub.py).
            stream_large_bodies="4m",
        )
        master.addons.add(  # type: ignore[no-untyped-call]
            Chain(
                [
                    SessionAuth(ctx),
                    SessionLimits(
                        ctx,
                        budgets,
                        lambda cid, gate, chunk: mitm.gate_client_reads(master, cid, gate, chunk),
                    ),
                    EgressPolicy(ctx),
                    InterceptDecision(ctx),
                    Swap(ctx),
                    Scrub(ctx),
                    TrafficAudit(ctx),
                    ConnectionLifecycle(
                        ctx,
                        lambda cid, up, down: mitm.count_client_bytes(master, cid, up, down),
                        self._head_timeout,
                    ),
                ],
                ctx,
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
        reaper = SessionReaper(store, ctx.connections, audit, interval_s=config.session_check_s)
        tasks = [
            asyncio.create_task(ctx.expiry.run(), name="airlock-expiry"),
            asyncio.create_task(reaper.run(), name="airlock-reaper"),
        ]
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, master.shutdown)
        loop.add_signal_handler(signal.SIGHUP, lambda: self._reload(audit, api))
        mitm.install(wiring)
        try:
            await master.run()
        finally:
            loop.remove_signal_handler(signal.SIGHUP)
            mitm.uninstall()
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for runner in runners:
                await runner.cleanup()
            if runners and config.control.kind == "unix" and config.control.path is not None:
                with contextlib.suppress(FileNotFoundError):
                    config.control.path.unlink()
            await store.close()
            await events.close()
            audit.write("proxy_stopped")
            audit.close()
        # mitmproxy exits cleanly even when it could not bind: report that.
        return 0 if runners and not failures else 1
