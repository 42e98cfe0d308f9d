"""Prometheus metrics of one proxy process (own registry: no global state).

The counters (swaps, refusals, control latency) are this process's. The two
gauges are the *store's*: live sessions and leases, read from counts the
store keeps as records come and go (never by walking it). With the memory
store that is this process; with Redis every replica reports the same
cluster-wide numbers, so aggregate them with ``max`` (not ``sum``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from . import form_scan

__all__ = ["CONTENT_TYPE_LATEST", "Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.swaps = Counter(
            "airlock_proxy_swaps_total",
            "Placeholders swapped for real credentials, by destination host.",
            ["host"],
            registry=self.registry,
        )
        self.refusals = Counter(
            "airlock_proxy_refusals_total",
            "Requests or connections refused, by reason.",
            ["reason"],
            registry=self.registry,
        )
        self.sessions = Gauge(
            "airlock_proxy_active_sessions",
            "Live sessions in the store (store-wide: the same on every replica).",
            registry=self.registry,
        )
        self.leases = Gauge(
            "airlock_proxy_active_leases",
            "Live leases in the store (store-wide: the same on every replica).",
            registry=self.registry,
        )
        # Process-wide: the compiled matcher's cache (proxy/form_scan.py) is shared.
        form_sets = Gauge(
            "airlock_proxy_token_form_sets",
            "Token form sets the matcher holds compiled (Hyperscan), and those that "
            "failed to compile and are matched in Python.",
            ["state"],
            registry=self.registry,
        )
        form_sets.labels(state="compiled").set_function(form_scan.compiled_sets)
        form_sets.labels(state="failed").set_function(form_scan.failed_sets)
        self.control_latency = Histogram(
            "airlock_proxy_control_request_seconds",
            "Control API request latency, by method and route.",
            ["method", "route", "status"],
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0),
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
