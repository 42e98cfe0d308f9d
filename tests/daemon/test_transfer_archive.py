"""``PUT``/``GET /v1/archive`` over a real airlockd: trees in and out, and every hostile member.

Each hostile archive starts with harmless members (so something was already
staged when the bad one arrives) and must leave the workspace byte-identical:
same paths, types, bytes, modes and link targets, and no staging directory.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest

from airlock.client.daemon import DaemonClient, Forbidden
from tests.fakes.agent_daemon import READ_TOKEN, WRITE_TOKEN, AgentDaemon

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture
def client(agent_client: DaemonClient) -> DaemonClient:
    return agent_client


def snapshot(root: Path) -> dict[str, tuple[str, int, bytes | str]]:
    """Every path under ``root`` with its type, mode and content (or link target)."""
    out: dict[str, tuple[str, int, bytes | str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", 0, os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode), b"")
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes())
            else:
                out[rel] = ("other", stat.S_IMODE(st.st_mode), b"")
    return out


def tar_of(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def member(name: str, kind: bytes = tarfile.REGTYPE, **attrs: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = 0o644
    for key, value in attrs.items():
        setattr(info, key, value)
    return info


def harmless() -> list[tuple[tarfile.TarInfo, bytes | None]]:
    return [
        (member("new-dir", tarfile.DIRTYPE, mode=0o755), None),
        (member("new-dir/a.txt"), b"a\n"),
        (member("existing.txt"), b"overwritten\n"),
    ]


HOSTILE: list[tuple[str, Callable[[], tuple[tarfile.TarInfo, bytes | None]]]] = [
    ("absolute", lambda: (member("/tmp/abs-escape"), b"x")),
    ("dotdot", lambda: (member("../dotdot-escape"), b"x")),
    ("inner dotdot", lambda: (member("new-dir/../../inner-escape"), b"x")),
    ("char device", lambda: (member("dev-null", tarfile.CHRTYPE, devmajor=1, devminor=3), None)),
    ("block device", lambda: (member("dev-sda", tarfile.BLKTYPE, devmajor=8, devminor=0), None)),
    ("fifo", lambda: (member("a-fifo", tarfile.FIFOTYPE), None)),
    ("hard link", lambda: (member("hard", tarfile.LNKTYPE, linkname="existing.txt"), None)),
    (
        "absolute symlink",
        lambda: (member("abs-link", tarfile.SYMTYPE, linkname="/etc/passwd"), None),
    ),
    ("leaving symlink", lambda: (member("up-link", tarfile.SYMTYPE, linkname="../../etc"), None)),
    ("setuid", lambda: (member("suid", mode=0o4755), b"#!/bin/sh\n")),
    ("setgid", lambda: (member("sgid", mode=0o2755), b"#!/bin/sh\n")),
    ("through a workspace symlink", lambda: (member("way-out/planted.txt"), b"x")),
    ("over a directory", lambda: (member("sub"), b"file where a dir is")),
    ("read-only file", lambda: (member("frozen.txt"), b"changed")),
]


TREE_DEPENDENT = {"through a workspace symlink", "over a directory", "read-only file"}


def prepare(agent: AgentDaemon, outside: Path) -> None:
    ws = agent.workspace
    (ws / "existing.txt").write_text("original\n")
    (ws / "sub").mkdir(exist_ok=True)
    (ws / "sub" / "keep.txt").write_text("keep\n")
    (ws / "frozen.txt").write_text("frozen\n")
    (ws / "frozen.txt").chmod(0o444)
    if not (ws / "way-out").is_symlink():
        (ws / "way-out").symlink_to(outside)


async def put_archive(
    agent: AgentDaemon, path: str, body: bytes, token: str = WRITE_TOKEN
) -> tuple[int, dict[str, object]]:
    conn = aiohttp.UnixConnector(path=str(agent.daemon.socket))
    async with (
        aiohttp.ClientSession(connector=conn) as session,
        session.put(
            "http://d/v1/archive",
            params={"path": path},
            data=body,
            headers={"Authorization": f"Bearer {token}"},
        ) as resp,
    ):
        return resp.status, await resp.json()


@pytest.mark.parametrize("label", [label for label, _ in HOSTILE])
async def test_every_hostile_member_is_refused_and_nothing_is_written(
    agent: AgentDaemon, tmp_path_factory: pytest.TempPathFactory, label: str
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    prepare(agent, outside)
    bad = dict(HOSTILE)[label]()
    before = snapshot(agent.workspace)
    # A member refused for what the tree holds is only refused where the tree holds it.
    targets = (".",) if label in TREE_DEPENDENT else (".", "deep/new/target")
    for target in targets:
        status, body = await put_archive(agent, target, tar_of(*harmless(), bad))
        error = body["error"]
        assert isinstance(error, dict)
        assert status in (400, 403), (label, body)
        assert error["details"]["member"] == bad[0].name, (label, body)
        assert bad[0].name[:40] in str(error["message"]), (label, body)
        assert snapshot(agent.workspace) == before, f"{label}: the tree changed"
    assert list(outside.iterdir()) == []


async def test_a_tree_round_trip(agent: AgentDaemon, client: DaemonClient, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg" / "deep").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("print('hi')\n")
    (src / "pkg" / "deep" / "data.bin").write_bytes(os.urandom(70_000))
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o750)
    (src / "pkg" / "alias.py").symlink_to("mod.py")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    os.mkfifo(src / "pipe")  # not sent: the client skips what the daemon would refuse

    done = await client.upload_tree(src, "landing/tree")
    assert done.path == "landing/tree" and done.files == 4
    landed = agent.workspace / "landing" / "tree"
    assert (landed / "pkg" / "deep" / "data.bin").read_bytes() == (
        src / "pkg" / "deep" / "data.bin"
    ).read_bytes()
    assert os.readlink(landed / "pkg" / "alias.py") == "mod.py"
    assert stat.S_IMODE((landed / "run.sh").stat().st_mode) == 0o750
    if agent.exec_uid is not None:
        for path in (landed, landed / "pkg", landed / "run.sh", landed / "pkg" / "alias.py"):
            st = path.lstat()
            assert (st.st_uid, st.st_gid) == (agent.exec_uid, agent.exec_gid), path
    assert not [p for p in (agent.workspace / "landing").iterdir() if p.name != "tree"]

    # Out again: symlinks leaving the directory and special files stay behind.
    (landed / "leaves").symlink_to("../../..")
    os.mkfifo(landed / "fifo")
    back = tmp_path / "back"
    await client.download_tree("landing/tree", back)
    expected = snapshot(src)
    del expected["pipe"]
    assert snapshot(back) == expected

    # A second upload merges into the existing tree and replaces files.
    (src / "pkg" / "mod.py").write_text("print('v2')\n")
    await client.upload_tree(src / "pkg", "landing/tree/pkg")
    assert (landed / "pkg" / "mod.py").read_text() == "print('v2')\n"
    assert (landed / "run.sh").exists()


async def test_archive_refusals_by_scope_and_input(agent: AgentDaemon, tmp_path: Path) -> None:
    status, body = await put_archive(agent, "x", tar_of(*harmless()), token=READ_TOKEN)
    assert status == 403 and body["error"]["code"] == "forbidden"  # type: ignore[index]
    assert not (agent.workspace / "x").exists()
    status, body = await put_archive(agent, "x", b"this is not a tar archive at all" * 40)
    assert status == 400 and body["error"]["code"] == "invalid_request"  # type: ignore[index]
    assert not (agent.workspace / "x").exists()
    async with agent.reader() as reader:
        (agent.workspace / "readable").mkdir(exist_ok=True)
        (agent.workspace / "readable" / "r.txt").write_text("r")
        await reader.download_tree("readable", tmp_path / "r")
        assert (tmp_path / "r" / "r.txt").read_text() == "r"
        with pytest.raises(Forbidden):
            await reader.upload_tree(tmp_path / "r", "readable")
