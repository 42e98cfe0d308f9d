"""``PUT``/``GET /v1/files``: one file of any size, streamed, in constant memory.

``PUT`` streams the body into a temp file beside the target (the atomic
writer's own temp file, under a light crash journal so a restart sweeps it),
hashing as it goes, then publishes it with the atomic writer under the file's
lock: an existing file keeps its mode and owner (a read-only one is refused),
a new one gets ``X-Airlock-Mode`` (else 0644 less the umask) and the owner of
files the tools create. ``If-Match: "<sha256>"`` is checked under that lock,
right before the rename; when it no longer holds the answer is 412
``stale_write`` and nothing changed. Missing directories are created.

``GET`` opens the file through the resolver (regular files only: a directory
is ``is_directory``, a FIFO or device ``invalid_request``), answers its sha256
as ``ETag`` and streams it with ``sendfile`` from that same descriptor;
``Range: bytes=a-b`` (one range) answers 206.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import stat
from dataclasses import dataclass

from aiohttp import web

from ..auth import Scope
from ..commit.journal import Journal, journal_root
from ..context import ToolContext
from ..errors import InvalidRequest, IsDirectory, NotFound
from ..fsio import PlannedWrite, discard_temp, open_temp, publish_temp, refuse_read_only
from ..paths import Anchor, ResolvedPath, check_regular
from ..workspace import Workspace
from .common import (
    HASH_CHUNK,
    PreconditionFailed,
    RangeNotSatisfiable,
    fd_sha256,
    need_write,
    parse_if_match,
    query_path,
    resolve_target,
)

OCTET = "application/octet-stream"
BODY_IDLE_S = 60.0  # an upload that sends nothing for this long is abandoned
# Bytes handed to the threads at a time (two batches in memory at most). Measured on 2
# cores, quiet: 1 MiB gave 0.51-0.56x of a bare aiohttp handler, 4 MiB 0.39-0.48x (the
# joined batch and both threads reading it no longer stay in cache), 256 KiB 0.44x.
_BATCH = 1 << 20
_MODE = re.compile(r"0?o?([0-7]{3,4})")
_RANGE = re.compile(r"bytes=(\d*)-(\d*)")


# ---------------------------------------------------------------- GET


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """``(start, stop)`` of one ``Range: bytes=a-b`` (stop exclusive); None for the whole file."""
    if header is None:
        return None
    match = _RANGE.fullmatch(header.strip())
    if match is None or not (match.group(1) or match.group(2)):
        raise InvalidRequest(
            f"Range {header[:100]!r} is not one byte range; send Range: bytes=START-END "
            "(one range; bytes=START- or bytes=-SUFFIX also work)",
            {"header": "Range"},
        )
    first, last = match.group(1), match.group(2)
    if not first:
        start, stop = max(0, size - int(last)), size
    else:
        start = int(first)
        stop = min(size, int(last) + 1) if last else size
    if start >= size or stop <= start:
        raise RangeNotSatisfiable(
            f"Range {header[:100]!r} is outside the file ({size} bytes); ask for bytes "
            f"0-{max(0, size - 1)} at most",
            {"size": size},
        )
    return start, stop


async def get_file(request: web.Request, ws: Workspace, scope: Scope) -> web.StreamResponse:
    del scope  # read scope is enough
    path, root = query_path(request)
    ctx = ws.ctx
    resolved = resolve_target(ctx, path, root, "read")
    fd, st = await asyncio.to_thread(ctx.roots.open_file, resolved)
    try:
        etag = await asyncio.to_thread(fd_sha256, fd, st)
        span = parse_range(request.headers.get("Range"), st.st_size)
        start, stop = span if span is not None else (0, st.st_size)
        headers = {
            "Content-Type": OCTET,
            "ETag": f'"{etag}"',
            "Accept-Ranges": "bytes",
            "Content-Length": str(stop - start),
            "Cache-Control": "no-store",
        }
        if span is not None:
            headers["Content-Range"] = f"bytes {start}-{stop - 1}/{st.st_size}"
        response = web.StreamResponse(status=206 if span is not None else 200, headers=headers)
        await send_fd(request, response, fd, start, stop - start)
        return response
    finally:
        os.close(fd)


async def send_fd(
    request: web.Request, response: web.StreamResponse, fd: int, offset: int, count: int
) -> None:
    """Headers, then ``count`` bytes of ``fd`` from ``offset`` (``sendfile``; reads as a fallback)."""
    await response.prepare(request)
    transport = request.transport
    if transport is None:
        raise ConnectionResetError("the client went away")
    if count:
        with open(fd, "rb", closefd=False) as fobj:  # noqa: ASYNC230 (wraps an open fd)
            try:
                await asyncio.get_running_loop().sendfile(transport, fobj, offset, count)
            except NotImplementedError:
                sent = 0
                while sent < count:
                    chunk = await asyncio.to_thread(
                        os.pread, fd, min(HASH_CHUNK, count - sent), offset + sent
                    )
                    if not chunk:
                        break
                    await response.write(chunk)
                    sent += len(chunk)
    await response.write_eof()


# ---------------------------------------------------------------- PUT


def parse_mode(request: web.Request) -> int | None:
    raw = request.headers.get("X-Airlock-Mode")
    if raw is None:
        return None
    match = _MODE.fullmatch(raw.strip())
    mode = int(match.group(1), 8) if match else -1
    if not 0 <= mode <= 0o777:
        raise InvalidRequest(
            f"X-Airlock-Mode {raw[:40]!r} is not a permission mode; send octal permission bits "
            "such as 0644 or 0755 (setuid, setgid and sticky bits are not accepted)",
            {"header": "X-Airlock-Mode"},
        )
    return mode


@dataclass
class Staged:
    """A temp file being filled beside the target, and what publishing it needs."""

    anchor: Anchor  # owns a dup of the directory fd
    tmp: str
    fd: int
    journal: Journal
    sha: hashlib._Hash
    size: int = 0

    def write(self, data: bytes) -> None:
        """Append ``data`` (one large buffer: the GIL is let go for the whole write)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)

    def digest(self, data: bytes) -> None:
        """Hash ``data``, beside :meth:`write` (hashlib lets go of the GIL on large buffers)."""
        self.sha.update(data)

    def abandon(self) -> None:
        if self.fd >= 0:
            discard_temp(self.anchor.dir_fd, self.tmp, self.fd)
            self.fd = -1
        self.journal.close()
        os.close(self.anchor.dir_fd)


