"""The whole system in a real isolated topology (network namespaces, no Docker).

    sandbox ns:   airlockd (started by the sandbox image's entrypoint, which trusts
                  the proxy CA and drops to `nobody`); git, gh, gh-signed-commit run
                  here. Its only route is the /30 to the proxy namespace.
    proxy ns:     two airlock-proxy replicas and their Redis store; no forwarding.
    internet ns:  the local GitHub (TLS, git http-backend, REST, GraphQL), reached
                  by the proxies through --resolve.
    root ns:      the test, as the orchestrator (DaemonClient, ProxyClient,
                  GitHubShell over the Unix sockets; app tokens minted directly).

One agent turn is driven through the clients: clone, apply_patch, file_search,
diagnostics, gh-signed-commit, (one replica killed) gh pr create on the other
replica, git push. Then: the commit and PR exist; the sandbox cannot reach the
internet namespace directly; the real token is nowhere in the sandbox's files,
process environments, command outputs, or the proxies' logs and audit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from airlock.client.daemon import DaemonClient
from airlock.client.github.redact import secret_forms
from airlock.client.github.shell import GitHubShell
from airlock.client.providers import GitHubAppProvider
from airlock.client.proxy import ProxyClient, ProxyError
from airlock.client.sandboxes import DaemonSandbox
from airlock.proxy.protocol import SessionInfo
from tests.e2e.netns import Topology, can_create_namespaces, listen_in, topology
from tests.fakes.checkout import in_view
from tests.fakes.daemon_harness import RunningDaemon, running_daemon
from tests.fakes.github import FakeGitHub
from tests.fakes.net import free_port
from tests.fakes.processes import stop_process
from tests.fakes.proxy_harness import ProxyProcess
from tests.fakes.wait import pace, wait_until, wait_until_sync

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(240)]

REPO = "acme/widgets"
PERM = {"provider": "github", "repositories": [REPO], "access": "write"}
ENTRYPOINT = Path("deploy") / "docker" / "sandbox-entrypoint.sh"  # inside the shared view
NOBODY = 65534
FAKE_UPDATE = """#!/bin/sh
cat "$E2E_SYSTEM_ANCHORS" "$AIRLOCK_CA_ANCHOR_DIR"/*.crt > "$AIRLOCK_SYSTEM_BUNDLE"
"""
PATCH = """*** Begin Patch
*** Add File: widgets/src/feature.py
+\"\"\"The shiny feature.\"\"\"
+
+
+def shine(level: int) -> str:
+    return "shiny" * level
*** Update File: widgets/README.md
@@
-# widgets
+# widgets
+
+Now with a shiny feature.
*** End Patch
"""


def _sandbox_python() -> str:
    """A Python the sandbox user (nobody) may execute.

    The test's own interpreter can live under /root (pyenv), which nobody cannot
    traverse; the sandbox's commands then use the system Python, with the
    repository on PYTHONPATH for ``airlock.daemon.signed_commit`` (stdlib only).
    """
    for candidate in ("/usr/bin/python3", sys.executable):
        probe = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "sh", "-c", 'test -x "$1"', "sh", candidate],
            check=False,
        )  # fmt: skip
        if probe.returncode == 0:
            return candidate
    pytest.skip("no Python interpreter the unprivileged sandbox user can execute")


def _require_namespaces() -> None:
    for tool in ("gh", "git", "redis-server", "setpriv"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    reason = can_create_namespaces()
    if reason is not None:
        pytest.skip(f"network namespaces unavailable: {reason}")


class InternetGitHub(FakeGitHub):
    """The local GitHub with its TLS listeners inside the internet namespace.

    :meth:`FakeGitHub.start` is used as is; only the sites it creates are bound
    to sockets made in the namespace by :func:`listen_in` instead of 127.0.0.1.
    They listen on every address of the namespace: the proxies reach it on the
    proxy link, the orchestrator (app-token minting) on the root link, and the
    leaf names both addresses.
    """

    def __init__(self, directory: Path, *, topo: Topology) -> None:
        super().__init__(directory, org="acme")
        self.topo = topo
        self.leaf = self.ca.issue(
            "api.github.com", "github.com", topo.internet_addr, topo.internet_public_addr
        )

    async def start(self) -> None:
        ns = self.topo.internet_ns
        sockets = [await asyncio.to_thread(listen_in, ns, "0.0.0.0") for _ in range(2)]
        unused = iter(sockets)

        def site_in_netns(
            runner: web.BaseRunner,
            host: str,
            port: int,
            *,
            ssl_context: ssl.SSLContext | None = None,
        ) -> web.SockSite:
            assert host == "127.0.0.1", "FakeGitHub.start changed: review InternetGitHub"
            return web.SockSite(runner, next(unused), ssl_context=ssl_context)

        # Only this coroutine creates sites while the patch is active (fixture set-up).
        with mock.patch.object(web, "TCPSite", site_in_netns):
            await super().start()
        assert next(unused, None) is None, "FakeGitHub.start changed: review InternetGitHub"
        assert {self.api_port, self.git_port} == {s.getsockname()[1] for s in sockets}

    @property
    def resolve(self) -> list[str]:
        """The proxies' --resolve: the real names to the internet namespace."""
        address = self.topo.internet_addr
        return [
            f"api.github.com:443:{address}:{self.api_port}",
            f"github.com:443:{address}:{self.git_port}",
        ]

    @property
    def public_api_url(self) -> str:
        """The API as the orchestrator (root namespace) reaches it."""
        return f"https://{self.topo.internet_public_addr}:{self.api_port}"


@dataclass
class NetnsProxy(ProxyProcess):
    """airlock-proxy run inside the proxy namespace.

    It listens on every address there: sandboxes reach it on the sandbox link,
    the harness's readiness check on the root link (``proxy_host``). Session
    proxy URLs advertise the sandbox-side address.
    """

    netns: str = ""
    sandbox_side: str = ""

    def argv(self) -> list[str]:
        argv = super().argv()
        argv[argv.index("--listen") + 1] = f"0.0.0.0:{self.port}"
        argv += ["--advertise", f"{self.sandbox_side}:{self.port}"]
        return ["ip", "netns", "exec", self.netns, *argv]


@contextlib.contextmanager
def redis_in(topo: Topology, directory: Path) -> Iterator[str]:
    """redis-server in the proxy namespace on its root-link address, with a password.

    No persistence. The password also keeps Redis's protected mode from refusing
    clients that are not on loopback (the proxies connect over the namespace's
    address, as replicas on other hosts would).
    """
    directory.mkdir()
    port = 6379
    password = secrets.token_hex(16)
    proc = subprocess.Popen(
        [*topo.exec_prefix(topo.proxy_ns), "redis-server",
         "--bind", topo.proxy_admin_addr, "--port", str(port), "--requirepass", password,
         "--save", "", "--appendonly", "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ping = f"AUTH {password}\r\nPING\r\n".encode()
    try:

        def answers() -> bool:
            if proc.poll() is not None:
                raise RuntimeError("redis-server did not start in the proxy namespace")
            return _redis_answers(topo.proxy_admin_addr, port, ping)

        try:
            wait_until_sync(answers, timeout=15)
        except AssertionError:
            raise RuntimeError("redis-server did not start in the proxy namespace") from None
        yield f"redis://:{password}@{topo.proxy_admin_addr}:{port}/0"
    finally:
        stop_process(proc)


def _redis_answers(host: str, port: int, ping: bytes) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1) as conn:
            conn.sendall(ping)
            reply = b""
            while b"PONG" not in reply and len(reply) < 64:
                chunk = conn.recv(64)
                if not chunk:
                    break
                reply += chunk
            return reply.startswith(b"+OK") and b"+PONG" in reply
    except OSError:
        return False


@dataclass
class EnvSpy:
    """Samples the environment and argv of every process in the sandbox namespace."""

    netns: str
    texts: set[str] = field(default_factory=set)
    pids_seen: set[int] = field(default_factory=set)

    def _inode(self) -> int:
        return os.stat(f"/run/netns/{self.netns}").st_ino

    def sample(self) -> None:
        target = self._inode()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                if os.stat(f"/proc/{entry.name}/ns/net").st_ino != target:
                    continue
                for part in ("environ", "cmdline"):
                    with open(f"/proc/{entry.name}/{part}", "rb") as fh:
                        self.texts.add(fh.read().decode(errors="replace"))
                self.pids_seen.add(int(entry.name))
            except OSError:
                continue

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await asyncio.to_thread(self.sample)
            await pace(0.01)


@dataclass
class World:
    topo: Topology
    base: Path
    workspace: Path
    github: InternetGitHub
    proxies: list[ProxyProcess]
    daemon: RunningDaemon
    client: DaemonClient
    session: SessionInfo
    provider: GitHubAppProvider
    python: str
    repo: Path  # the checkout, traversable by the sandbox user
    outputs: list[str] = field(default_factory=list)

    def shell(self, replica: int, proxy_client: ProxyClient) -> GitHubShell:
        parts = urlsplit(self.session.proxy_url)
        url = (
            f"http://{parts.username}:{parts.password}@"
            f"{self.topo.proxy_addr}:{self.proxies[replica].port}"
        )
        return GitHubShell(
            org="acme",
            provider=self.provider,
            proxy=proxy_client,
            session=self.session,
            sandbox=DaemonSandbox(self.client),
            workspace=str(self.workspace),
            executables={"gh-signed-commit": [self.python, "-m", "airlock.daemon.signed_commit"]},
            config_dir_base=str(self.base / "cfg"),
            extra_env={
                "HTTPS_PROXY": url,
                "HTTP_PROXY": url,
                "https_proxy": url,
                "http_proxy": url,
                "NO_PROXY": "",
                "no_proxy": "",
                "PYTHONPATH": str(self.repo),
            },
            timeout_s=90,
        )

    def call(self, command: str, **over: Any) -> dict[str, Any]:
        return {"command": command, "permissions": [PERM], "description": "e2e", **over}

    async def sandbox_exec(self, *argv: str, cwd: str = ".") -> Any:
        out = await self.client.exec(argv=list(argv), cwd=cwd, timeout_s=60)
        self.outputs += [out.stdout, out.stderr]
        return out


def _nobody_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    os.chown(path, NOBODY, NOBODY)
    return path


def _entrypoint_env(base: Path, proxy_ca: Path, socket_dir: Path, repo: Path) -> dict[str, str]:
    anchors = base / "system-anchors.pem"
    anchors.write_text(Path(ssl.get_default_verify_paths().openssl_cafile or "").read_text())
    bundle = base / "ssl" / "ca-bundle.pem"
    bundle.parent.mkdir(mode=0o755)
    shutil.copy(anchors, bundle)
    update = base / "update-ca"
    update.write_text(FAKE_UPDATE)
    update.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    for var in ("SSL_CERT_FILE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        env.pop(var, None)
    env.update(
        AIRLOCK_PROXY_CA=str(proxy_ca),
        AIRLOCK_CA_ANCHOR_DIR=str(base / "anchors"),
        AIRLOCK_SYSTEM_BUNDLE=str(bundle),
        AIRLOCK_UPDATE_CA_CERTIFICATES=str(update),
        AIRLOCK_SOCKET_DIR=str(socket_dir),
        AIRLOCK_RUN_AS="nobody",
        E2E_SYSTEM_ANCHORS=str(anchors),
        TMPDIR=str(_nobody_dir(base / "tmp")),
        # The venv's editable install names the checkout's own path; nobody imports the view.
        PYTHONPATH=str(repo),
        GIT_CONFIG_NOSYSTEM="1",
    )
    return env


def _start_proxy(
    tmp: Path, topo: Topology, github: InternetGitHub, redis_url: str, ca_from: Path | None
) -> ProxyProcess:
    proc = NetnsProxy(
        tmp,
        resolve=github.resolve,
        upstream_ca=github.ca_path,
        store=redis_url,
        proxy_host=topo.proxy_admin_addr,
        port=free_port(),
        netns=topo.proxy_ns,
        sandbox_side=topo.proxy_addr,
    )
    if ca_from is not None:
        # Replicas must present one CA: install the first replica's, as the
        # Kubernetes init container does from the airlock-proxy-ca Secret.
        proc.state_dir.mkdir(mode=0o700, parents=True)
        for name in ("ca.pem", "ca.key"):
            shutil.copy(ca_from / name, proc.state_dir / name)
            (proc.state_dir / name).chmod(0o600)
    return proc.start()


@contextlib.contextmanager
def _short_base() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="al-e2e-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
async def world(tmp_path: Path, shared_repo: Path) -> AsyncIterator[World]:
    _require_namespaces()
    async with contextlib.AsyncExitStack() as stack:
        topo = stack.enter_context(topology())
        base = stack.enter_context(_short_base())
        redis_url = stack.enter_context(redis_in(topo, base / "redis"))
        github = InternetGitHub(tmp_path / "github", topo=topo)
        await stack.enter_async_context(github)
        await github.create_repo(REPO)
        proxies: list[ProxyProcess] = []

        def stop_proxies() -> None:
            for proxy in proxies:
                proxy.stop()

        stack.callback(stop_proxies)
        proxies.append(
            await asyncio.to_thread(_start_proxy, tmp_path / "pa", topo, github, redis_url, None)
        )
        proxies.append(
            await asyncio.to_thread(
                _start_proxy, tmp_path / "pb", topo, github, redis_url, proxies[0].state_dir
            )
        )
        control = await stack.enter_async_context(proxies[0].client())
        session = await control.create_session(allow=["api.github.com", "github.com"], ttl_s=600)
        workspace = _nobody_dir(base / "ws")
        _nobody_dir(base / "cfg")
        socket_dir = base / "d"
        socket_dir.mkdir()
        daemon = await stack.enter_async_context(
            running_daemon(
                workspace,
                base_dir=socket_dir,
                command_prefix=[*topo.exec_prefix(topo.sandbox_ns), str(shared_repo / ENTRYPOINT)],
                interpreter=str(in_view(shared_repo, Path(sys.executable))),
                env=_entrypoint_env(base, proxies[0].ca_path, socket_dir, shared_repo),
            )
        )
        client = await stack.enter_async_context(daemon.client())
        ssl_ctx = github.ca.client_context()
        provider = GitHubAppProvider(
            github.app_id,
            github.app_private_key_pem,
            org="acme",
            api_url=github.public_api_url,
            ssl_context=ssl_ctx,
        )
        yield World(
            topo, base, workspace, github, proxies, daemon, client, session, provider,
            _sandbox_python(), shared_repo,
        )  # fmt: skip


def _assert_no_token(tokens: list[str], texts: list[str] | set[str], where: str) -> None:
    assert tokens, "expected at least one real token to look for"
    for token in tokens:
        for form in secret_forms(token):
            for text in texts:
                assert form not in text, f"a real token form leaked into {where}"


async def _rest(w: World, path: str) -> dict[str, Any]:
    """GET from the local GitHub's REST API as the orchestrator (root namespace) would."""
    token = w.github.issue_token([REPO])
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            w.github.public_api_url + path,
            headers={"Authorization": f"Bearer {token}"},
            ssl=w.github.ca.client_context(),
        ) as resp,
    ):
        assert resp.status == 200, await resp.text()
        data: dict[str, Any] = await resp.json()
        return data


def _files_under(*roots: Path) -> list[str]:
    texts = []
    for root in roots:
        for path in root.rglob("*"):
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    texts.append(path.read_bytes().decode(errors="replace"))
    return texts


async def test_isolated_topology_has_only_the_proxy_route() -> None:
    _require_namespaces()
    with topology() as topo:
        routes = topo.routes(topo.sandbox_ns)
        assert len(routes) == 1, routes
        assert routes[0].startswith(f"10.231.{topo.octet}.0/30 dev {topo.tag}a1 "), routes
        for ns in (topo.sandbox_ns, topo.proxy_ns, topo.internet_ns):
            assert not any(r.startswith("default") for r in topo.routes(ns)), ns
        forwarding = topo.run_in(topo.proxy_ns, ["cat", "/proc/sys/net/ipv4/ip_forward"])
        assert forwarding.stdout.strip() == "0"
        probe = (
            "import socket,sys\n"
            "try:\n socket.create_connection((sys.argv[1], 443), timeout=2)\n"
            "except OSError as e:\n print(e.errno)\n"
        )
        for target in (
            topo.internet_addr,
            topo.internet_public_addr,
            topo.proxy_admin_addr,
            topo.proxy_egress_addr,
            "1.1.1.1",
        ):
            out = topo.run_in(topo.sandbox_ns, [sys.executable, "-c", probe, target])
            assert out.stdout.strip() == "101", (target, out)  # ENETUNREACH
        # The one address it has a route to answers only where something listens.
        out = topo.run_in(topo.sandbox_ns, [sys.executable, "-c", probe, topo.proxy_addr])
        assert out.stdout.strip() == "111", out  # ECONNREFUSED


async def test_full_agent_turn_through_the_isolated_topology(world: World) -> None:
    w = world
    spy = EnvSpy(w.topo.sandbox_ns)
    stop = asyncio.Event()
    spy_task = asyncio.create_task(spy.run(stop))
    try:
        await _agent_turn(w)
    finally:
        stop.set()
        await spy_task

    # --- the results exist at the local GitHub ---------------------------------
    feature_head = await w.github.head_sha(REPO, "feature")
    assert feature_head is not None
    assert w.github.pull_numbers(REPO) == [1]
    pull = await _rest(w, f"/repos/{REPO}/pulls/1")
    assert pull["title"] == "Add the shiny feature"
    assert (pull["head"]["ref"], pull["base"]["ref"]) == ("feature", "main")
    assert pull["head"]["sha"] == feature_head
    assert len(w.github.verified_commits) == 1
    signed = next(iter(w.github.verified_commits))
    commit = await _rest(w, f"/repos/{REPO}/commits/{signed}")
    assert commit["commit"]["verification"]["verified"] is True
    log = await w.github.git(REPO, "log", "--format=%H %s", "feature")
    assert f"{signed} Add the shiny feature" in log
    assert log.split("\n")[0].startswith(feature_head), "the pushed commit is the branch head"
    show = await w.github.git(REPO, "show", f"{signed}:src/feature.py")
    assert "def shine" in show

    # --- the real token is nowhere in the sandbox or the proxies' output ---------
    tokens = [m.token for m in w.github.mints]
    assert all(r.token in tokens for r in w.github.requests if r.listener == "git" and r.token)
    _assert_no_token(tokens, w.outputs, "a command output")
    _assert_no_token(tokens, spy.texts, "a sandbox process environment or argv")
    assert any("GH_TOKEN=ghs_" in t for t in spy.texts), "the spy never saw a gh command"
    assert len(spy.pids_seen) > 3
    sandbox_files = _files_under(w.workspace, w.base / "d", w.base / "cfg", w.base / "tmp")
    assert len(sandbox_files) > 5
    _assert_no_token(tokens, sandbox_files, "a sandbox file")

    def swapped_hosts() -> set[object]:
        return {
            e.get("host") for p in w.proxies for e in p.audit_events() if e.get("event") == "swap"
        }

    await wait_until(
        lambda: swapped_hosts() >= {"api.github.com", "github.com"}, message="swap lines missing"
    )
    await w.proxies[1].await_audit(lambda e: e.get("event") == "swap", what="a swap on replica B")
    for proxy in w.proxies:
        written = [p.read_bytes().decode(errors="replace") for p in proxy.written_files()]
        _assert_no_token(tokens, written, "a proxy log or audit file")
        assert proxy.audit_log.exists()
    swaps = [e for p in w.proxies for e in p.audit_events() if e.get("event") == "swap"]
    assert {e.get("host") for e in swaps} >= {"api.github.com", "github.com"}
    assert any(e.get("event") == "swap" for e in w.proxies[1].audit_events()), "replica B served"


async def _agent_turn(w: World) -> None:
    # The daemon runs as nobody in the sandbox namespace, with the CA variables the
    # entrypoint exported.
    env_out = await w.sandbox_exec(
        "sh", "-c", 'id -u; echo "$SSL_CERT_FILE"; echo "$GIT_SSL_CAINFO"'
    )
    uid, cert_file, git_cainfo = env_out.stdout.split("\n")[:3]
    assert uid == str(NOBODY)
    assert cert_file == git_cainfo == str(w.base / "ssl" / "ca-bundle.pem")

    # Only the proxy path works: direct connections out of the sandbox fail.
    probe = (
        "import socket,sys\n"
        "for target in sys.argv[1:]:\n"
        "    host, port = target.rsplit(':', 1)\n"
        "    try:\n"
        "        socket.create_connection((host, int(port)), timeout=3).close(); print('CONNECTED')\n"
        "    except OSError as e:\n"
        "        print('refused', e.errno)\n"
    )
    t = w.topo
    api, redis_port = w.github.api_port, urlsplit(w.proxies[0].store).port
    direct = await w.sandbox_exec(
        w.python, "-c", probe,
        f"{t.internet_addr}:{api}",         # the local GitHub, as the proxies dial it
        f"{t.internet_public_addr}:{api}",  # ... and as the orchestrator does
        f"{t.proxy_admin_addr}:{redis_port}",  # the proxies' Redis
        f"{t.proxy_addr}:{api}",            # the proxy namespace, a port nobody serves
        f"{t.proxy_addr}:{redis_port}",     # Redis's port on the sandbox-side address
        f"{t.proxy_addr}:{w.proxies[0].port}",  # the proxy itself: the one way out
    )  # fmt: skip
    assert direct.stdout.split("\n")[:6] == [
        "refused 101", "refused 101", "refused 101", "refused 111", "refused 111", "CONNECTED",
    ], direct.stdout  # fmt: skip
    # Nor can the sandbox user reach the proxy's control socket on this shared disk.
    control_path = w.proxies[0].control.removeprefix("unix:")
    ctl = await w.sandbox_exec(
        w.python,
        "-c",
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect(sys.argv[1]); print('CONNECTED')\nexcept OSError as e:\n print(type(e).__name__)",
        control_path,
    )
    assert ctl.stdout.strip() == "PermissionError"

    async with w.proxies[0].client() as pa, w.proxies[1].client() as pb:
        shell_a = w.shell(0, pa)
        clone = await shell_a.run(w.call("gh repo clone acme/widgets"))
        w.outputs += [clone.stdout, clone.stderr]
        assert clone.exit_code == 0, clone.stderr

        patched = await w.client.apply_patch(patch=PATCH)
        assert {f.path for f in patched.files} == {"widgets/src/feature.py", "widgets/README.md"}
        found = await w.client.file_search(pattern="shiny", path="widgets", output_mode="content")
        assert {m.path for m in found.matches or []} == {
            "widgets/src/feature.py",
            "widgets/README.md",
        }
        diags = await w.client.diagnostics(paths=["widgets/src/feature.py", "widgets/README.md"])
        assert diags.checks_run
        assert not [d for d in diags.diagnostics if d.severity == "error"], diags.diagnostics

        added = await w.sandbox_exec("git", "add", "-A", cwd="widgets")
        assert added.exit_code == 0, added.stderr
        signed = await shell_a.run(
            w.call(
                'gh-signed-commit --repo acme/widgets --branch feature -m "Add the shiny feature"',
                working_directory="widgets",
            )
        )
        w.outputs += [signed.stdout, signed.stderr]
        assert signed.exit_code == 0, signed.stderr
        assert signed.stdout.strip().split("\n")[-1] in w.github.verified_commits

        # Replica A dies mid-run. The next command through it fails; retried
        # through replica B (same session, shared Redis store) it succeeds.
        proc_a = w.proxies[0].process
        assert proc_a is not None
        proc_a.send_signal(signal.SIGKILL)
        await asyncio.to_thread(proc_a.wait, 10)
        pr_command = w.call(
            'gh pr create --repo acme/widgets --head feature --base main --title "Add the shiny feature" --body "Adds shine()."',
            working_directory="widgets",
        )
        with pytest.raises((ProxyError, aiohttp.ClientError, OSError)):
            await shell_a.run(pr_command)
        assert w.github.pull_numbers(REPO) == []

        shell_b = w.shell(1, pb)
        pr = await shell_b.run(pr_command)
        w.outputs += [pr.stdout, pr.stderr]
        assert pr.exit_code == 0, pr.stderr
        assert "/pull/1" in pr.stdout

        await w.client.file_patch(
            path="widgets/src/feature.py",
            old_string='"shiny" * level',
            new_string='"shiny " * level',
        )
        committed = await w.sandbox_exec(
            "git", "-c", "user.name=agent", "-c", "user.email=agent@example.com",
            "commit", "-qam", "Space out the shine", cwd="widgets",
        )  # fmt: skip
        assert committed.exit_code == 0, committed.stderr
        push = await shell_b.run(
            w.call("git push origin HEAD:refs/heads/feature", working_directory="widgets")
        )
        w.outputs += [push.stdout, push.stderr]
        assert push.exit_code == 0, push.stderr
        local = await w.sandbox_exec("git", "rev-parse", "HEAD", cwd="widgets")
        assert await w.github.head_sha(REPO, "feature") == local.stdout.strip()
        assert await pb.list_leases(w.session.session_id) == []


async def test_replica_killed_during_a_command_orphaned_lease_is_removed_via_the_other(
    world: World,
) -> None:
    """A replica dies while a command's request is in flight through it.

    The command fails, and so does the lease DELETE through the dead replica; the
    lease is still in the shared store, so the orchestrator removes it through the
    other replica and the retry there succeeds.
    """
    w = world
    w.github.delays["/repos/acme/widgets"] = 3.0
    async with w.proxies[0].client() as pa, w.proxies[1].client() as pb:
        shell_a = w.shell(0, pa)
        task = asyncio.create_task(shell_a.run(w.call("gh api repos/acme/widgets --jq .name")))
        try:
            await wait_until(
                lambda: any(r.path == "/repos/acme/widgets" for r in w.github.requests),
                timeout=12,
            )
        except AssertionError:
            task.cancel()
            pytest.fail("the request never reached the local GitHub")
        proc_a = w.proxies[0].process
        assert proc_a is not None
        proc_a.send_signal(signal.SIGKILL)
        with pytest.raises((ProxyError, aiohttp.ClientError, OSError)):
            await task
        orphans = await pb.list_leases(w.session.session_id)
        assert len(orphans) == 1, "the lease outlived its replica, in the shared store"
        await pb.delete_lease(w.session.session_id, orphans[0].lease_id)
        assert await pb.list_leases(w.session.session_id) == []

        del w.github.delays["/repos/acme/widgets"]
        retry = await w.shell(1, pb).run(w.call("gh api repos/acme/widgets --jq .name"))
        w.outputs += [retry.stdout, retry.stderr]
        assert retry.exit_code == 0, retry.stderr
        assert retry.stdout.strip() == "widgets"
        assert await pb.list_leases(w.session.session_id) == []
    tokens = [m.token for m in w.github.mints]
    _assert_no_token(tokens, w.outputs, "a command output")
    for proxy in w.proxies:
        written = [p.read_bytes().decode(errors="replace") for p in proxy.written_files()]
        _assert_no_token(tokens, written, "a proxy log or audit file")


def test_namespace_precheck_gives_a_reason_where_they_cannot_be_made(shared_repo: Path) -> None:
    """The skip path: as an unprivileged user the precheck names why, and builds nothing."""
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv to run the precheck as an unprivileged user")
    python = _sandbox_python()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from tests.e2e.netns import can_create_namespaces; print(can_create_namespaces())"
    )
    out = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         python, "-c", code, str(shared_repo)],
        capture_output=True, text=True, timeout=60, check=True, cwd="/",
    )  # fmt: skip
    assert out.stdout.strip() == "network namespaces need root"
