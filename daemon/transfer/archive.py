"""``GET``/``PUT /v1/archive``: a directory as a tar stream, out and in.

Out: the directory's regular files, directories and symlinks whose target
stays inside the directory, in path order (the shared walker, ``.git``
included); FIFOs, sockets, devices and symlinks leading out are left out.
Every file is opened from its parent's descriptor without following links.

In, all or nothing: members are checked and written into a staging directory
(``.airlock-tmp-…``) inside the deepest existing directory on the way to the
target, as the body arrives. A refused member (absolute name, ``..``, device,
FIFO, hard link, a symlink leaving the target, setuid/setgid, a path through a
symlink, a type clash with the tree, a read-only file) stops the extraction
with ``invalid_request`` (``read_only``) naming it, and the staging directory
is removed: the tree is byte-identical. The generated-file guard does not
apply: restoring a tree with ``.git`` or ``node_modules`` is what an
orchestrator uploads trees for.
Only once the whole tar checked out is the staging tree moved into place
(renames; a directory missing in the tree moves whole). Files and
directories are owned like files the tools create, never by the tar's
uid; modes keep the permission bits (directories always keep their owner's
``rwx``), times the tar's mtime for files.

Memory stays bounded: ``tarfile`` runs in stream mode on a worker thread fed
(and draining) through :mod:`.bridge`, and forgets each member once handled.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import secrets
import shutil
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from aiohttp import web

from ..auth import Scope
from ..context import ToolContext
from ..errors import AirlockError, InvalidRequest, NotFound
from ..fsio import TEMP_MARKER, refuse_read_only
from ..paths import ResolvedPath
from ..search.ignore import DIR_FLAGS, descend, open_below
from ..search.walk import MAX_WALK_DEPTH, walk
from ..workspace import Workspace
from .bridge import BodyReader, ResponseWriter
from .common import need_write, query_path, resolve_target

TAR = "application/x-tar"
_COPY = 1 << 20
_MAX_DEPTH = MAX_WALK_DEPTH - 16
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def forget_members(tf: tarfile.TarFile) -> None:
    """Stream mode keeps every TarInfo it met (``members``); drop them to stay bounded."""
    members: list[tarfile.TarInfo] = getattr(tf, "members")  # noqa: B009 (not in the stubs)
    members.clear()


def link_stays_inside(member: str, target: str) -> bool:
    """A symlink at ``member`` (relative to the directory) pointing at ``target`` stays inside."""
    if not target or target.startswith("/") or "\0" in target:
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(member), target))
    return joined != ".." and not joined.startswith("../")


# ---------------------------------------------------------------- out


def _open_dir(ctx: ToolContext, resolved: ResolvedPath) -> int:
    with ctx.roots.parent(resolved) as anchor:
        st = anchor.lstat() if anchor.name != "." else os.fstat(anchor.dir_fd)
        if st is None:
            raise NotFound(f"{resolved.display} does not exist", {"path": resolved.display})
        if not stat.S_ISDIR(st.st_mode):
            raise InvalidRequest(
                f"{resolved.display} is not a directory; download a file with GET /v1/files",
                {"path": resolved.display},
            )
    with ctx.roots.directory(resolved) as fd:
        return os.dup(fd)


class _Padded:
    """A file's bytes, exactly ``size`` of them: a file that shrank while being sent is
    padded with zeros (the tar header already promised ``size``), one that grew is cut."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.left, self.offset = fd, size, 0

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        if n <= 0:
            return b""
        data = os.pread(self.fd, n, self.offset)
        if not data:
            data = bytes(n)
        self.left -= len(data)
        self.offset += len(data)
        return data


def write_tar(top_fd: int, out: ResponseWriter) -> None:
    with tarfile.open(fileobj=out, mode="w|", bufsize=_COPY, format=tarfile.PAX_FORMAT) as tf:  # type: ignore[call-overload]
        for entry in walk(
            Path("."),  # unused: the walk starts from top_fd
            "",
            max_depth=None,
            include_hidden=True,
            ignore=None,
            start_fd=top_fd,
            skip_git=False,
        ):
            parent, _, name = entry.rel.rpartition("/")
            try:
                pfd = open_below(top_fd, parent)
            except OSError:
                continue  # changed while walking
            try:
                _add(tf, pfd, name, entry.rel)
            finally:
                os.close(pfd)
            forget_members(tf)


def _add(tf: tarfile.TarFile, pfd: int, name: str, rel: str) -> None:
    try:
        st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
    except OSError:
        return
    info = tarfile.TarInfo(rel)
    info.mode = stat.S_IMODE(st.st_mode) & 0o777
    info.mtime = int(st.st_mtime)
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        tf.addfile(info)
    elif stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(name, dir_fd=pfd)
        except OSError:
            return
        if link_stays_inside(rel, target):
            info.type = tarfile.SYMTYPE
            info.linkname = target
            tf.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=pfd)
        except OSError:
            return
        try:
            fst = os.fstat(fd)
            if not stat.S_ISREG(fst.st_mode):
                return
            info.size = fst.st_size
            tf.addfile(info, fileobj=_Padded(fd, fst.st_size))
        finally:
            os.close(fd)


