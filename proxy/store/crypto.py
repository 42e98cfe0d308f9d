"""Encryption at rest for the Redis store: AES-256-GCM, one key shared by replicas.

Lease records and placeholder entries hold real tokens; Redis persists and
replicates whatever it holds (RDB, AOF, replicas, ``MONITOR``). Every value the
store writes is sealed with the key from ``--store-key-file``:

    b"AL1" | key id (4 bytes) | nonce (12 bytes) | ciphertext+tag

The Redis key name is the associated data, so a sealed value cannot be moved
to another key (another placeholder, another session) by someone who can write
to Redis but does not hold the key: it fails authentication and the store
fails closed.

Key file: one key per line, base64 of 32 random bytes (``openssl rand -base64
32``); blank lines and ``#`` comments are ignored. The first key seals; every
key opens. Rotation: add the new key as a second line on every replica and
restart them, move it to the first line and restart, and drop the old line once
the longest lease TTL has passed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MAGIC = b"AL1"
_KID_LEN = 4
_NONCE_LEN = 12


class KeyFileError(ValueError):
    """The key file is missing, unreadable or malformed (message names the flag)."""


class SealError(Exception):
    """A stored value cannot be opened: wrong key, tampered, or not sealed."""


def _kid(key: bytes) -> bytes:
    return hashlib.sha256(b"airlock-store-key\0" + key).digest()[:_KID_LEN]


def parse_keys(text: str) -> list[bytes]:
    keys: list[bytes] = []
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            std = line.replace("-", "+").replace("_", "/")
            key = base64.b64decode(std + "=" * (-len(std) % 4), validate=True)
        except (binascii.Error, ValueError):
            raise KeyFileError(f"--store-key-file: line {n} is not base64") from None
        if len(key) != 32:
            raise KeyFileError(
                f"--store-key-file: line {n} is {len(key)} bytes, expected 32 "
                "(make one with: openssl rand -base64 32)"
            )
        keys.append(key)
    if not keys:
        raise KeyFileError("--store-key-file: no key in the file (openssl rand -base64 32)")
    return keys


class Sealer:
    """Seals and opens store values with the first key / any key of a key file."""

    def __init__(self, keys: list[bytes]) -> None:
        if not keys:
            raise KeyFileError("--store-key-file: no key")
        self._current = (_kid(keys[0]), AESGCM(keys[0]))
        self._by_kid = {_kid(k): AESGCM(k) for k in reversed(keys)}

    @classmethod
    def from_file(cls, path: Path) -> Sealer:
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise KeyFileError(f"--store-key-file: cannot read {path}: {exc}") from None
        return cls(parse_keys(text))

    def seal(self, name: str, plaintext: bytes) -> bytes:
        kid, aead = self._current
        nonce = os.urandom(_NONCE_LEN)
        return MAGIC + kid + nonce + aead.encrypt(nonce, plaintext, name.encode())

    def open(self, name: str, value: bytes) -> bytes:
        if not value.startswith(MAGIC):
            raise SealError("value is not sealed")
        kid = value[len(MAGIC) : len(MAGIC) + _KID_LEN]
        aead = self._by_kid.get(kid)
        if aead is None:
            raise SealError("value sealed with a key this replica does not have")
        start = len(MAGIC) + _KID_LEN
        nonce = value[start : start + _NONCE_LEN]
        try:
            return aead.decrypt(nonce, value[start + _NONCE_LEN :], name.encode())
        except InvalidTag:
            raise SealError("value failed authentication") from None
