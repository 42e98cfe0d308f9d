"""A full disk during an edit: ``no_space`` (507), and the tree exactly as it was.

The workspace is a small tmpfs (mounted here; the suite runs as root). The
agent, a real process as the exec user, fills it through ``exec`` until the
first file of a multi-file edit still fits and the second does not. Before
the fix the first file stayed replaced (or was rolled back by writing its old
bytes again, which needs the very space that just ran out) and the answer
was ``internal``/"changed by someone else". Now every new content is staged
before the first rename, so the failure meets the edit before anything was
replaced: the answer is ``no_space`` and the tree is byte-identical, with no
temp file and no journal left behind. Once the agent frees space, the same
edit goes through whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from airlock.client.daemon import DaemonClient
from airlock.daemon.errors import AirlockError
from airlock.daemon.fsio import TEMP_MARKER
from tests.daemon.adversarial.agent_rig import WRITE, AgentRig, agent_daemon
from tests.daemon.adversarial.as_exec_user import USER, needs_root
from tests.daemon.adversarial.conftest import tree_digest
from tests.daemon.adversarial.raw_http import post, send_raw
from tests.fakes.mounts import mounted

pytestmark = needs_root

KIB = 1024
A_SIZE, B_SIZE = 400 * KIB, 600 * KIB
FREE_AFTER_FILL = 700 * KIB
# b grows by ~440 KiB to ~1 MiB: it cannot fit even after a's old copy is freed, so the
# edit fails in any order; a's new copy (400 KiB) alone fits.
GROWTH = "y" * 70


def _text(tag: str, size: int) -> str:
    line = f"{tag} " + "x" * 90
    count = size // (len(line) + 6)
    return "".join(f"{line}{i:05d}\n" for i in range(count))


@contextlib.contextmanager
def small_tmpfs(size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` owned by the exec user; skipped (saying why) where it cannot mount."""
    where = Path(tempfile.mkdtemp(prefix="al-full-"))
    user = pwd.getpwnam(USER)

    def remove() -> None:
        with contextlib.suppress(OSError):
            where.rmdir()

    options = f"size={size},mode=0755,uid={user.pw_uid},gid={user.pw_gid}"
    with mounted(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        where,
        remove,
        lambda why: (
            f"cannot mount a tmpfs ({why}): the disk-full checks did not "
            "run (it is NOT a pass); run the suite as root with CAP_SYS_ADMIN to run them"
        ),
    ) as mount:
        yield mount


def _free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


async def _fill_to(client: DaemonClient, ws: Path, free: int) -> None:
    """The agent fills the disk (a real process as the exec user) until ``free`` bytes remain."""
    extra = _free(ws) - free
    assert extra > 0, "the tmpfs is smaller than the test needs"
    result = await client.exec(argv=["sh", "-c", f"head -c {extra} /dev/zero > fill"])
    assert result.exit_code == 0, result.stderr
    assert abs(_free(ws) - free) <= 8 * KIB, _free(ws)


def _leftovers(rig: AgentRig) -> list[str]:
    temps = [p.name for p in rig.workspace.rglob("*") if p.name.startswith(TEMP_MARKER)]
    journals = [str(p) for p in (rig.base / "state").rglob("journal.json")]
    return temps + journals


async def _refused(call: object) -> AirlockError:
    with pytest.raises(AirlockError) as info:
        await call  # type: ignore[misc]
    return info.value


async def test_disk_full_during_multi_file_edits_leaves_the_tree_whole() -> None:
    with small_tmpfs("4m") as ws:
        (ws / "a.txt").write_text(_text("a", A_SIZE))
        (ws / "b.txt").write_text(_text("b", B_SIZE))
        user = pwd.getpwnam(USER)
        for name in ("a.txt", "b.txt"):
            os.chown(ws / name, user.pw_uid, user.pw_gid)
        async with agent_daemon(workspace=ws) as rig, rig.daemon.client(WRITE) as agent:
            await _fill_to(agent, ws, FREE_AFTER_FILL)
            before = tree_digest(ws)
            edits = [
                {"path": "a.txt", "old_string": "a x", "new_string": "A x", "replace_all": True},
                {
                    "path": "b.txt",
                    "old_string": "b x",
                    "new_string": "B x" + GROWTH,
                    "replace_all": True,
                },
            ]

            # file_multi_patch over the raw socket: the status is 507, the code no_space.
            body = json.dumps({"edits": edits}).encode()
            resp = await send_raw(
                rig.daemon.socket,
                post(
                    "/v1/tools/file_multi_patch", body, extra=f"Authorization: Bearer {WRITE}\r\n"
                ),
            )
            err = resp.envelope()
            assert resp.status == 507 and err["code"] == "no_space", (resp.status, err)
            assert "b.txt" in err["message"] and "nothing was written" in err["message"]
            assert "someone else" not in err["message"]
            assert "free disk space" in err["message"].lower()
            assert tree_digest(ws) == before
            assert _leftovers(rig) == []

            # apply_patch: an update that fits, then an add that does not.
            added = "".join("+" + "c" * 99 + "\n" for _ in range(4500))  # ~450 KiB
            patch = (
                "*** Begin Patch\n*** Update File: a.txt\n@@\n-a "
                + "x" * 90
                + "00000\n+A first line\n*** Add File: c.txt\n"
                + added
                + "*** End Patch\n"
            )
            exc = await _refused(agent.apply_patch(patch=patch))
            assert str(exc.code) == "no_space", exc.message
            assert tree_digest(ws) == before
            assert _leftovers(rig) == []

            # A single file_write past the free space.
            exc = await _refused(agent.file_write(path="b.txt", content="y" * (800 * KIB)))
            assert str(exc.code) == "no_space", exc.message
            assert tree_digest(ws) == before
            assert _leftovers(rig) == []

            # The agent frees space: the same multi-file edit goes through whole.
            # (Staging needs room for every new content at once: the price of restoring
            # without free space; docs/daemon.md says so.)
            removed = await agent.exec(argv=["rm", "fill"])
            assert removed.exit_code == 0
            done = await agent.file_multi_patch(edits=edits)  # type: ignore[arg-type]
            assert [f.path for f in done.files] == ["a.txt", "b.txt"]
            assert (ws / "a.txt").read_text() == _text("a", A_SIZE).replace("a x", "A x")
            assert (ws / "b.txt").read_text() == _text("b", B_SIZE).replace("b x", "B x" + GROWTH)
            assert _leftovers(rig) == []
