"""deploy/orchestrator_example.py runs its agent turn against the real pieces: the
real proxy (memory store), the real airlockd, real gh/git, and the local GitHub."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from airlock.client.providers import StaticTokenProvider
from tests.fakes.daemon_harness import running_daemon
from tests.fakes.github import FakeGitHub
from tests.fakes.proxy_harness import running_proxy

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/widgets"


def load_example() -> ModuleType:
    path = REPO_ROOT / "deploy" / "orchestrator_example.py"
    spec = importlib.util.spec_from_file_location("orchestrator_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


def test_sandbox_proxy_url_keeps_credentials_and_swaps_the_address() -> None:
    ex = load_example()
    url = "http://s-1:secret@proxy-host:8080"
    assert ex.sandbox_proxy_url(url, None) == url
    assert ex.sandbox_proxy_url(url, "10.96.0.7:8080") == "http://s-1:secret@10.96.0.7:8080"


def test_config_requires_the_essentials(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = load_example()
    for var in (
        "AIRLOCK_PROXY_CONTROL",
        "AIRLOCK_REPO",
        "AIRLOCK_DAEMON_SOCKET",
        "AIRLOCK_GITHUB_TOKEN",
    ):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(SystemExit):
        ex.parse_config([])
    err = capsys.readouterr().err
    assert "--proxy-control" in err and "--repo" in err and "AIRLOCK_GITHUB_TOKEN" in err
    monkeypatch.setenv("AIRLOCK_GITHUB_TOKEN", "t-123")
    config = ex.parse_config(
        ["--proxy-control", "unix:/p.sock", "--repo", "acme/widgets", "--daemon-socket", "/d.sock"]
    )
    assert (config.github_token, config.daemon_socket, config.repo) == ("t-123", "/d.sock", REPO)
    with pytest.raises(SystemExit):
        ex.parse_config(["--proxy-control", "unix:/p", "--repo", "nope", "--daemon-socket", "/d"])


async def test_agent_turn_against_real_proxy_daemon_and_local_github(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = load_example()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with FakeGitHub(tmp_path / "github", org="acme") as github:
        await github.create_repo(REPO)
        async with running_proxy(
            tmp_path / "proxy", resolve=github.resolve, upstream_ca=github.ca_path
        ) as proxy:
            ca = str(proxy.ca_path)
            # What the sandbox entrypoint exports for airlockd.
            sandbox_env = {
                "SSL_CERT_FILE": ca,
                "GIT_SSL_CAINFO": ca,
                "CURL_CA_BUNDLE": ca,
                "HOME": str(tmp_path),
                "GIT_CONFIG_NOSYSTEM": "1",
            }
            async with running_daemon(workspace, env=sandbox_env) as daemon:
                token = github.issue_token([REPO])
                config = ex.Config(
                    proxy_control=proxy.control,
                    proxy_token=None,
                    daemon_socket=str(daemon.socket),
                    daemon_url=None,
                    daemon_token=None,
                    sandbox_proxy=proxy.address,
                    repo=REPO,
                    github_token=token,
                    app_id=None,
                    app_key_pem=None,
                    api_url=github.api_url,
                )
                await ex.agent_turn(config, StaticTokenProvider(token))
                async with proxy.client() as pc:
                    health = await pc.health()
            events = await proxy.await_audit(
                lambda e: e["event"] == "session_deleted", what="session_deleted"
            )
    out = capsys.readouterr().out
    steps = [line for line in out.splitlines() if line.startswith('{"step"')]
    names = [line.split('"')[3] for line in steps]
    assert names == [
        "daemon_health",
        "session_created",
        "gh_repo_clone",
        "apply_patch",
        "file_search",
        "gh_api",
        "session_deleted",
    ]
    assert all('"ok": true' in line for line in steps)
    assert (workspace / "widgets" / "AIRLOCK_EXAMPLE.md").exists()
    assert token not in out
    assert health.status == "ok"
    assert {e["event"] for e in events} >= {"session_created", "swap", "session_deleted"}
    assert any(r.path == "/repos/acme/widgets" and r.token == token for r in github.requests)
