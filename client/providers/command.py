"""A provider that runs an operator command (e.g. ``gh auth token``).

The command's standard output, stripped, is the token. It runs without a shell,
with a timeout, and its output is never put into an error message (it is the
secret); only the exit status and the last line of stderr are reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import shlex
from collections.abc import Mapping, Sequence

from .base import IssuedToken
from .errors import TokenRequestFailedError, TokenRequestRejectedError


class CommandTokenProvider:
    """Runs ``argv`` for each request, or once per ``cache_s`` seconds when given."""

    def __init__(
        self,
        argv: Sequence[str] | str,
        *,
        timeout_s: float = 30.0,
        cache_s: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(argv, str):
            argv = shlex.split(argv)  # "gh auth token" as an operator would type it
        if not argv:
            raise ValueError("CommandTokenProvider needs a command")
        self._argv = list(argv)
        self._timeout_s = timeout_s
        self._cache_s = cache_s
        self._env = dict(env) if env is not None else None
        self._cached: tuple[float, IssuedToken] | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"CommandTokenProvider(argv={self._argv!r})"

    async def get_token(
        self,
        repositories: Sequence[str] = (),
        permissions: Mapping[str, str] | None = None,
    ) -> IssuedToken:
        async with self._lock:
            loop = asyncio.get_running_loop()
            if self._cached is not None and self._cache_s is not None:
                fetched, tok = self._cached
                if loop.time() - fetched < self._cache_s:
                    return IssuedToken(tok.token, tok.expires_at, tuple(repositories))
            token = await self._run()
            expires = (
                dt.datetime.now(dt.UTC) + dt.timedelta(seconds=self._cache_s)
                if self._cache_s is not None
                else None
            )
            issued = IssuedToken(token, expires, tuple(repositories))
            self._cached = (loop.time(), issued)
            return issued

    async def _run(self) -> str:
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self._env,
            )
        except OSError as exc:
            raise TokenRequestFailedError(
                f"token command {self._argv[0]!r} could not be started: {exc.strerror}", cause=exc
            ) from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self._timeout_s)
        except TimeoutError as exc:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise TokenRequestFailedError(
                f"token command {self._argv[0]!r} timed out after {self._timeout_s:g}s", cause=exc
            ) from exc
        if proc.returncode != 0:
            lines = err.decode("utf-8", "replace").strip().splitlines()
            last = lines[-1][:200] if lines else ""
            raise TokenRequestRejectedError(
                f"token command {self._argv[0]!r} exited with status {proc.returncode}"
                + (f": {last}" if last else ""),
                status=proc.returncode,
            )
        token = out.decode("utf-8", "replace").strip()
        if not token or any(c.isspace() for c in token):
            raise TokenRequestRejectedError(
                f"token command {self._argv[0]!r} did not print exactly one token"
            )
        return token
