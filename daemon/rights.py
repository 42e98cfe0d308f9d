"""Acting on the workspace with the exec user's rights: per-thread filesystem identity.

When airlockd runs as root with ``--exec-user``, a race the agent wins (a
directory swapped for a symlink between a check and an open) must reach
nothing the agent could not reach itself. So every thread of the daemon, once
it is serving, carries the exec user's *filesystem* identity: ``setfsuid``,
``setfsgid`` and the user's supplementary groups, set per thread with raw
system calls. The kernel then checks every ``open``, ``openat``, ``rename``,
``unlink``, ``mkdir`` and ``chdir`` as if the agent made it (and drops
``CAP_DAC_OVERRIDE``, ``CAP_DAC_READ_SEARCH``, ``CAP_FOWNER``... from the
thread's effective set while the fsuid is not 0), and files the tools create
are the exec user's. Real and effective uid stay 0, so the daemon can still
start children as the exec user and signal them.

Why per thread: the kernel keeps fsuid/fsgid/groups per thread, and a thread
inherits them from the thread that creates it. glibc's ``setgroups`` (and
Python's ``os.setgroups``) changes every thread at once, so the groups are set
through the raw system call instead; ``setfsuid``/``setfsgid`` are per thread
already.

Default-deny, and few exceptions:

- :func:`configure` records who the exec user is; :func:`enter_exec_user`
  switches the calling thread (the workspace's thread hop and the loop's
  default executor call it when each worker starts; the main thread calls it
  once the sockets listen, so every thread started later inherits it).
- :func:`as_daemon` lifts the calling thread back to the daemon's own identity
  for one synchronous block, and is used only where the daemon touches what is
  its own: the token file (SIGHUP), the state dir (journals), the artifacts dir
  (spills) and its socket. ``grep as_daemon`` lists them all.

Imports are the daemon's own business too: a module first imported while
serving (a lazy import) may live where the exec user cannot read (an
interpreter under ``/root``, a checkout under a 0700 directory), so
:class:`_ImportAsDaemon` finds and loads modules with the daemon's identity.

Without ``--exec-user``, or when airlockd can switch no user (neither root
nor ``CAP_SETUID``/``CAP_SETGID``), nothing changes and every function here is
a no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.abc
import os
import platform
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any, ParamSpec, TypeVar

from .identity import ExecUser
from .privsep import can_switch_user

_SYS_SETGROUPS = {"x86_64": 116, "aarch64": 159}
_libc = ctypes.CDLL(None, use_errno=True)
_libc.setfsuid.argtypes = [ctypes.c_uint]
_libc.setfsuid.restype = ctypes.c_int
_libc.setfsgid.argtypes = [ctypes.c_uint]
_libc.setfsgid.restype = ctypes.c_int
_QUERY = 0xFFFFFFFF  # an invalid id: the call changes nothing and returns the current one


class RightsError(RuntimeError):
    """The kernel did not take the identity switch; serving on would act as root."""


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]


_state = threading.local()
_exec: Identity | None = None
_daemon: Identity | None = None


def _set_thread_groups(groups: tuple[int, ...]) -> None:
    number = _SYS_SETGROUPS.get(platform.machine())
    if number is None:
        raise RightsError(f"no per-thread setgroups for {platform.machine()}")
    array = (ctypes.c_uint * max(len(groups), 1))(*groups)
    if _libc.syscall(ctypes.c_long(number), ctypes.c_size_t(len(groups)), array) != 0:
        err = ctypes.get_errno()
        raise RightsError(f"setgroups: {os.strerror(err)}")


def _switch(to: Identity) -> None:
    """Groups first (needs CAP_SETGID, which a non-zero fsuid does not drop), then gid, uid."""
    _set_thread_groups(to.groups)
    _libc.setfsgid(to.gid)
    _libc.setfsuid(to.uid)
    if _libc.setfsuid(_QUERY) != to.uid or _libc.setfsgid(_QUERY) != to.gid:
        raise RightsError(f"the thread's filesystem identity is not uid {to.uid}/gid {to.gid}")


class _Lifted:
    """A module loader whose reads (and module code) run with the daemon's identity."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def create_module(self, spec: ModuleSpec) -> Any:
        with as_daemon():
            return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        with as_daemon():
            self._loader.exec_module(module)

    def get_data(self, path: str) -> bytes:
        with as_daemon():
            data: bytes = self._loader.get_data(path)
            return data


class _ImportAsDaemon(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: asks the other finders with the daemon's identity."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if _exec is None:
            return None
        with as_daemon():
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec: ModuleSpec | None = find(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Lifted(spec.loader)  # type: ignore[assignment]
        return spec


_IMPORTS = _ImportAsDaemon()


def configure(user: ExecUser | None) -> bool:
    """Record the exec user; True when threads will switch (root with a separate user)."""
    global _exec, _daemon
    if user is None or user.is_current or not can_switch_user():
        _exec = _daemon = None
        return False
    _exec = Identity(user.uid, user.gid, tuple(user.groups))
    _daemon = Identity(os.geteuid(), os.getegid(), tuple(os.getgroups()))
    if _IMPORTS not in sys.meta_path:
        sys.meta_path.insert(0, _IMPORTS)
    return True


def active() -> bool:
    return _exec is not None


def enter_exec_user() -> None:
    """Give the calling thread the exec user's filesystem identity (idempotent; no-op if off)."""
    if _exec is None:
        return
    _switch(_exec)
    _state.depth = 0


@contextlib.contextmanager
def as_daemon() -> Iterator[None]:
    """The daemon's own identity for one synchronous block (its token, state, artifacts).

    Never hold it across an ``await``: other coroutines of the loop would run
    with it. Nested use is fine; the outermost block restores the exec user.
    """
    if _exec is None or _daemon is None:
        yield
        return
    depth: int = getattr(_state, "depth", 0)
    was_exec = _libc.setfsuid(_QUERY) == _exec.uid
    if depth == 0 and was_exec:
        _switch(_daemon)
    _state.depth = depth + 1
    try:
        yield
    finally:
        _state.depth = depth
        if depth == 0 and was_exec:
            _switch(_exec)


def thread_fs_ids() -> tuple[int, int]:
    """The calling thread's (fsuid, fsgid), for logs and tests."""
    return _libc.setfsuid(_QUERY), _libc.setfsgid(_QUERY)


P = ParamSpec("P")
R = TypeVar("R")


def as_daemon_call(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` always runs with the daemon's rights (for files that are the daemon's own)."""

    @functools.wraps(fn)
    def lifted(*args: P.args, **kwargs: P.kwargs) -> R:
        with as_daemon():
            return fn(*args, **kwargs)

    return lifted
