"""``PUT``/``GET /v1/files`` over a real airlockd: size, memory, CAS, ranges, modes and refusals.

The daemon runs as root with ``--exec-user nobody`` (as in production) when the
suite runs as root; uploaded files must then belong to nobody, as files the
tools create do.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Mapping
from pathlib import Path

import aiohttp
import pytest

from airlock.client.daemon import (
    DaemonClient,
    Forbidden,
    InvalidRequest,
    IsDirectory,
    NotFound,
    PathEscape,
    StaleWrite,
)
from tests.fakes.agent_daemon import READ_TOKEN, WRITE_TOKEN, AgentDaemon

pytestmark = pytest.mark.asyncio(loop_scope="module")
MIB = 1024 * 1024


@pytest.fixture
def client(agent_client: DaemonClient) -> DaemonClient:
    return agent_client


async def http(
    agent: AgentDaemon, method: str, path: str, token: str = WRITE_TOKEN, **kw: object
) -> tuple[int, Mapping[str, str], bytes]:
    headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}  # type: ignore[dict-item]
    conn = aiohttp.UnixConnector(path=str(agent.daemon.socket))
    async with (
        aiohttp.ClientSession(connector=conn) as session,
        session.request(
            method,
            "http://d/v1/files",
            params={"path": path, **kw.pop("params", {})},  # type: ignore[dict-item]
            headers=headers,
            **kw,  # type: ignore[arg-type]
        ) as resp,
    ):
        return resp.status, resp.headers.copy(), await resp.read()


def vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def owner_ok(agent: AgentDaemon, st: os.stat_result) -> bool:
    return agent.exec_uid is None or (st.st_uid, st.st_gid) == (agent.exec_uid, agent.exec_gid)


async def test_a_200_mib_round_trip_keeps_daemon_memory_flat(
    agent: AgentDaemon, client: DaemonClient, tmp_path: Path
) -> None:
    src = tmp_path / "big.bin"
    block = os.urandom(MIB)
    digest = hashlib.sha256()
    with src.open("wb") as out:
        for i in range(200):
            piece = block[i:] + block[:i]  # every MiB differs
            out.write(piece)
            digest.update(piece)
    await client.upload(tmp_path / "big.bin", "warm/up.bin")  # the loop and threads warmed up
    pid = agent.daemon.process.pid
    before = vm_kib(pid, "VmRSS")

    up = await client.upload(src, "data/big.bin")
    assert (up.path, up.bytes, up.sha256) == ("data/big.bin", 200 * MIB, digest.hexdigest())
    landed = agent.workspace / "data" / "big.bin"
    assert owner_ok(agent, landed.stat()) and owner_ok(agent, landed.parent.stat())
    assert not [p for p in landed.parent.iterdir() if p.name != "big.bin"], "no temp file left"

    down = await client.download("data/big.bin", tmp_path / "back.bin")
    assert down.sha256 == digest.hexdigest() and down.bytes == 200 * MIB
    peak = vm_kib(pid, "VmHWM")
    assert (peak - before) * 1024 < 64 * MIB, f"daemon RSS grew by {(peak - before) // 1024} MiB"


async def test_compare_and_swap_etag_and_ranges(agent: AgentDaemon, client: DaemonClient) -> None:
    body = bytes(range(256)) * 4
    sha = hashlib.sha256(body).hexdigest()
    status, _, data = await http(agent, "PUT", "cas.bin", data=body)
    assert status == 200
    status, headers, data = await http(agent, "GET", "cas.bin")
    assert status == 200 and data == body
    assert headers["ETag"] == f'"{sha}"' and headers["Content-Length"] == str(len(body))

    status, headers, data = await http(agent, "GET", "cas.bin", headers={"Range": "bytes=10-19"})
    assert status == 206 and data == body[10:20]
    assert headers["Content-Range"] == f"bytes 10-19/{len(body)}"
    status, _, data = await http(agent, "GET", "cas.bin", headers={"Range": "bytes=-5"})
    assert status == 206 and data == body[-5:]
    status, _, data = await http(agent, "GET", "cas.bin", headers={"Range": "bytes=2000-"})
    assert status == 416
    status, _, data = await http(agent, "GET", "cas.bin", headers={"Range": "bytes=1-2,4-5"})
    assert status == 400 and b"invalid_request" in data

    stale = "0" * 64
    status, _, data = await http(
        agent, "PUT", "cas.bin", data=b"new", headers={"If-Match": f'"{stale}"'}
    )
    assert status == 412 and b"stale_write" in data
    assert (agent.workspace / "cas.bin").read_bytes() == body
    with pytest.raises(StaleWrite):
        await client.upload(__file__, "cas.bin", if_match=stale)
    status, _, data = await http(
        agent, "PUT", "cas.bin", data=b"new", headers={"If-Match": f'"{sha}"'}
    )
    assert status == 200 and (agent.workspace / "cas.bin").read_bytes() == b"new"
    status, _, data = await http(agent, "PUT", "cas.bin", data=b"x", headers={"If-Match": "nope"})
    assert status == 400


async def test_modes_and_editing_rules(agent: AgentDaemon) -> None:
    ws = agent.workspace
    status, _, _ = await http(
        agent, "PUT", "m/run.sh", data=b"#!/bin/sh\n", headers={"X-Airlock-Mode": "0750"}
    )
    assert status == 200 and stat.S_IMODE((ws / "m" / "run.sh").stat().st_mode) == 0o750
    status, _, _ = await http(
        agent, "PUT", "m/run.sh", data=b"again", headers={"X-Airlock-Mode": "0600"}
    )
    assert status == 200 and stat.S_IMODE((ws / "m" / "run.sh").stat().st_mode) == 0o750
    for bad in ("4755", "2755", "rwx", "0o1777", "99"):
        status, _, data = await http(
            agent, "PUT", "m/x", data=b"x", headers={"X-Airlock-Mode": bad}
        )
        assert status == 400 and b"X-Airlock-Mode" in data, bad
    assert not (ws / "m" / "x").exists()

    status, _, data = await http(agent, "PUT", "package-lock.json", data=b"{}")
    assert status == 403 and b"generated_file" in data
    (ws / "frozen.txt").write_text("keep")
    (ws / "frozen.txt").chmod(0o444)
    status, _, data = await http(agent, "PUT", "frozen.txt", data=b"changed")
    assert status == 403 and b"read_only" in data
    assert (ws / "frozen.txt").read_text() == "keep"


async def test_path_escapes_and_special_files(
    agent: AgentDaemon, client: DaemonClient, tmp_path: Path
) -> None:
    ws = agent.workspace
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "way-out").symlink_to(outside)
    (ws / "sub").mkdir(exist_ok=True)
    if agent.exec_uid is not None:  # the tools act as the exec user: its own directory
        os.chown(ws / "sub", agent.exec_uid, -1)
    for path, params in (
        ("../escaped", {}),
        ("way-out/escaped", {}),
        ("/etc/escaped", {}),
        ("../escaped", {"root": "sub"}),
    ):
        status, _, data = await http(agent, "PUT", path, data=b"x", params=params)
        assert status == 403 and b"path_escape" in data, (path, params, data)
        status, _, data = await http(agent, "GET", path, params=params)
        assert status in (403, 404), (path, data)
    assert list(outside.iterdir()) == []
    with pytest.raises(PathEscape):
        await client.download("../../etc/passwd", tmp_path / "pw")

    status, _, _ = await http(agent, "PUT", "in-root.txt", data=b"r", params={"root": "sub"})
    assert status == 200 and (ws / "sub" / "in-root.txt").read_bytes() == b"r"

    if agent.exec_uid is not None:  # a directory only root may write: the agent's own refusal
        (ws / "root-only").mkdir(mode=0o755, exist_ok=True)
        status, _, data = await http(agent, "PUT", "root-only/x.txt", data=b"x")
        assert status == 403 and b"forbidden" in data, data
        assert not (ws / "root-only" / "x.txt").exists()

    os.mkfifo(ws / "fifo")
    with pytest.raises(InvalidRequest):
        await client.download("fifo", tmp_path / "f")
    status, _, data = await http(agent, "PUT", "fifo", data=b"x")
    assert status == 400 and stat.S_ISFIFO((ws / "fifo").lstat().st_mode)
    if os.geteuid() == 0:  # only root makes device nodes
        os.mknod(ws / "null-dev", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        with pytest.raises(InvalidRequest, match="device"):
            await client.download("null-dev", tmp_path / "n")
    with pytest.raises(IsDirectory):
        await client.download("sub", tmp_path / "d")
    with pytest.raises(NotFound):
        await client.download("missing.bin", tmp_path / "m")
    assert not (tmp_path / "m").exists()

    status, _, data = await http(agent, "PUT", "r.txt", token=READ_TOKEN, data=b"x")
    assert status == 403 and b"forbidden" in data and not (ws / "r.txt").exists()
    async with agent.reader() as reader:
        await reader.download("sub/in-root.txt", tmp_path / "ok.txt")
        with pytest.raises(Forbidden):
            await reader.upload(tmp_path / "ok.txt", "r.txt")
    assert (tmp_path / "ok.txt").read_bytes() == b"r"


async def test_a_one_gib_sparse_file_streams_out(agent: AgentDaemon) -> None:
    size = 1024 * MIB
    with (agent.workspace / "sparse.img").open("wb") as out:
        out.truncate(size)
    conn = aiohttp.UnixConnector(path=str(agent.daemon.socket))
    digest, got = hashlib.sha256(), 0
    async with (
        aiohttp.ClientSession(connector=conn) as session,
        session.get(
            "http://d/v1/files",
            params={"path": "sparse.img"},
            headers={"Authorization": f"Bearer {READ_TOKEN}"},
        ) as resp,
    ):
        assert resp.status == 200 and resp.headers["Content-Length"] == str(size)
        async for chunk in resp.content.iter_chunked(4 * MIB):
            digest.update(chunk)
            got += len(chunk)
        etag = resp.headers["ETag"].strip('"')
    assert got == size and digest.hexdigest() == etag


async def test_the_routes_are_in_openapi_and_metrics(
    agent: AgentDaemon, client: DaemonClient
) -> None:
    spec = await client.openapi()
    assert {"/v1/files", "/v1/archive", "/v1/watch"} <= set(spec["paths"])
    assert set(spec["paths"]["/v1/files"]) == {"get", "put"}
    assert "412" in spec["paths"]["/v1/files"]["put"]["responses"]
    status, _, _ = await http(agent, "PUT", "metered.txt", data=b"m")
    assert status == 200
    status, _, _ = await http(agent, "GET", "../metered.txt")
    assert status == 403
    text = await client.metrics()
    assert 'airlockd_tool_calls_total{tool="files_put",outcome="ok"}' in text
    assert 'airlockd_tool_calls_total{tool="files_get",outcome="path_escape"}' in text
    status, _, data = await http(agent, "GET", "metered.txt", token="not-a-token")
    assert status == 401 and b"unauthorized" in data
