"""Prometheus text for ``GET /metrics``, without a client library in the sandbox image.

Every label value comes from a closed set the daemon defines (tool names from
the catalog, error codes, listener names), never from the request: a tool
name that is not in the catalog is counted as ``unknown``, so a caller can
neither inject label syntax nor grow the series without bound. One instance
is shared by every listener, so the numbers are the daemon's, not a socket's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

UNKNOWN = "unknown"


class DaemonMetrics:
    def __init__(self, tools: Iterable[str], outcomes: Iterable[str]) -> None:
        self.tools = frozenset(tools)
        self.outcomes = frozenset(outcomes) | {"ok"}
        self.calls: dict[tuple[str, str], int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.in_flight = 0
        self.connections_rejected: dict[str, int] = defaultdict(int)
        self.header_timeouts: dict[str, int] = defaultdict(int)
        self.connections_evicted: dict[str, int] = defaultdict(int)

    def tool_label(self, name: str) -> str:
        return name if name in self.tools else UNKNOWN

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
        tool = self.tool_label(tool)
        outcome = outcome if outcome in self.outcomes else UNKNOWN
        self.calls[(tool, outcome)] += 1
        self.seconds[tool] += seconds

    def render(self) -> str:
        lines = _family(
            "airlockd_tool_calls_total",
            "counter",
            "Tool calls by tool and outcome (ok or error code).",
            [(f'tool="{t}",outcome="{o}"', str(n)) for (t, o), n in sorted(self.calls.items())],
        )
        lines += _family(
            "airlockd_tool_seconds_total",
            "counter",
            "Time spent in tool calls.",
            [(f'tool="{t}"', f"{secs:.6f}") for t, secs in sorted(self.seconds.items())],
        )
        lines += _family(
            "airlockd_requests_in_flight",
            "gauge",
            "Requests being served.",
            [("", str(self.in_flight))],
        )
        per_listener = (
            (
                "airlockd_connections_rejected_total",
                "Connections answered 503 at the cap.",
                self.connections_rejected,
            ),
            (
                "airlockd_header_timeouts_total",
                "Connections closed for a slow request head.",
                self.header_timeouts,
            ),
            (
                "airlockd_connections_evicted_total",
                "Idle connections without a valid token closed to make room.",
                self.connections_evicted,
            ),
        )
        for name, help_text, counts in per_listener:
            samples = [(f'listener="{ln}"', str(n)) for ln, n in sorted(counts.items())]
            lines += _family(name, "counter", help_text, samples)
        return "\n".join(lines) + "\n"


def _family(name: str, kind: str, help_text: str, samples: Iterable[tuple[str, str]]) -> list[str]:
    """One metric family in the text format: HELP, TYPE, then ``name{labels} value`` lines
    (no braces when a sample has no labels)."""
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        lines.append(f"{name}{{{labels}}} {value}" if labels else f"{name} {value}")
    return lines
