"""Constructing the addons patches nothing: only the runner installs airlock.proxy.mitm."""

from __future__ import annotations

from mitmproxy.proxy.layers.http import _http1

from airlock.proxy.addons.audit_traffic import TrafficAudit
from airlock.proxy.addons.auth import SessionAuth
from airlock.proxy.addons.chain import Chain
from airlock.proxy.addons.intercept import InterceptDecision
from airlock.proxy.addons.lifecycle import ConnectionLifecycle
from airlock.proxy.addons.limits import Budgets, SessionLimits
from airlock.proxy.addons.policy import EgressPolicy
from airlock.proxy.addons.scrub import Scrub
from airlock.proxy.addons.swap import Swap
from airlock.proxy.context import ProxyContext
from airlock.proxy.mitm import patching


def test_building_the_chain_installs_no_patch(ctx: ProxyContext) -> None:
    pipe_rule = _http1.should_make_pipe
    Chain(
        [
            SessionAuth(ctx),
            SessionLimits(ctx, Budgets(ctx), lambda cid, gate, chunk: True),
            EgressPolicy(ctx),
            InterceptDecision(ctx),
            Swap(ctx),
            Scrub(ctx),
            TrafficAudit(ctx),
            ConnectionLifecycle(ctx, lambda cid, up, down: True, None),
        ],
        ctx,
    )
    assert patching.replaced() == []
    assert _http1.should_make_pipe is pipe_rule
