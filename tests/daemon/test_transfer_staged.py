"""The upload's staged temp file: batches written beside their hash."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import cast

from airlock.daemon.commit.journal import Journal
from airlock.daemon.paths import Anchor
from airlock.daemon.transfer.files import Staged


def test_staged_write_appends_every_chunk_in_order(tmp_path: Path) -> None:
    # Batches of uneven sizes, empty ones included, written and hashed separately.
    chunks = [bytes([i % 251]) * (i * 37 % 70_001) for i in range(3000)]
    fd = os.open(tmp_path / "t", os.O_WRONLY | os.O_CREAT, 0o600)
    staged = Staged(cast(Anchor, None), "t", fd, cast(Journal, None), hashlib.sha256())
    try:
        for chunk in chunks:
            staged.write(chunk)
            staged.digest(chunk)
    finally:
        os.close(fd)
    whole = b"".join(chunks)
    assert (tmp_path / "t").read_bytes() == whole and staged.size == len(whole)
    assert staged.sha.hexdigest() == hashlib.sha256(whole).hexdigest()
