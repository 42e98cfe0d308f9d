"""The orchestrator's side of airlockd's streamed routes: file transfer and file watch.

:class:`TransferMethods` is mixed into :class:`~airlock.client.daemon.DaemonClient`:

- ``upload(local, remote)`` / ``download(remote, local)``: one file, streamed
  both ways in 1 MiB pieces (memory stays flat), the download checked against
  the daemon's ``ETag`` and moved into place only when complete;
- ``upload_tree`` / ``download_tree``: a directory as a tar stream, built and
  unpacked on a worker thread (unpacked with ``tarfile``'s ``data`` filter);
- ``watch(paths)``: an async iterator of :class:`WatchEvent`; as an async
  context manager it returns once the daemon's watches are in place.

Errors are the client's usual classes (``PathEscape``, ``StaleWrite``, ...).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tarfile
import tempfile
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any, Protocol

import aiohttp

from airlock.daemon.protocol import ArchivePutOutput, FileTransferOutput, WatchEvent, WatchInput

from ._closing import AsyncClosing
from .errors import CallTimeout, DaemonUnavailable, Internal, tool_error
from .ndjson import LineSplitter

CHUNK = 1 << 20


class _Client(Protocol):
    _base: str
    _connect: float

    @property
    def endpoint(self) -> str: ...

    def _http(self) -> aiohttp.ClientSession: ...


def _error(status: int, raw: bytes) -> Exception:
    try:
        err = json.loads(raw)["error"]
        return tool_error(err["code"], err["message"], err.get("details"))
    except (ValueError, KeyError, TypeError):
        return Internal(f"airlockd answered HTTP {status} without an error envelope")


def _params(path: str, root: str | None) -> dict[str, str]:
    return {"path": path} if root is None else {"path": path, "root": root}


@contextlib.asynccontextmanager
async def _request(
    client: _Client, method: str, route: str, **kw: Any
) -> AsyncIterator[aiohttp.ClientResponse]:
    timeout = aiohttp.ClientTimeout(total=None, connect=client._connect, sock_read=None)
    try:
        async with client._http().request(
            method, f"{client._base}{route}", timeout=timeout, **kw
        ) as resp:
            if resp.status >= 400:
                raise _error(resp.status, await resp.read())
            yield resp
    except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
        raise CallTimeout(f"airlockd at {client.endpoint} timed out on {method} {route}") from exc
    except aiohttp.ClientError as exc:
        raise DaemonUnavailable(
            f"airlockd at {client.endpoint} is unreachable or went away during {method} {route} "
            f"({type(exc).__name__}: {exc}); check that it runs"
        ) from exc


async def _file_chunks(path: Path) -> AsyncIterator[bytes]:
    handle = await asyncio.to_thread(open, path, "rb")
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK):
            yield chunk
    finally:
        handle.close()


class _Pipe:
    """Bytes from a worker thread to the event loop (or back), one bounded queue between."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue(maxsize=8)
        self.buffer = b""
        self.cancelled = threading.Event()

    # thread side, writing
    def write(self, data: bytes) -> int:
        if self.cancelled.is_set():
            raise ConnectionResetError("the transfer was abandoned")
        asyncio.run_coroutine_threadsafe(self.queue.put(bytes(data)), self.loop).result()
        return len(data)

    def flush(self) -> None:
        return None

    def end(self, error: BaseException | None = None) -> None:
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self.queue.put(error), self.loop).result()

    async def chunks(self) -> AsyncIterator[bytes]:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    # thread side, reading
    def read(self, size: int = -1) -> bytes:
        while not self.buffer:
            item = asyncio.run_coroutine_threadsafe(self.queue.get(), self.loop).result()
            if item is None or isinstance(item, BaseException):
                self.queue.put_nowait(item)  # every later read sees the end too
                return b""
            self.buffer = item
        n = len(self.buffer) if size is None or size < 0 else size
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data


def _pack(local: Path, out: IO[bytes]) -> None:
    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if not (info.isreg() or info.isdir() or info.issym()):
            return None  # FIFOs, devices: nothing to send
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(fileobj=out, mode="w|", bufsize=CHUNK, format=tarfile.PAX_FORMAT) as tf:
        for child in sorted(os.listdir(local)):
            tf.add(local / child, arcname=child, filter=keep)


def _unpack(source: IO[bytes], local: Path) -> None:
    local.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=source, mode="r|", bufsize=CHUNK) as tf:
        tf.extractall(local, filter="data")


class WatchStream(AsyncClosing):
    """``async with client.watch(...) as events`` (returns once watching) or ``async for``."""

    def __init__(self, client: _Client, body: dict[str, Any]) -> None:
        self._client = client
        self._body = body
        self._cm: contextlib.AbstractAsyncContextManager[aiohttp.ClientResponse] | None = None
        self._resp: aiohttp.ClientResponse | None = None
        self._splitter = LineSplitter()
        self._lines: list[bytes] = []

    async def open(self) -> WatchStream:
        if self._resp is None:
            self._cm = _request(self._client, "POST", "/v1/watch", json=self._body)
            self._resp = await self._cm.__aenter__()
        return self

    async def aclose(self) -> None:
        if self._cm is not None:
            cm, self._cm, self._resp = self._cm, None, None
            await cm.__aexit__(None, None, None)

    async def __aenter__(self) -> WatchStream:
        return await self.open()

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> WatchEvent:
        await self.open()
        assert self._resp is not None
        while not self._lines:
            try:
                chunk = await self._resp.content.readany()
            except aiohttp.ClientError as exc:
                raise DaemonUnavailable(f"the watch stream broke ({exc})") from exc
            if not chunk:
                await self.aclose()
                raise StopAsyncIteration
            self._lines = self._splitter.feed(chunk)
        return WatchEvent.model_validate_json(self._lines.pop(0))


