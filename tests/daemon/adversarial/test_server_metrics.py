"""/metrics: one registry for every listener, and labels only from the known tool set."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from airlock.client.daemon import DaemonClient
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.net import free_port

TOKEN = "w-" + "4" * 40


async def test_one_registry_across_listeners_and_bounded_labels(
    workspace_dir: Path, tmp_path: Path
) -> None:
    (workspace_dir / "a.txt").write_text("a\n")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} write\n")
    port = free_port()
    async with running_daemon(
        workspace_dir,
        extra_args=["--token-file", str(tokens), "--listen", f"tcp://127.0.0.1:{port}"],
    ) as d:
        async with d.client(TOKEN) as unix:
            await unix.file_read(path="a.txt")
        async with DaemonClient(url=f"http://127.0.0.1:{port}", token=TOKEN) as tcp:
            await tcp.file_read(path="a.txt")
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            for i in range(200):  # distinct unknown names must not each add a series
                async with http.post(f"http://127.0.0.1:{port}/v1/tools/nope{i}", json={}) as r:
                    assert r.status == 404
            async with http.post(
                f"http://127.0.0.1:{port}/v1/tools/a%22%2Coutcome%3D%22x%0A", json={}
            ) as r:
                assert r.status == 404
        for url in (f"http://127.0.0.1:{port}/metrics", "unix"):
            if url == "unix":
                conn = aiohttp.UnixConnector(path=str(d.socket))
                session = aiohttp.ClientSession(connector=conn, headers=headers)
                url = "http://d/metrics"
            else:
                session = aiohttp.ClientSession(headers=headers)
            async with session, session.get(url) as r:
                text = await r.text()
            assert 'airlockd_tool_calls_total{tool="file_read",outcome="ok"} 2' in text
            assert 'airlockd_tool_calls_total{tool="unknown",outcome="unknown_tool"} 201' in text
            series = [line for line in text.splitlines() if not line.startswith("#")]
            assert all("nope" not in line and 'a"' not in line for line in series)
            assert len(series) < 20, series
