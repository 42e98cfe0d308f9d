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
        lines = [
            "# HELP airlockd_tool_calls_total Tool calls by tool and outcome (ok or error code).",
            "# TYPE airlockd_tool_calls_total counter",
        ]
        for (tool, outcome), count in sorted(self.calls.items()):
            lines.append(f'airlockd_tool_calls_total{{tool="{tool}",outcome="{outcome}"}} {count}')
        lines += [
            "# HELP airlockd_tool_seconds_total Time spent in tool calls.",
            "# TYPE airlockd_tool_seconds_total counter",
        ]
        for tool, secs in sorted(self.seconds.items()):
            lines.append(f'airlockd_tool_seconds_total{{tool="{tool}"}} {secs:.6f}')
        lines += [
            "# HELP airlockd_requests_in_flight Requests being served.",
            "# TYPE airlockd_requests_in_flight gauge",
            f"airlockd_requests_in_flight {self.in_flight}",
            "# HELP airlockd_connections_rejected_total Connections answered 503 at the cap.",
            "# TYPE airlockd_connections_rejected_total counter",
        ]
        for listener, count in sorted(self.connections_rejected.items()):
            lines.append(f'airlockd_connections_rejected_total{{listener="{listener}"}} {count}')
        lines += [
            "# HELP airlockd_header_timeouts_total Connections closed for a slow request head.",
            "# TYPE airlockd_header_timeouts_total counter",
        ]
        for listener, count in sorted(self.header_timeouts.items()):
            lines.append(f'airlockd_header_timeouts_total{{listener="{listener}"}} {count}')
        lines += [
            "# HELP airlockd_connections_evicted_total Idle connections without a valid token "
            "closed to make room.",
            "# TYPE airlockd_connections_evicted_total counter",
        ]
        for listener, count in sorted(self.connections_evicted.items()):
            lines.append(f'airlockd_connections_evicted_total{{listener="{listener}"}} {count}')
        return "\n".join(lines) + "\n"
