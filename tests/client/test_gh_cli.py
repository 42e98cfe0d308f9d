"""``airlock gh``: the operator command, as a subprocess, through the proxy and the local GitHub."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.github import FakeGitHub
from tests.fakes.github_proxy import GITHUB_HOSTS, proxy_for
from tests.fakes.programs import run_airlock


async def test_airlock_gh_local(tmp_path: Path, fake_github: FakeGitHub) -> None:
    key = tmp_path / "app.pem"
    key.write_text(fake_github.app_private_key_pem)
    async with proxy_for(fake_github, tmp_path / "proxy") as proxy:
        import os

        env = {**os.environ, "AIRLOCK_PROXY_CONTROL": proxy.control}
        common = [
            "gh",
            "--org", "acme",
            "--repo", "acme/widgets",
            "--local",
            "--proxy-address", proxy.address,
            "--app-id", str(fake_github.app_id),
            "--app-key-file", str(key),
            "--api-url", fake_github.api_url,
            "--api-ca-file", str(fake_github.ca_path),
        ]  # fmt: skip
        rc, out, err = await run_airlock(
            *common, "--", "gh", "api", "repos/acme/widgets", "--jq", ".full_name",
            env=env, cwd=tmp_path,
        )  # fmt: skip
        assert rc == 0, err
        assert out.strip() == "acme/widgets"
        assert len(fake_github.mints) == 1
        assert fake_github.mints[0].token not in out + err
        rc, out, err = await run_airlock(
            *common, "--json", "--", "gh api repos/acme/widgets --jq .name", env=env, cwd=tmp_path
        )
        assert rc == 0, err
        assert json.loads(out)["stdout"].strip() == "widgets"
        rc, out, err = await run_airlock(
            *common, "--", "gh", "pr", "view", "1", "--repo", "acme/other", env=env, cwd=tmp_path
        )
        assert rc == 3 and "denied" in err and "acme/other" in err
        assert len(fake_github.mints) == 2
        # Each run's temporary session was deleted again.
        audit = await proxy.await_audit(
            lambda e: e["event"] == "session_deleted", count=3, what="3 session_deleted lines"
        )
        events = [e["event"] for e in audit]
        assert events.count("session_created") == 3
        assert events.count("session_deleted") == 3
        rc, _, err = await run_airlock(
            "gh", "--org", "acme", "--repo", "acme/widgets", "--local", "--", "gh", "pr", "list",
            env={k: v for k, v in env.items() if not k.startswith("AIRLOCK_GITHUB")},
            cwd=tmp_path,
        )  # fmt: skip
        assert rc == 2 and "credentials" in err


async def test_airlock_gh_through_airlockd(tmp_path: Path, fake_github: FakeGitHub) -> None:
    import os

    from tests.fakes.daemon_harness import running_daemon

    key = tmp_path / "app.pem"
    key.write_text(fake_github.app_private_key_pem)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with proxy_for(fake_github, tmp_path / "proxy") as proxy:
        async with proxy.client() as pc:
            session = await pc.create_session(allow=list(GITHUB_HOSTS))
        sandbox_env = proxy.client_env(session, HOME=str(tmp_path))
        async with running_daemon(workspace, env=sandbox_env) as daemon:
            env = {
                **os.environ,
                "AIRLOCK_PROXY_CONTROL": proxy.control,
                "AIRLOCK_SESSION": session.session_id,
                "AIRLOCK_SOCKET": str(daemon.socket),
                "AIRLOCK_GITHUB_APP_ID": str(fake_github.app_id),
                "AIRLOCK_GITHUB_APP_KEY_FILE": str(key),
            }
            rc, out, err = await run_airlock(
                "gh", "--org", "acme", "--repo", "acme/widgets",
                "--api-url", fake_github.api_url, "--api-ca-file", str(fake_github.ca_path),
                "--", "gh", "api", "repos/acme/widgets", "--jq", ".default_branch",
                env=env, cwd=tmp_path,
            )  # fmt: skip
    assert rc == 0, err
    assert out.strip() == "main"
    assert fake_github.mints and fake_github.mints[0].token not in out + err
