"""Connections a hostile or broken client leaves open are closed; a listener has a cap.

A real airlockd subprocess with small limits; raw Unix-socket clients.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from tests.daemon.adversarial.raw_http import closed_by_peer, read_response, send_raw
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.procs import processes_with
from tests.fakes.wait import wait_until

HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: d\r\n\r\n"


async def test_half_open_and_silent_connections_are_closed(workspace_dir: Path) -> None:
    # A keep-alive far longer than the test: only the header timeout can close these.
    async with running_daemon(
        workspace_dir, extra_args=["--header-timeout", "1", "--keepalive-timeout", "600"]
    ) as d:
        # A head that never finishes.
        r1, w1 = await asyncio.open_unix_connection(str(d.socket))
        w1.write(b"GET /v1/health HTTP/1.1\r\nHost: d\r\nX-Slow: ")
        # A connection that never sends a byte.
        r2, w2 = await asyncio.open_unix_connection(str(d.socket))
        # One request answered, then half of the next head.
        r3, w3 = await asyncio.open_unix_connection(str(d.socket))
        w3.write(HEALTH)
        assert (await read_response(r3)).status == 200
        w3.write(b"GET /v1/health HTTP/1.1\r\nHo")
        for writer in (w1, w3):
            await writer.drain()
        for reader in (r1, r2, r3):
            assert await closed_by_peer(reader, deadline_s=30.0)
        for writer in (w1, w2, w3):
            writer.close()
        # Slow clients are counted, and the daemon still serves.
        resp = await send_raw(
            d.socket, b"GET /metrics HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n"
        )
        assert 'airlockd_header_timeouts_total{listener="unix"} 3' in resp.body.decode()
        resp = await send_raw(
            d.socket, HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n")
        )
        assert resp.status == 200


async def test_idle_keep_alive_connections_are_closed(workspace_dir: Path) -> None:
    async with running_daemon(
        workspace_dir, extra_args=["--header-timeout", "600", "--keepalive-timeout", "1"]
    ) as d:
        reader, writer = await asyncio.open_unix_connection(str(d.socket))
        writer.write(HEALTH)
        await writer.drain()
        assert (await read_response(reader)).status == 200
        assert await closed_by_peer(reader, deadline_s=30.0)
        writer.close()


async def test_a_head_sent_in_time_is_not_cut(workspace_dir: Path) -> None:
    """The header timer covers the head only: a complete head then a slow handler is fine."""
    async with (
        running_daemon(workspace_dir, extra_args=["--header-timeout", "1"]) as d,
        d.client() as c,
    ):
        result = await c.exec(argv=["sleep", "2.5"])
        assert result.exit_code == 0


async def test_connection_cap_answers_503_with_an_envelope(workspace_dir: Path) -> None:
    async with running_daemon(
        workspace_dir, extra_args=["--max-connections", "2", "--header-timeout", "120"]
    ) as d:
        held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
        try:
            # Two connections the daemon served and keeps open (the harness's start-up probe
            # may still be counted for a moment: a 503 then just means "try again").
            async def hold_one() -> bool:
                reader, writer = await asyncio.open_unix_connection(str(d.socket))
                writer.write(HEALTH)
                await writer.drain()
                if (await read_response(reader)).status == 200:
                    held.append((reader, writer))
                else:
                    writer.close()
                return len(held) >= 2

            await wait_until(hold_one, message="the daemon never served two held connections")
            resp = await send_raw(d.socket, HEALTH)
            err = resp.envelope()
            assert resp.status == 503 and err["code"] == "unavailable"
            assert "at most 2 connections" in err["message"]
            assert resp.headers.get("connection", "").lower() == "close"
        finally:
            for _reader, writer in held:
                writer.close()

        # Once the held connections are gone, new ones are served again.
        async def served() -> bool:
            return (await send_raw(d.socket, HEALTH)).status == 200

        await wait_until(served, message="new connections were never served again")
        metrics = await send_raw(d.socket, b"GET /metrics HTTP/1.1\r\nHost: d\r\n\r\n")
        assert 'airlockd_connections_rejected_total{listener="unix"}' in metrics.body.decode()


async def test_a_trickled_body_is_refused_after_the_body_timeout(workspace_dir: Path) -> None:
    async with running_daemon(workspace_dir, extra_args=["--body-timeout", "1"]) as d:
        reader, writer = await asyncio.open_unix_connection(str(d.socket))
        writer.write(
            b"POST /v1/tools/file_read HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"pa'
        )
        await writer.drain()
        resp = await read_response(reader)
        err = resp.envelope()
        assert resp.status == 400 and err["code"] == "invalid_request"
        assert "did not arrive within 1 s" in err["message"]
        writer.close()


async def test_sigterm_exits_within_drain_time_with_hung_clients(workspace_dir: Path) -> None:
    marker = "987.654321"
    async with running_daemon(
        workspace_dir, extra_args=["--drain-timeout", "2", "--header-timeout", "600"]
    ) as d:
        hung = []
        # Half a head, a silent connection, half a body.
        r, w = await asyncio.open_unix_connection(str(d.socket))
        w.write(b"GET /v1/health HTTP/1.1\r\nHost: d\r\n")
        hung.append((r, w))
        hung.append(await asyncio.open_unix_connection(str(d.socket)))
        r, w = await asyncio.open_unix_connection(str(d.socket))
        w.write(
            b"POST /v1/tools/file_read HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"pa'
        )
        hung.append((r, w))
        # A request whose handler never finishes on its own, and a client that never reads.
        r, w = await asyncio.open_unix_connection(str(d.socket))
        body = b'{"argv": ["sleep", "' + marker.encode() + b'"], "timeout_s": 3600}'
        w.write(
            b"POST /v1/tools/exec HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        hung.append((r, w))
        for _r, w in hung:
            await w.drain()
        await wait_until(lambda: processes_with(marker), message="the exec never started")
        d.process.send_signal(signal.SIGTERM)
        # Generous: the drain is 2 s; this only proves the daemon does not wait forever.
        await asyncio.wait_for(d.process.wait(), timeout=30)
        assert d.process.returncode == 0
        assert not d.socket.exists()
        await wait_until(lambda: not processes_with(marker), message="the exec outlived airlockd")
        for _r, w in hung:
            w.close()