def _refuse_existing(st: os.stat_result | None, display: str) -> None:
    """Early refusals, before the body is read: a directory, a special file, a read-only file."""
    if st is None:
        return
    if stat.S_ISLNK(st.st_mode):
        raise InvalidRequest(
            f"{display} is a symbolic link; upload to the file it points to", {"path": display}
        )
    check_regular(st, display)
    refuse_read_only(st, display)


def stage(ctx: ToolContext, resolved: ResolvedPath) -> Staged:
    with ctx.roots.parent(resolved, create_dirs=True) as anchor:
        if anchor.name == ".":
            raise IsDirectory(
                f"{resolved.display} is a directory; upload to a file path",
                {"path": resolved.display},
            )
        _refuse_existing(anchor.lstat(), resolved.display)
        dir_fd = os.dup(anchor.dir_fd)
    own = Anchor(dir_fd, anchor.name, anchor.display)
    try:
        journal = Journal.begin(
            journal_root(ctx.config.state, ctx.roots.workspace),
            [PlannedWrite(resolved, before=None, after=None, display=resolved.display)],
            created_dirs=[],
            allowed_roots=(),
        )
    except BaseException:
        os.close(dir_fd)
        raise
    try:
        tmp, fd = open_temp(dir_fd, anchor.name)
    except BaseException:
        journal.close()
        os.close(dir_fd)
        raise
    return Staged(own, tmp, fd, journal, hashlib.sha256())


def publish(
    staged: Staged, expected: str | None, mode: int | None, owner: tuple[int, int] | None
) -> None:
    """Check ``If-Match`` against the file now, then the atomic writer's publish step."""
    anchor = staged.anchor
    current = anchor.lstat()
    _refuse_existing(current, anchor.display)
    if expected is not None:
        now = _current_sha(anchor) if current is not None else None
        if now != expected:
            raise PreconditionFailed(
                f"{anchor.display} "
                + ("does not exist" if now is None else f"has sha256 {now}")
                + f", not {expected} (If-Match); download it again and retry. Nothing was "
                "written.",
                {"path": anchor.display, "sha256": now},
            )
    fd, staged.fd = staged.fd, -1
    publish_temp(anchor, staged.tmp, fd, mode=mode, owner=owner, exclusive=False)


def _current_sha(anchor: Anchor) -> str | None:
    try:
        fd, st = anchor.open_regular()
    except NotFound:
        return None
    try:
        return fd_sha256(fd, st)
    finally:
        os.close(fd)


async def _next_chunk(request: web.Request) -> bytes:
    try:
        async with asyncio.timeout(BODY_IDLE_S):
            data, _end = await request.content.readchunk()
            return data
    except TimeoutError:
        raise InvalidRequest(
            f"the upload sent nothing for {BODY_IDLE_S:g} s and was abandoned; nothing was "
            "written. Send the body without pauses."
        ) from None


async def _settle(inflight: list[asyncio.Future[None]]) -> None:
    """Wait for both threads of a batch (never leaving one running), then raise what failed."""
    if inflight:
        await asyncio.wait(inflight)
        for future in inflight:
            future.result()


async def put_file(request: web.Request, ws: Workspace, scope: Scope) -> web.Response:
    need_write(scope, "PUT /v1/files")
    path, root = query_path(request)
    expected = parse_if_match(request)
    mode = parse_mode(request)
    ctx = ws.ctx
    resolved = resolve_target(ctx, path, root, "write")
    staged = await asyncio.to_thread(stage, ctx, resolved)
    # The previous batch's write and hash, each on a worker thread, while the next one is read.
    inflight: list[asyncio.Future[None]] = []
    try:
        batch: list[bytes] = []
        batched = 0
        while True:
            chunk = await _next_chunk(request)
            if chunk:
                batch.append(chunk)
                batched += len(chunk)
            if batched >= _BATCH or (not chunk and batch):
                await _settle(inflight)
                # One buffer: two threads each make one GIL-free call on it, where many small
                # chunks would have them fight the loop for the GIL once per chunk.
                data = b"".join(batch)
                inflight = [
                    asyncio.ensure_future(asyncio.to_thread(staged.write, data)),
                    asyncio.ensure_future(asyncio.to_thread(staged.digest, data)),
                ]
                batch, batched = [], 0
            if not chunk:
                break
        await _settle(inflight)
        inflight = []
        async with ctx.locks.hold([resolved.real]):
            await asyncio.to_thread(publish, staged, expected, mode, ctx.roots.new_owner)
    finally:
        if inflight:  # a write still running on its thread owns the fd until done
            await asyncio.wait(inflight)
        # Off the loop (unlinking a big temp file frees its blocks), and run to its end.
        await asyncio.wait([asyncio.ensure_future(asyncio.to_thread(staged.abandon))])
    return web.json_response(
        {"path": resolved.display, "bytes": staged.size, "sha256": staged.sha.hexdigest()}
    )
