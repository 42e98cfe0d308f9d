"""``openat2(2)`` through ctypes, and whether this kernel (and this process) may use it.

Python has no binding for ``openat2``; the syscall number is 437 on every
architecture that has it (the generic table). ``RESOLVE_BENEATH`` makes the
kernel refuse any resolution that leaves the starting directory (``..`` above
it, an absolute symlink, a symlink whose target climbs out), and it does so
atomically with the lookup, which is what makes a swapped directory harmless.

``AIRLOCK_RESOLVER=walk`` in the environment turns it off, so the component
walk in :mod:`airlock.daemon.paths` (the fallback for kernels before 5.6 or a
seccomp filter that refuses the call) runs instead; tests use it to cover both.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform

SYS_OPENAT2 = 437
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE_CACHED = 0x20
"""Fail with EAGAIN unless every component is in the kernel's lookup cache (Linux 5.12+):
what lets a lookup run on the event loop without ever waiting for the disk."""

_MACHINES = frozenset({"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x"})


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_syscall.argtypes = (
    ctypes.c_long,
    ctypes.c_int,
    ctypes.c_char_p,
    ctypes.POINTER(_OpenHow),
    ctypes.c_size_t,
)
_HOW_SIZE = ctypes.sizeof(_OpenHow)


def openat2(dir_fd: int, path: str, flags: int, resolve: int, mode: int = 0) -> int:
    """The raw call; raises ``OSError`` with the kernel's errno like ``os.open`` does."""
    how = _OpenHow(flags, mode, resolve)
    fd = _syscall(SYS_OPENAT2, dir_fd, os.fsencode(path), how, _HOW_SIZE)
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


def _probe() -> bool:
    if platform.system() != "Linux" or platform.machine() not in _MACHINES:
        return False
    try:
        fd = openat2(-100, "/", os.O_PATH | os.O_CLOEXEC | os.O_DIRECTORY, RESOLVE_NO_MAGICLINKS)
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG):
            return False
        raise
    os.close(fd)
    return True


def available() -> bool:
    """True when paths should be resolved with ``openat2`` (not forced off, kernel has it).

    The environment is read on every call (a dict lookup) so a test or the bench can
    switch paths in one process.
    """
    return _AVAILABLE and os.environ.get("AIRLOCK_RESOLVER") != "walk"


_AVAILABLE = _probe()
