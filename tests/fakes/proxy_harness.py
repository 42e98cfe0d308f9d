"""Run the real ``airlock-proxy`` as a subprocess for tests.

Usage (async)::

    async with running_proxy(tmp_path, allow=["api.github.com"],
                             resolve=[f"api.github.com:443:127.0.0.1:{up.port}"],
                             upstream_ca=ca.ca_path) as proxy:
        async with proxy.client() as pc:
            session = await pc.create_session(allow=["api.github.com"])
        env = proxy.client_env(session)   # HTTPS_PROXY + CA variables for curl/git/python

or synchronously with :func:`proxy_process` (for module-scoped fixtures).

The proxy listens on a free 127.0.0.1 port, its control API on a Unix socket in
a short temp dir (paths must stay < 108 bytes), its state dir and logs under
``tmp_dir``. Start-up waits for ``GET /v1/health``; exit terminates the process
(SIGTERM, then SIGKILL) and removes the socket dir.

Handle attributes: ``port``, ``proxy_host``, ``control`` (string for
:class:`airlock.client.proxy.ProxyClient`), ``ca_path`` (the proxy CA PEM),
``state_dir``, ``audit_log``, ``log_path``, ``process``, ``control_token``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from airlock.client.proxy import ProxyClient
from airlock.proxy.protocol import SessionInfo
from tests.fakes.net import free_port
from tests.fakes.wait import wait_until, wait_until_sync

AuditPredicate = Callable[[dict[str, Any]], object]

PROXY_BIN = Path(sys.executable).with_name("airlock-proxy")


def _health(control: str, token: str | None) -> bool:
    request = b"GET /v1/health HTTP/1.0\r\nHost: airlock\r\n"
    if token:
        request += f"Authorization: Bearer {token}\r\n".encode()
    request += b"\r\n"
    try:
        if control.startswith("unix:"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(1)
            s.connect(control[len("unix:") :])
        else:
            host, _, port = control[len("tcp://") :].rpartition(":")
            s = socket.create_connection((host, int(port)), timeout=1)
        with s:
            s.sendall(request)
            return s.recv(64).split(b" ")[1:2] == [b"200"]
    except (OSError, IndexError):
        return False


@dataclass
class ProxyProcess:
    """One airlock-proxy subprocess and where it keeps everything."""

    tmp_dir: Path
    intercept: Sequence[str] | None = None
    allow: Sequence[str] = ()
    resolve: Sequence[str] = ()
    upstream_ca: Path | None = None
    store: str = "memory"
    control_tcp: bool = False
    extra_args: Sequence[str] = ()
    port: int = 0
    control_port: int = 0
    proxy_host: str = "127.0.0.1"
    control: str = ""
    control_token: str | None = None
    state_dir: Path = field(init=False)
    audit_log: Path = field(init=False)
    log_path: Path = field(init=False)
    process: subprocess.Popen[bytes] | None = None
    _sock_dir: Path | None = None

    def __post_init__(self) -> None:
        self.tmp_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = self.tmp_dir / "proxy-state"
        self.audit_log = self.tmp_dir / "proxy-audit.log"
        self.log_path = self.tmp_dir / "proxy.log"

    @property
    def ca_path(self) -> Path:
        return self.state_dir / "ca.pem"

    @property
    def address(self) -> str:
        return f"{self.proxy_host}:{self.port}"

    def argv(self) -> list[str]:
        argv = [
            str(PROXY_BIN),
            "--listen", f"{self.proxy_host}:{self.port}",
            "--control", self.control,
            "--state-dir", str(self.state_dir),
            "--store", self.store,
            "--audit-log", str(self.audit_log),
        ]  # fmt: skip
        if self.control_token:
            token_file = self.tmp_dir / "control-token"
            token_file.write_text(self.control_token)
            token_file.chmod(0o600)
            argv += ["--control-token-file", str(token_file)]
        for host in self.intercept or []:
            argv += ["--intercept", host]
        for pattern in self.allow:
            argv += ["--allow", pattern]
        for entry in self.resolve:
            argv += ["--resolve", entry]
        if self.upstream_ca is not None:
            argv += ["--upstream-ca", str(self.upstream_ca)]
        if self.store != "memory" and not {"--store-key-file", "--store-plaintext"} & set(
            self.extra_args
        ):
            # Redis values are sealed; replicas of one Redis share a key.
            key = hashlib.sha256(f"airlock-test-store-key:{self.store}".encode()).digest()
            key_file = self.tmp_dir / "store-key"
            key_file.write_text(base64.b64encode(key).decode() + "\n")
            key_file.chmod(0o600)
            argv += ["--store-key-file", str(key_file)]
        return argv + list(self.extra_args)

    def start(self, timeout_s: float = 30.0) -> ProxyProcess:
        self.port = self.port or free_port()
        if self.control_tcp:
            self.control_port = self.control_port or free_port()
            self.control = f"tcp://127.0.0.1:{self.control_port}"
            self.control_token = self.control_token or os.urandom(16).hex()
        else:
            self._sock_dir = Path(tempfile.mkdtemp(prefix="al-"))
            self.control = f"unix:{self._sock_dir / 'ctl.sock'}"
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while not _health(self.control, self.control_token):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"airlock-proxy did not become healthy; log:\n{self.log_path.read_text()}"
                )
            time.sleep(0.05)
        # The proxy port is bound before the control API; make sure anyway.
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection((self.proxy_host, self.port), timeout=1),
            ):
                break
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("airlock-proxy port not accepting connections")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        proc = self.process
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if self._sock_dir is not None:
            shutil.rmtree(self._sock_dir, ignore_errors=True)
            self._sock_dir = None

    def client(self) -> ProxyClient:
        return ProxyClient(self.control, token=self.control_token)

    def proxy_url(self, session: SessionInfo) -> str:
        """The session's proxy URL, pointed at this process's real address."""
        parts = urlsplit(session.proxy_url)
        return f"http://{parts.username}:{parts.password}@{self.address}"

    def client_env(self, session: SessionInfo, **extra: str) -> dict[str, str]:
        """Environment of a sandboxed program: proxy credentials, proxy CA trusted."""
        url = self.proxy_url(session)
        env = {
            k: v
            for k, v in os.environ.items()
            if k.lower() not in {"https_proxy", "http_proxy", "all_proxy", "no_proxy"}
        }
        ca = str(self.ca_path)
        env.update(
            HTTPS_PROXY=url,
            HTTP_PROXY=url,
            https_proxy=url,
            http_proxy=url,
            NO_PROXY="",
            SSL_CERT_FILE=ca,
            CURL_CA_BUNDLE=ca,
            GIT_SSL_CAINFO=ca,
            REQUESTS_CA_BUNDLE=ca,
            NODE_EXTRA_CA_CERTS=ca,
            GIT_TERMINAL_PROMPT="0",
            HOME=str(self.tmp_dir),
        )
        env.update(extra)
        return env

    def audit_events(self) -> list[dict[str, Any]]:
        """The audit lines written so far, parsed. The proxy flushes its audit log
        every 50 ms: wait for the line you expect with :meth:`wait_audit` or
        :meth:`await_audit` before asserting on lines of a just-finished request."""
        if not self.audit_log.exists():
            return []
        out: list[dict[str, Any]] = []
        for line in self.audit_log.read_text().splitlines():
            if line.strip():
                out.append(json.loads(line))
        return out

    def _audit_matches(self, predicate: AuditPredicate, count: int) -> list[dict[str, Any]]:
        events = self.audit_events()
        return events if sum(1 for e in events if predicate(e)) >= count else []

    def wait_audit(
        self, predicate: AuditPredicate, *, count: int = 1, what: str = "an audit line"
    ) -> list[dict[str, Any]]:
        """Block until ``count`` audit lines match ``predicate``; return every line."""
        return wait_until_sync(
            lambda: self._audit_matches(predicate, count), message=f"no {what} in the audit log"
        )

    async def await_audit(
        self, predicate: AuditPredicate, *, count: int = 1, what: str = "an audit line"
    ) -> list[dict[str, Any]]:
        """:meth:`wait_audit` for async tests (the event loop keeps running)."""
        return await wait_until(
            lambda: self._audit_matches(predicate, count), message=f"no {what} in the audit log"
        )

    def flush_audit(self) -> None:
        """Block until every audit line queued so far is on disk (sync tests only).

        The writer keeps order, so a marker session created and deleted now is a
        barrier: once its ``session_deleted`` line is written, so is every line
        queued before it."""

        async def marker() -> str:
            async with self.client() as client:
                info = await client.create_session(allow=["flush.invalid"], ttl_s=60)
                await client.delete_session(info.session_id)
                return info.session_id

        sid = asyncio.run(marker())
        self.wait_audit(
            lambda e: e["event"] == "session_deleted" and e.get("session") == sid,
            what="the flush marker's session_deleted",
        )

    def written_files(self) -> list[Path]:
        """Everything the proxy wrote, except the CA private key files."""
        files = [self.audit_log, self.log_path]
        for path in self.state_dir.rglob("*"):
            if path.is_file() and path.name not in {"ca.key", "mitmproxy-ca.pem"}:
                files.append(path)
        return [p for p in files if p.exists()]


@contextlib.contextmanager
def proxy_process(
    tmp_dir: Path, *, process: type[ProxyProcess] | None = None, **kwargs: Any
) -> Iterator[ProxyProcess]:
    """Start airlock-proxy (``process``: a :class:`ProxyProcess` subclass, if any), stop it after."""
    proc = (process or ProxyProcess)(tmp_dir, **kwargs).start()
    try:
        yield proc
    finally:
        proc.stop()


@contextlib.asynccontextmanager
async def running_proxy(
    tmp_dir: Path,
    *,
    intercept: Sequence[str] | None = None,
    allow: Sequence[str] = (),
    resolve: Sequence[str] = (),
    upstream_ca: Path | None = None,
    store: str = "memory",
    control_tcp: bool = False,
    extra_args: Sequence[str] = (),
) -> AsyncIterator[ProxyProcess]:
    """Start airlock-proxy, wait until healthy, yield its handle, stop it."""
    proc = ProxyProcess(
        tmp_dir,
        intercept=intercept,
        allow=allow,
        resolve=resolve,
        upstream_ca=upstream_ca,
        store=store,
        control_tcp=control_tcp,
        extra_args=extra_args,
    )
    await asyncio.to_thread(proc.start)
    try:
        yield proc
    finally:
        await asyncio.to_thread(proc.stop)
