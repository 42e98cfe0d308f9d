"""Synchronous airlock clients, for scripts and frameworks without an event loop.

``airlock.client.sync.DaemonClient`` has every tool method of the async client
(same keyword signatures and docstrings, generated from ``TOOL_SPECS``) and
runs them on a private event loop in a background thread, so it also works
when called from inside someone else's running loop's thread-pool worker::

    from airlock.client.sync import DaemonClient

    with DaemonClient(socket="/run/airlock/airlockd.sock", token=tok) as client:
        print(client.file_read(path="README.md").content)

Errors are the async client's (:class:`~airlock.client.errors.ClientError`).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from airlock.daemon.protocol import ArchivePutOutput, FileTransferOutput, HealthOutput, ToolInfo

from . import daemon as _async
from ._methods import SyncToolMethods

T = TypeVar("T")

__all__ = ["DaemonClient"]


class _LoopThread:
    """One event loop running in a daemon thread; coroutines are submitted to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="airlock-sync-client", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=10)
        self.loop.close()


class DaemonClient(SyncToolMethods):
    """Blocking twin of :class:`airlock.client.daemon.DaemonClient` (same arguments)."""

    def __init__(self, socket: str | None = None, **kwargs: Any) -> None:
        self._client = _async.DaemonClient(socket, **kwargs)
        self._loop = _LoopThread()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and stop the background loop; idempotent."""
        if self._loop.loop.is_closed():
            return
        self._loop.run(self._client.aclose())
        self._loop.close()

    def health(self) -> HealthOutput:
        """The daemon's liveness, version, workspace and engines."""
        return self._loop.run(self._client.health())

    def tools(self) -> list[ToolInfo]:
        """The tool catalogue, for building model definitions."""
        return self._loop.run(self._client.tools())

    def call(
        self, name: str, args: dict[str, Any] | BaseModel, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Call any tool by name with a dict (or model) of its input."""
        return self._loop.run(self._client.call(name, args, timeout_s=timeout_s))

    def call_model(
        self, name: str, arguments: dict[str, Any] | str, *, timeout_s: float | None = None
    ) -> dict[str, Any]:
        """Call a tool with a model's arguments (see the async ``call_model``)."""
        return self._loop.run(self._client.call_model(name, arguments, timeout_s=timeout_s))

    # File transfer (the async client's, blocking); ``watch`` is async only.

    def upload(self, local: str | os.PathLike[str], remote: str, **kw: Any) -> FileTransferOutput:
        """Stream a local file into the sandbox (see the async ``upload``)."""
        return self._loop.run(self._client.upload(local, remote, **kw))

    def download(self, remote: str, local: str | os.PathLike[str], **kw: Any) -> FileTransferOutput:
        """Stream a sandbox file to a local path (see the async ``download``)."""
        return self._loop.run(self._client.download(remote, local, **kw))

    def upload_tree(
        self, local: str | os.PathLike[str], remote: str, **kw: Any
    ) -> ArchivePutOutput:
        """Send a local directory as a tree, all or nothing."""
        return self._loop.run(self._client.upload_tree(local, remote, **kw))

    def download_tree(self, remote: str, local: str | os.PathLike[str], **kw: Any) -> None:
        """Unpack a sandbox directory into a local one."""
        self._loop.run(self._client.download_tree(remote, local, **kw))

    def _tool(self, name: str, req: Any, kw: dict[str, Any]) -> Any:
        return self._loop.run(self._client._tool(name, req, kw))
