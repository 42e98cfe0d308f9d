"""Idle and unauthenticated clients can never keep a valid token from being served.

A real airlockd as root with ``--exec-user`` and a token file. The agent (a
real process as the exec user, started through ``exec``) opens 300 Unix
socket connections without a token: a third send nothing, a third ask for
``/v1/health`` and keep the connection alive, a third send a tool call with a
wrong token. Before the fix 256 of them filled the listener and the
orchestrator got 503. Now unauthenticated connections have their own cap
(64 by default): the one idle the longest makes room, and a request with a
valid token is served even on a connection that arrived over the cap, so
every call of the orchestrator (write token, new connections) is answered. A listener
without tokens keeps its plain cap and 503 (tests/daemon/adversarial/
test_connections_limits.py).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from airlock.client.daemon import DaemonClient
from tests.daemon.adversarial.agent_rig import WRITE, agent_daemon
from tests.daemon.adversarial.as_exec_user import needs_root
from tests.daemon.adversarial.raw_http import send_raw
from tests.fakes.wait import wait_until

pytestmark = needs_root

FLOOD = 300

# The agent's program: open FLOOD connections, print "open N", then hold them until stdin closes.
AGENT = r"""
import socket, sys
path, n = sys.argv[1], int(sys.argv[2])
held = []
for i in range(n):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
    except OSError as exc:
        print("connect failed", i, exc, flush=True)
        break
    if i % 3 == 1:
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: d\r\n\r\n")
    elif i % 3 == 2:
        body = b'{"path": "a.txt"}'
        s.sendall(b"POST /v1/tools/file_read HTTP/1.1\r\nHost: d\r\nAuthorization: Bearer nope\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    held.append(s)
print("open", len(held), flush=True)
sys.stdin.readline()
alive = 0
for s in held:
    s.setblocking(False)
    try:
        alive += s.recv(65536, socket.MSG_PEEK) != b""
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
print("alive", alive, flush=True)
sys.stdin.read()
"""


async def _metric(socket: Path, name: str) -> int:
    resp = await send_raw(
        socket,
        f"GET /metrics HTTP/1.1\r\nHost: d\r\nAuthorization: Bearer {WRITE}\r\n"
        "Connection: close\r\n\r\n".encode(),
    )
    for line in resp.body.decode().splitlines():
        if line.startswith(name + "{"):
            return int(line.rsplit(" ", 1)[1])
    return 0


async def test_orchestrator_is_served_while_300_unauthenticated_connections_are_open() -> None:
    async with agent_daemon(["--header-timeout", "600", "--keepalive-timeout", "600"]) as rig:
        (rig.workspace / "a.txt").write_text("served\n")
        os.chmod(rig.base, 0o755)
        os.chmod(rig.daemon.socket, 0o666)  # the agent may connect (it has no token)
        agent_py = rig.top / "agent.py"
        agent_py.write_text(AGENT)
        agent_py.chmod(0o644)
        python = await _agent_python(rig.daemon.client(WRITE))
        flood = await asyncio.create_subprocess_exec(
            "setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
            python, str(agent_py), str(rig.daemon.socket), str(FLOOD),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert flood.stdout is not None and flood.stdin is not None
        try:
            line = (await asyncio.wait_for(flood.stdout.readline(), 60)).decode()
            assert line.startswith("open "), line
            # Every connection was accepted (none refused by the kernel backlog).
            assert int(line.split()[1]) == FLOOD, line
            # "Open" means accepted: wait until the daemon has taken every one of them off
            # the kernel's queue (a full queue refuses a connect before the daemon sees it).
            await wait_until(
                lambda: _accept_queue(rig.daemon.socket) == 0,
                message="the daemon never accepted the agent's connections",
            )
            # The orchestrator: fresh connections, a write token, every call answered.
            for _ in range(3):
                async with DaemonClient(socket=str(rig.daemon.socket), token=WRITE) as c:
                    assert (await c.file_read(path="a.txt")).content == "served\n"  # type: ignore[union-attr]
                    listing = await c.call("file_list", {"path": "."})
                    assert any(e["path"] == "a.txt" for e in listing["entries"])
            # Room is made by closing idle connections without a token (each new connection,
            # this probe's included, closes one that has been quiet for a second).
            await wait_until(
                lambda: _metric(rig.daemon.socket, "airlockd_connections_evicted_total"),
                message="no idle connection without a token was closed to make room",
            )
            alive = await _alive_in_agent(flood)
            assert alive < FLOOD, alive
        finally:
            flood.stdin.close()
            await asyncio.wait_for(flood.wait(), 30)


def _accept_queue(socket: Path) -> int | None:
    """Connections waiting in the listening socket's accept queue (``ss``: Recv-Q)."""
    listing = subprocess.run(["ss", "-xlH"], capture_output=True, text=True, check=True).stdout
    for line in listing.splitlines():
        fields = line.split()
        if str(socket) in fields:
            return int(fields[2])
    return None


async def _alive_in_agent(flood: asyncio.subprocess.Process) -> int:
    """How many of its connections the agent still holds open (no EOF, no reset)."""
    assert flood.stdin is not None and flood.stdout is not None
    flood.stdin.write(b"count\n")
    await flood.stdin.drain()
    line = (await asyncio.wait_for(flood.stdout.readline(), 30)).decode()
    assert line.startswith("alive "), line
    return int(line.split()[1])


async def _agent_python(client: DaemonClient) -> str:
    """A Python the exec user can run (the suite's own may live under a 0700 home)."""
    async with client as c:
        for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
            probe = await c.exec(argv=[candidate, "-c", "print(1)"])
            if probe.exit_code == 0:
                return candidate
    raise AssertionError("no python3 the exec user can run: install python3 in /usr/bin")
