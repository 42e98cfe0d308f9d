"""Sealing of Redis values: AES-GCM bound to the key name, rotation."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from airlock.proxy.store.crypto import KeyFileError, Sealer, SealError, parse_keys


def _key() -> bytes:
    return os.urandom(32)


def test_seal_open_round_trip_bound_to_the_name() -> None:
    sealer = Sealer([_key()])
    sealed = sealer.seal("airlock:l:s:l", b'{"token": "ghs_REAL"}')
    assert b"ghs_REAL" not in sealed and sealed.startswith(b"AL1")
    assert sealer.open("airlock:l:s:l", sealed) == b'{"token": "ghs_REAL"}'
    with pytest.raises(SealError):
        sealer.open("airlock:ph:other", sealed)  # moved to another key
    with pytest.raises(SealError):
        sealer.open("airlock:l:s:l", sealed[:-1] + bytes([sealed[-1] ^ 1]))
    with pytest.raises(SealError):
        sealer.open("airlock:l:s:l", b'{"plaintext": true}')


def test_rotation_first_key_seals_every_key_opens() -> None:
    old, new = _key(), _key()
    before = Sealer([old]).seal("k", b"v")
    rotating = Sealer([new, old])
    assert rotating.open("k", before) == b"v"
    after = rotating.seal("k", b"v")
    assert Sealer([new]).open("k", after) == b"v"
    with pytest.raises(SealError):
        Sealer([old]).open("k", after)


def test_key_file_format(tmp_path: Path) -> None:
    a, b = _key(), _key()
    text = f"# current\n{base64.b64encode(a).decode()}\n\n{base64.urlsafe_b64encode(b).decode().rstrip('=')}\n"
    assert parse_keys(text) == [a, b]
    path = tmp_path / "k"
    path.write_text(text)
    assert Sealer.from_file(path).open("n", Sealer([a]).seal("n", b"x")) == b"x"
    for bad in ("", "# only a comment\n", "!!!\n", base64.b64encode(b"short").decode()):
        with pytest.raises(KeyFileError, match="--store-key-file"):
            parse_keys(bad)
    with pytest.raises(KeyFileError, match="cannot read"):
        Sealer.from_file(tmp_path / "missing")
