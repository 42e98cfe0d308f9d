"""The three inotify calls through ``ctypes``, and a parser for the events they produce.

Why not a library: ``watchfiles`` (Rust) and ``asyncinotify`` would be one
more wheel in the sandbox image for what is three libc calls and a struct;
neither watches by descriptor. Watches are added on ``/proc/self/fd/N`` of a
directory the resolver opened, so what is watched is exactly the directory
that was checked, never what a name points to a moment later.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_UNMOUNT = 0x00002000
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

WATCH_MASK = (
    IN_MODIFY
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_EXCL_UNLINK
)

_HEADER = struct.Struct("iIII")

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.inotify_init1.argtypes = [ctypes.c_int]
_libc.inotify_init1.restype = ctypes.c_int
_libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
_libc.inotify_add_watch.restype = ctypes.c_int
_libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.inotify_rm_watch.restype = ctypes.c_int


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return result


def init() -> int:
    """A new non-blocking, close-on-exec inotify descriptor."""
    return _check(_libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC), "inotify_init1")


def add_watch_fd(inotify_fd: int, dir_fd: int, mask: int = WATCH_MASK) -> int:
    """Watch the directory open as ``dir_fd`` (through its ``/proc/self/fd`` link)."""
    path = f"/proc/self/fd/{dir_fd}".encode()
    return _check(_libc.inotify_add_watch(inotify_fd, path, mask), "inotify_add_watch")


def rm_watch(inotify_fd: int, wd: int) -> None:
    if _libc.inotify_rm_watch(inotify_fd, wd) < 0 and ctypes.get_errno() != errno.EINVAL:
        raise OSError(ctypes.get_errno(), "inotify_rm_watch")


@dataclass(frozen=True)
class RawEvent:
    wd: int
    mask: int
    cookie: int
    name: str


def parse(buffer: bytes) -> Iterator[RawEvent]:
    offset = 0
    while offset + _HEADER.size <= len(buffer):
        wd, mask, cookie, length = _HEADER.unpack_from(buffer, offset)
        offset += _HEADER.size
        raw = buffer[offset : offset + length].split(b"\0", 1)[0]
        offset += length
        yield RawEvent(wd, mask, cookie, os.fsdecode(raw))
