"""Prometheus text for ``GET /metrics``, without a client library in the sandbox image."""

from __future__ import annotations

from collections import defaultdict


class DaemonMetrics:
    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)
        self.in_flight = 0

    def observe(self, tool: str, outcome: str, seconds: float) -> None:
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
        ]
        return "\n".join(lines) + "\n"