class TransferMethods:
    """Mixed into ``DaemonClient`` (needs its ``_http``, ``_base``, ``_connect``, ``endpoint``)."""

    async def upload(
        self: _Client,
        local: str | os.PathLike[str],
        remote: str,
        *,
        root: str | None = None,
        mode: int | None = None,
        if_match: str | None = None,
    ) -> FileTransferOutput:
        """Stream a local file to ``remote`` (atomic; ``if_match``: only over this sha256)."""
        headers = {"Content-Type": "application/octet-stream"}
        if mode is not None:
            headers["X-Airlock-Mode"] = f"{mode:04o}"
        if if_match is not None:
            headers["If-Match"] = f'"{if_match}"'
        async with _request(
            self,
            "PUT",
            "/v1/files",
            params=_params(remote, root),
            data=_file_chunks(Path(local)),
            headers=headers,
        ) as resp:
            return FileTransferOutput.model_validate(await resp.json())

    async def download(
        self: _Client, remote: str, local: str | os.PathLike[str], *, root: str | None = None
    ) -> FileTransferOutput:
        """Stream ``remote`` into ``local`` (replaced only once complete and hash-checked)."""
        target = Path(local)
        fd, tmp = tempfile.mkstemp(prefix=".airlock-dl-", dir=target.parent or Path("."))
        digest = hashlib.sha256()
        size = 0
        try:
            with os.fdopen(fd, "wb") as out:
                async with _request(self, "GET", "/v1/files", params=_params(remote, root)) as resp:
                    etag = resp.headers.get("ETag", "").strip('"')
                    async for chunk in resp.content.iter_chunked(CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        await asyncio.to_thread(out.write, chunk)
            if etag and digest.hexdigest() != etag:
                raise Internal(
                    f"the download of {remote} does not match its ETag (sha256 {etag}); it "
                    "changed while being read, download it again"
                )
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        return FileTransferOutput(path=remote, bytes=size, sha256=digest.hexdigest())

    async def upload_tree(
        self: _Client, local: str | os.PathLike[str], remote: str, *, root: str | None = None
    ) -> ArchivePutOutput:
        """Send a local directory as a tar into ``remote`` (created as needed), all or nothing."""
        pipe = _Pipe(asyncio.get_running_loop())

        def produce() -> None:
            try:
                _pack(Path(local), pipe)  # type: ignore[arg-type]
            except BaseException as exc:
                pipe.end(exc)
            else:
                pipe.end()

        worker = asyncio.ensure_future(asyncio.to_thread(produce))
        try:
            async with _request(
                self,
                "PUT",
                "/v1/archive",
                params=_params(remote, root),
                data=pipe.chunks(),
                headers={"Content-Type": "application/x-tar"},
            ) as resp:
                return ArchivePutOutput.model_validate(await resp.json())
        finally:
            pipe.cancelled.set()
            while not worker.done():  # unblock a producer waiting on a full queue
                with contextlib.suppress(asyncio.QueueEmpty):
                    pipe.queue.get_nowait()
                await asyncio.sleep(0)

    async def download_tree(
        self: _Client, remote: str, local: str | os.PathLike[str], *, root: str | None = None
    ) -> None:
        """Unpack the remote directory's tar into ``local`` (``tarfile``'s ``data`` filter)."""
        pipe = _Pipe(asyncio.get_running_loop())
        worker = asyncio.ensure_future(asyncio.to_thread(_unpack, pipe, Path(local)))  # type: ignore[arg-type]
        try:
            async with _request(self, "GET", "/v1/archive", params=_params(remote, root)) as resp:
                async for chunk in resp.content.iter_chunked(CHUNK):
                    if worker.done():
                        break
                    await pipe.queue.put(chunk)
        except BaseException as exc:
            await pipe.queue.put(exc)
            await asyncio.wait([worker])
            raise
        await pipe.queue.put(None)
        await worker

    def watch(
        self: _Client,
        paths: list[str] | None = None,
        *,
        recursive: bool = True,
        include: list[str] | None = None,
        exclude: list[str] | None = None,
        ignore_files: bool = True,
    ) -> WatchStream:
        """File changes under ``paths`` as they happen (``POST /v1/watch``)."""
        body = WatchInput(
            paths=paths or ["."],
            recursive=recursive,
            include=include or [],
            exclude=exclude or [],
            ignore_files=ignore_files,
        ).model_dump(mode="json")
        return WatchStream(self, body)


__all__ = ["TransferMethods", "WatchStream"]
