"""What every addon and the control API share for one proxy process."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mitmproxy import http

from .audit import AuditLog
from .config import ProxyConfig
from .credentials import Credentials
from .egress import Egress
from .events import EventLog, MemoryEvents
from .expiry import ExpiryWatcher
from .metrics import Metrics
from .mitm.logscrub import SwappedForms
from .protocol import error_json
from .state import ClientState, Connections
from .store.base import Clock, Store, now

REFUSED = "airlock_refused"


@dataclass
class ProxyContext:
    config: ProxyConfig
    store: Store
    audit: AuditLog
    metrics: Metrics
    connections: Connections
    egress: Egress
    expiry: ExpiryWatcher
    credentials: Credentials = field(default_factory=Credentials)
    events: EventLog = field(default_factory=MemoryEvents)
    # Forms of recently swapped tokens: Swap feeds it, the log filter scrubs with it.
    swapped_forms: SwappedForms = field(default_factory=SwappedForms)
    # What "now" is for TTLs (the store's clock unless a test hands another).
    clock: Clock = field(default=now)

    @classmethod
    def create(
        cls,
        config: ProxyConfig,
        store: Store,
        audit: AuditLog,
        *,
        connections: Connections | None = None,
        credentials: Credentials | None = None,
        events: EventLog | None = None,
        clock: Clock | None = None,
    ) -> ProxyContext:
        """The one way to assemble a context: what derives from config, store and audit
        (metrics, egress policy, expiry watcher) is built here, for the app and tests alike.

        ``clock`` (default: the store's) judges TTLs: lease and session expiry
        times and when the expiry watcher audits them."""
        clock = clock if clock is not None else store.clock
        return cls(
            config=config,
            store=store,
            audit=audit,
            metrics=Metrics(),
            connections=connections if connections is not None else Connections(),
            egress=Egress(config),
            expiry=ExpiryWatcher(store, audit, clock=clock),
            credentials=credentials if credentials is not None else Credentials(),
            events=events if events is not None else MemoryEvents(),
            clock=clock,
        )

    def unanswered_state(self, flow: http.HTTPFlow) -> ClientState | None:
        """The state of ``flow``'s client connection; None when an earlier addon
        already answered the flow (nothing is left to do for it) or the
        connection is not known."""
        if refused(flow):
            return None
        return self.connections.get(flow.client_conn.id)

    def refuse(
        self,
        flow: http.HTTPFlow,
        status: int,
        reason: str,
        message: str,
        **fields: Any,
    ) -> None:
        """Answer the flow ourselves, count it and audit it. Never forwards."""
        headers = {"content-type": "application/json", "x-airlock-refusal": reason}
        if status == 407:
            headers["proxy-authenticate"] = 'Basic realm="airlock-proxy"'
        body = error_json(reason, message)
        flow.response = http.Response.make(status, body, headers)
        flow.metadata[REFUSED] = reason
        self.metrics.refusals.labels(reason=reason).inc()
        self.audit.write("refusal", reason=reason, status=status, **fields)


def refused(flow: http.HTTPFlow) -> bool:
    """True when an earlier addon already answered this flow."""
    return flow.response is not None or REFUSED in flow.metadata
