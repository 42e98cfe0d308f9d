"""The child's working directory: entered from the resolver's fd, after the user switch, checked.

``subprocess``'s ``cwd=`` is a ``chdir(path)`` made by the child *before*
``setgroups``/``setgid``/``setuid`` (that is CPython's order in
``_posixsubprocess``), so it runs with the daemon's rights and looks the name
up again: a workspace directory swapped for a symlink at that moment puts an
agent command in a directory outside the workspace, even under a parent only
root may enter. Here no path is looked up in the child at all:

1. The daemon opens the directory through the race-free resolver
   (``Roots.directory``: fd-relative from a root, ``O_NOFOLLOW`` per
   component, or ``openat2`` with ``RESOLVE_BENEATH``) and records its
   ``st_dev``/``st_ino``.
2. The child inherits that descriptor across ``fork``. ``preexec_fn`` runs
   after the uid/gid/groups switch and before ``exec`` (and before the
   descriptor, close-on-exec, is closed), and does ``fchdir(fd)`` as the exec
   user, so a directory that user may not enter is refused by the kernel.
3. It then compares ``stat(".")`` with the recorded device and inode and
   refuses to ``exec`` anywhere else.

Why ``preexec_fn`` and not a shim program: an exec shim (``env --chdir``)
turns "program not found" into exit status 127, indistinguishable from the
program's own, and a Python shim costs ~25 ms per command here. The callable
below makes three system calls through ``os``, imports nothing, takes no lock
and starts no thread, which is what makes ``preexec_fn`` safe in a threaded
parent; the user switch already rules out ``vfork``, so it costs nothing more.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequest, IsDirectory, NotFound
from ..paths import ResolvedPath, Roots


class LandedElsewhere(OSError):
    """The child's working directory is not the directory the resolver opened."""


@dataclass(frozen=True)
class EnterDir:
    """``preexec_fn``: enter the opened directory, then prove that is where the child is."""

    fd: int
    dev: int
    ino: int

    def __call__(self) -> None:
        os.fchdir(self.fd)
        here = os.stat(".")
        if here.st_dev != self.dev or here.st_ino != self.ino:
            raise LandedElsewhere("the working directory is not the one that was resolved")

    def popen_kwargs(self, base: dict[str, Any]) -> dict[str, Any]:
        """``base`` with this step as ``preexec_fn``, after any step ``base`` already has
        (another child step, e.g. cgroup placement, keeps running first)."""
        kwargs = dict(base)
        kwargs["preexec_fn"] = then(kwargs.get("preexec_fn"), self)
        return kwargs


def then(first: Callable[[], object] | None, second: Callable[[], object]) -> Callable[[], object]:
    """One ``preexec_fn`` running ``first`` (if any), then ``second``, in the child."""
    return second if first is None else _Both(first, second)


@dataclass(frozen=True)
class _Both:
    first: Callable[[], object]
    then: Callable[[], object]

    def __call__(self) -> None:
        self.first()
        self.then()


def _not_a_dir(where: ResolvedPath) -> IsDirectory:
    return IsDirectory(f"cwd {where.display} is a file; pass a directory", {"cwd": where.display})


@contextlib.contextmanager
def opened_cwd(roots: Roots, where: ResolvedPath) -> Iterator[EnterDir]:
    """The directory ``where`` names, opened through the resolver, for one spawn."""
    with contextlib.ExitStack() as stack:
        try:
            fd = stack.enter_context(roots.directory(where))
        except NotFound:
            raise NotFound(
                f"working directory {where.display} does not exist", {"cwd": where.display}
            ) from None
        except InvalidRequest as exc:
            if "not a directory" in exc.message:
                raise _not_a_dir(where) from None
            raise
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):
            raise _not_a_dir(where)
        yield EnterDir(fd, st.st_dev, st.st_ino)


def check_cwd(roots: Roots, where: ResolvedPath) -> None:
    """Refuse a missing or non-directory cwd before anything starts (the spawn opens it again)."""
    with opened_cwd(roots, where):
        pass
