"""A failure while installing (after some targets were already replaced) is undone by renaming.

Staging allocates every data block before the first rename, so a full disk
normally fails there, with nothing replaced (tests/daemon/adversarial/
test_disk_full_edits.py). What remains is a rename or link that fails
afterwards (ENOSPC for a new directory entry on some file systems, EIO): the
targets already replaced get their old inode back by a rename, which needs no
free space, deletes come back, adds go away, and no backup or temp file is
left. The failing call is injected; every file operation is real.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from airlock.daemon.commit import committer, staging
from airlock.daemon.errors import AirlockError
from tests.daemon.apply_patch.conftest import Apply
from tests.daemon.apply_patch.helpers import patch, snapshot, temp_files


async def test_enospc_while_installing_restores_every_replaced_file(
    apply: Apply, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "a.txt").write_text("a\n")
    (ws / "b.txt").write_text("b\n")
    (ws / "gone.txt").write_text("gone\n")
    (ws / "a.txt").chmod(0o640)
    before = snapshot(ws)
    inode_a = (ws / "a.txt").stat().st_ino
    real_install = staging.install
    calls = 0

    def install_until_full(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 4:  # a.txt replaced, gone.txt deleted, new.txt added: then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_install(*args, **kwargs)

    monkeypatch.setattr(committer, "install", install_until_full)
    with pytest.raises(AirlockError) as info:
        await apply(
            patch(
                "*** Update File: a.txt", "@@", "-a", "+A",
                "*** Delete File: gone.txt",
                "*** Add File: new.txt", "+new",
                "*** Update File: b.txt", "@@", "-b", "+B",
            ),
            diagnostics=False,
        )  # fmt: skip
    err = info.value
    assert err.code == "no_space", err.message
    assert err.details["failed"] == "b.txt"
    assert err.details["rolled_back"] == ["new.txt", "gone.txt", "a.txt"]
    assert err.details["not_rolled_back"] == []
    assert snapshot(ws) == before
    assert temp_files(ws) == []
    # The very inode came back (a rename, not a rewrite), with its mode.
    assert (ws / "a.txt").stat().st_ino == inode_a
    assert (ws / "a.txt").stat().st_mode & 0o777 == 0o640