async def get_archive(request: web.Request, ws: Workspace, scope: Scope) -> web.StreamResponse:
    del scope  # read scope is enough
    path, root = query_path(request)
    ctx = ws.ctx
    resolved = resolve_target(ctx, path, root, "read")
    top_fd = await asyncio.to_thread(_open_dir, ctx, resolved)
    try:
        response = web.StreamResponse(headers={"Content-Type": TAR, "Cache-Control": "no-store"})
        await response.prepare(request)
        out = ResponseWriter(response, asyncio.get_running_loop())
        work = asyncio.ensure_future(asyncio.to_thread(write_tar, top_fd, out))
        try:
            await asyncio.shield(work)
        except BaseException:
            out.closed = True
            await asyncio.wait([work])
            raise
        await response.write_eof()
        return response
    finally:
        os.close(top_fd)


# ---------------------------------------------------------------- in


@dataclass
class _Target:
    """Where the tar lands: the deepest existing directory, and the missing part below it."""

    anchor_fd: int  # the deepest existing directory on the way to the target
    prefix: list[str]  # components from there to the target (missing ones)
    resolved: ResolvedPath


def _locate(ctx: ToolContext, resolved: ResolvedPath) -> _Target:
    parts = resolved.parts
    for keep in range(len(parts), -1, -1):
        here = resolved.root.joinpath(*parts[:keep])
        candidate = ResolvedPath(real=here, root=resolved.root, display=ctx.roots.display(here))
        try:
            with ctx.roots.directory(candidate) as fd:
                return _Target(os.dup(fd), parts[keep:], resolved)
        except NotFound:
            continue
        except InvalidRequest:
            raise InvalidRequest(
                f"{candidate.display} is a file, so {resolved.display} cannot be a directory; "
                "choose another target",
                {"path": resolved.display},
            ) from None
    raise NotFound(
        f"no directory on the way to {resolved.display} exists", {"path": resolved.display}
    )


def _refuse(member: str, why: str) -> InvalidRequest:
    return InvalidRequest(
        f"tar member {member[:300]!r} is refused: {why}; nothing was written. Remove it from "
        "the archive and upload again.",
        {"member": member[:1000]},
    )


def _check_member(info: tarfile.TarInfo) -> list[str]:
    """The member's path components, or a refusal naming it."""
    name = info.name
    if "\0" in name:
        raise _refuse(name, "its name holds a NUL byte")
    if name.startswith("/"):
        raise _refuse(name, "its name is absolute")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refuse(name, "its name contains '..'")
    if not parts:
        if info.isdir():
            return []
        raise _refuse(name, "its name is empty")
    if any(p.startswith(TEMP_MARKER) for p in parts):
        raise _refuse(name, "its name is reserved for the daemon's temp files")
    if info.ischr() or info.isblk():
        raise _refuse(name, "it is a device")
    if info.isfifo():
        raise _refuse(name, "it is a FIFO")
    if info.islnk():
        raise _refuse(name, "it is a hard link (upload the file itself)")
    if not (info.isreg() or info.isdir() or info.issym()):
        raise _refuse(name, f"its type {info.type!r} is not a file, directory or symlink")
    if info.mode & (stat.S_ISUID | stat.S_ISGID):
        raise _refuse(name, "it has the setuid or setgid bit")
    if info.issym() and not link_stays_inside(name, info.linkname):
        raise _refuse(name, f"it is a symlink to {info.linkname[:200]!r}, outside the target")
    if len(parts) > _MAX_DEPTH:
        raise _refuse(name, f"it is more than {_MAX_DEPTH} directories deep")
    return parts


class _Extractor:
    """Checks each member against the live tree and writes it into the staging directory."""

    def __init__(self, ctx: ToolContext, target: _Target) -> None:
        self.ctx = ctx
        self.target = target
        self.owner = ctx.roots.new_owner
        self.stage_name = f"{TEMP_MARKER}{secrets.token_hex(6)}-archive"
        os.mkdir(self.stage_name, 0o700, dir_fd=target.anchor_fd)
        self.stage_fd = os.open(self.stage_name, DIR_FLAGS, dir_fd=target.anchor_fd)
        self.files = 0
        self.bytes = 0

    def close(self, *, remove: bool) -> None:
        os.close(self.stage_fd)
        if remove:
            shutil.rmtree(self.stage_name, dir_fd=self.target.anchor_fd, ignore_errors=True)

    # ------------------------------------------------------------ checks

    def _check_live(self, member: str, parts: list[str], info: tarfile.TarInfo) -> None:
        """The tree as it is: no member through a symlink or a file, no type clash."""
        path = [*self.target.prefix, *parts]
        fd = os.dup(self.target.anchor_fd)
        try:
            for i, part in enumerate(path):
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    return
                last = i == len(path) - 1
                if last:
                    if stat.S_ISDIR(st.st_mode) != info.isdir() or not (
                        stat.S_ISDIR(st.st_mode)
                        or stat.S_ISREG(st.st_mode)
                        or stat.S_ISLNK(st.st_mode)
                    ):
                        raise _refuse(member, "the tree has something of another type there")
                    if stat.S_ISREG(st.st_mode) and info.isreg():
                        try:
                            refuse_read_only(st, member)
                        except AirlockError as exc:
                            exc.details["member"] = member[:1000]
                            raise
                    return
                if not stat.S_ISDIR(st.st_mode):
                    kind = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a directory"
                    raise _refuse(member, f"{'/'.join(path[: i + 1])} in the tree is {kind}")
                nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = nxt
        finally:
            os.close(fd)

    # ------------------------------------------------------------ staging

    def _own(self, name: str, dir_fd: int) -> None:
        if self.owner is not None:
            os.chown(name, *self.owner, dir_fd=dir_fd, follow_symlinks=False)

    def _stage_dir(self, member: str, parts: list[str]) -> int:
        """An fd of ``parts`` inside the staging tree, made as needed (never through a link)."""

        def step(fd: int, part: str) -> int:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
                self._own(part, fd)
            except FileExistsError:
                pass
            try:
                return os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError:
                raise _refuse(
                    member,
                    f"it goes through {part!r}, which the archive made a file or symlink",
                ) from None

        return descend(self.stage_fd, parts, step)

    def add(self, tf: tarfile.TarFile, info: tarfile.TarInfo) -> None:
        parts = _check_member(info)
        member = info.name
        self._check_live(member, parts, info)
        if info.isdir():
            fd = self._stage_dir(member, [*self.target.prefix, *parts])
            try:
                os.fchmod(fd, (info.mode & 0o777) | 0o700)
            finally:
                os.close(fd)
            return
        fd = self._stage_dir(member, [*self.target.prefix, *parts[:-1]])
        name = parts[-1]
        try:
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            if st is not None:
                if stat.S_ISDIR(st.st_mode):
                    raise _refuse(member, "the archive also has a directory of that name")
                os.unlink(name, dir_fd=fd)  # a later member of the same name wins, as in tar
            if info.issym():
                os.symlink(info.linkname, name, dir_fd=fd)
                self._own(name, fd)
                return
            source = tf.extractfile(info)
            assert source is not None
            out = os.open(name, _FILE_FLAGS, 0o600, dir_fd=fd)
            try:
                while chunk := source.read(_COPY):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(out, view) :]
                if self.owner is not None:
                    os.fchown(out, *self.owner)
                os.fchmod(out, info.mode & 0o777)
                os.utime(out, (info.mtime, info.mtime))
            finally:
                os.close(out)
            self.files += 1
            self.bytes += info.size
        finally:
            os.close(fd)

    # ------------------------------------------------------------ publish

    def publish(self) -> None:
        """Move the staging tree into the live one: whole directories where none exists."""
        for entry in walk(
            Path("."),  # unused: the walk starts from the staging fd
            "",
            max_depth=None,
            include_hidden=True,
            ignore=None,
            start_fd=self.stage_fd,
            skip_git=False,
        ):
            parent, _, name = entry.rel.rpartition("/")
            src = open_below(self.stage_fd, parent)
            try:
                dst = open_below(self.target.anchor_fd, parent)
                try:
                    if entry.kind == "dir":
                        try:
                            st = os.stat(name, dir_fd=dst, follow_symlinks=False)
                        except FileNotFoundError:
                            st = None
                        if st is not None and stat.S_ISDIR(st.st_mode):
                            continue  # merge: its entries come next
                    os.rename(name, name, src_dir_fd=src, dst_dir_fd=dst)
                    os.fsync(dst)
                finally:
                    os.close(dst)
            finally:
                os.close(src)


def extract(ctx: ToolContext, resolved: ResolvedPath, body: IO[bytes]) -> dict[str, Any]:
    target = _locate(ctx, resolved)
    try:
        extractor = _Extractor(ctx, target)
        try:
            with tarfile.open(fileobj=body, mode="r|*", bufsize=_COPY) as tf:
                for info in tf:
                    extractor.add(tf, info)
                    forget_members(tf)
            extractor.publish()
        except tarfile.TarError as exc:
            extractor.close(remove=True)
            raise InvalidRequest(
                f"the body is not a valid tar archive ({exc}); nothing was written. Send a "
                "tar (optionally gzip, bzip2 or xz compressed).",
            ) from None
        except BaseException:
            extractor.close(remove=True)
            raise
        extractor.close(remove=True)
        return {"path": resolved.display, "files": extractor.files, "bytes": extractor.bytes}
    finally:
        os.close(target.anchor_fd)


async def put_archive(request: web.Request, ws: Workspace, scope: Scope) -> web.Response:
    need_write(scope, "PUT /v1/archive")
    path, root = query_path(request)
    ctx = ws.ctx
    resolved = resolve_target(ctx, path, root, "write", generated=False)
    body = BodyReader(request, asyncio.get_running_loop())
    async with ctx.locks.hold([resolved.real]):
        work = asyncio.ensure_future(asyncio.to_thread(extract, ctx, resolved, body))  # type: ignore[arg-type]
        try:
            result = await asyncio.shield(work)
        except BaseException:
            body.closed = True
            await asyncio.wait([work])
            raise
    return web.json_response(result)
