"""``GitHubShell``: run one gh/git command for one repository under a short lease.

The sequence for one call (every refusal happens before a token is requested):

1. ``approve``: input shape, parse, executable and subcommand.
2. Target checks on argv (``--repo``, ``gh repo clone|view|fork``, org).
3. Working directory inside the workspace.
4. (serialised per session from here) for git / gh-signed-commit: the directory
   is a git top level; for git, origin's fetch and push URLs are the declared
   repository (checked in the sandbox, again after our URL rewriting).
5. Mint a token for exactly that repository (cached by the provider).
6. Install a lease mapping a fresh placeholder (shaped like an installation
   token) to the real token on the API host (``token|bearer`` → ``Bearer``) and
   the git host (Basic → Basic), each rule's ``allow`` derived from the command
   (client/github/scopes.py): read-only gh gets GET/HEAD and GraphQL queries,
   git push only its destination refs, git fetch no API rule at all.
7. Run in the sandbox with ``GH_TOKEN=<placeholder>`` (gh and gh-signed-commit),
   a fresh ``GH_CONFIG_DIR`` (gh), no prompts, and git configuration through
   ``GIT_CONFIG_*`` (extraheader with the Basic placeholder, hooks off, https only,
   ssh origin rewritten to the https URL).
8. Always: delete the lease (shielded against cancellation) and remove the
   config directory. Then redact the real token's forms and keep the output tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from airlock.daemon.errors import AirlockError
from airlock.proxy.protocol import LeaseRule, SessionInfo

from .._shielded import finish_shielded
from ..leases import git_basic_rule, github_api_rule, github_placeholder
from ..providers.base import TokenProvider
from ..providers.errors import CredentialError
from ..proxy import ProxyClient, ProxyError
from ..sandboxes import RunResult, Sandbox
from . import scopes
from .argv import parse_command
from .models import (
    DESCRIPTION,
    TOOL_NAME,
    GitHubShellInput,
    GitHubShellResult,
    input_schema,
)
from .policy import (
    Verdict,
    approve,
    check_targets,
    declared_repository,
    remote_url_repo,
    resolve_working_directory,
    with_origin,
)
from .redact import basic_credential, redact, secret_forms, truncate_tail

DEFAULT_EXECUTABLES: Mapping[str, Sequence[str]] = {
    "gh": ("gh",),
    "git": ("git",),
    "gh-signed-commit": ("gh-signed-commit",),
}

# Runs the command, then removes the per-command GH_CONFIG_DIR, keeping the exit status.
# The directory is not created up front: a fresh GH_CONFIG_DIR is one that does not exist
# yet (gh creates it only if it writes state), which saves a process per command.
_CONFIG_DIR_WRAPPER = '"$@"; s=$?; rm -rf -- "$GH_CONFIG_DIR"; exit $s'


class GitHubShellError(Exception):
    """Base of the tool's own refusals."""


class GitHubShellDenied(GitHubShellError):
    """The call was refused before any token was requested; ``reason`` is for the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def default_placeholder() -> str:
    """A placeholder shaped like an installation token (``ghs_`` + 36 alphanumerics)."""
    return github_placeholder()


class GitHubShell:
    """The GitHub shell tool for one sandbox session.

    Commands of a session run one at a time (a lease belongs to the session, so
    concurrent commands would widen each other's exposure windows and interleave
    git state): use one instance per session, or pass a shared ``lock``.
    """

    name = TOOL_NAME
    description = DESCRIPTION
    input_model = GitHubShellInput

    def __init__(
        self,
        *,
        org: str,
        provider: TokenProvider,
        proxy: ProxyClient,
        session: str | SessionInfo,
        sandbox: Sandbox,
        workspace: str,
        placeholder: Callable[[], str] = default_placeholder,
        executables: Mapping[str, Sequence[str]] | None = None,
        token_permissions: Mapping[str, str] | None = None,
        timeout_s: float = 300.0,
        max_output_bytes: int = 100_000,
        api_host: str = "api.github.com",
        git_host: str = "github.com",
        config_dir_base: str = "/tmp",  # noqa: S108 (sandbox path; mkdir fails if it exists)
        extra_env: Mapping[str, str] | None = None,
        lease_grace_s: int = 30,
        lock: asyncio.Lock | None = None,
    ) -> None:
        self.org = org
        self.provider = provider
        self.proxy = proxy
        self.session_id = session.session_id if isinstance(session, SessionInfo) else session
        self.sandbox = sandbox
        self.workspace = posixpath.normpath(workspace)
        self._placeholder = placeholder
        self.executables = dict(DEFAULT_EXECUTABLES) | dict(executables or {})
        self.token_permissions = dict(token_permissions) if token_permissions else None
        self.timeout_s = timeout_s
        self.max_output_bytes = max_output_bytes
        self.api_host = api_host
        self.git_host = git_host
        self.config_dir_base = config_dir_base
        self.extra_env = dict(extra_env or {})
        self.lease_grace_s = lease_grace_s
        # Pass the same lock to several instances that share one session.
        self._lock = lock or asyncio.Lock()

    # ------------------------------------------------------------------ schema

    @staticmethod
    def input_schema() -> dict[str, Any]:
        return input_schema()

    def definition(self) -> dict[str, Any]:
        """``{name, description, input_schema}``, the shape airlockd's catalog uses."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema(),
            "read_only": False,
            "supports_parallel": False,
        }

    def approve(self, data: BaseModel | Mapping[str, Any]) -> Verdict:
        return approve(data)

    # ------------------------------------------------------------------ entry points

    async def invoke(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Tool-call entry point: a result dict, ``{"type": "denied", "reason"}``, or
        ``{"type": "error", "reason"}`` when no token, lease or sandbox could be had."""
        try:
            result = await self.run(args)
        except GitHubShellDenied as exc:
            return {"type": "denied", "reason": exc.reason}
        except (CredentialError, ProxyError, AirlockError) as exc:
            # Token-free by construction: provider, proxy and daemon errors carry
            # status codes and server messages, never request bodies.
            return {"type": "error", "reason": f"{type(exc).__name__}: {exc}"}
        return result.model_dump()

    async def run(self, data: BaseModel | Mapping[str, Any]) -> GitHubShellResult:
        """Check, lease, run, clean up; raises :class:`GitHubShellDenied` on refusal."""
        mapping = data.model_dump() if isinstance(data, BaseModel) else data
        verdict = approve(mapping)
        if verdict != "not-applicable":
            raise GitHubShellDenied(verdict["reason"])
        repo = declared_repository(mapping)
        assert isinstance(repo, str)  # approve checked it
        argv = parse_command(str(mapping["command"]))
        reason = check_targets(argv, repo, self.org, self.git_host)
        if reason is not None:
            raise GitHubShellDenied(reason)
        cwd = resolve_working_directory(self.workspace, mapping.get("working_directory"))
        if cwd is None:
            raise GitHubShellDenied(
                f"working_directory {mapping.get('working_directory')!r} is outside the "
                "workspace; use a path inside it"
            )
        async with self._lock:
            return await self._run_locked(argv, repo, cwd)

    # ------------------------------------------------------------------ the run

    async def _run_locked(self, argv: list[str], repo: str, cwd: str) -> GitHubShellResult:
        exe = argv[0]
        git_env: dict[str, str] = {}
        if exe in ("git", "gh-signed-commit"):
            await self._check_top_level(cwd, exe)
        if exe == "git":
            argv = with_origin(argv)
            git_env = await self._check_origin(cwd, repo)
        issued = await self.provider.get_token([repo], self.token_permissions)
        secrets = secret_forms(issued.token)
        # Ask for a little more than we return: a cut can split a secret, and the
        # partial one at the start of a truncated stream is dropped below.
        slack = max(len(f) for f in secrets)
        placeholder = self._placeholder()
        config_dir = posixpath.join(self.config_dir_base, f"airlock-gh-{uuid.uuid4().hex}")
        env = self._environment(exe, repo, placeholder, config_dir, git_env)
        command = self._command(exe, argv)
        rules = await self._rules(placeholder, issued.token, argv, repo, cwd)
        ttl = int(self.timeout_s) + self.lease_grace_s
        finished = False
        try:
            async with self.proxy.lease(self.session_id, rules, ttl):
                result = await self.sandbox.run(
                    command,
                    cwd,
                    env,
                    self.timeout_s,
                    max_output_bytes=self.max_output_bytes + slack,
                )
            finished = not result.timed_out
        finally:
            if exe == "gh" and not finished:
                await self._remove_sandbox_path(config_dir)
        if result.spill_path:
            # The full output may hold an unscrubbed form of the token: do not leave
            # it in the sandbox. The model only ever sees the tool's output.
            await self._remove_sandbox_path(result.spill_path)
        return self._output(result, secrets, slack)

    def _command(self, exe: str, argv: list[str]) -> list[str]:
        base = list(self.executables[exe])
        if exe == "git":
            return [
                *base,
                "-c",
                "protocol.allow=never",
                "-c",
                "protocol.https.allow=always",
                *argv[1:],
            ]
        if exe == "gh":
            return ["sh", "-c", _CONFIG_DIR_WRAPPER, "airlock-gh", *base, *argv[1:]]
        return [*base, *argv[1:]]

    async def _rules(
        self, placeholder: str, token: str, argv: list[str], repo: str, cwd: str
    ) -> list[LeaseRule]:
        """The command's lease: each rule narrowed to what this command needs
        (client/github/scopes.py; docs/github-shell.md has the table)."""
        current: str | None = None
        if argv[0] == "git" and argv[1] == "push":
            head = await self.sandbox.run(["git", "symbolic-ref", "-q", "HEAD"], cwd, {}, 30)
            current = head.stdout.strip() if head.exit_code == 0 else None
        try:
            git = scopes.git_allow(argv, repo, current)
        except ValueError as exc:
            raise GitHubShellDenied(str(exc)) from None
        rules = [git_basic_rule(token, placeholder, host=self.git_host, allow=git)]
        api = scopes.api_allow(argv, repo, self.api_host)
        if api is not None:
            rules.insert(0, github_api_rule(token, placeholder, host=self.api_host, allow=api))
        return rules

    def _git_config(self, placeholder: str, extra: Mapping[str, str]) -> dict[str, str]:
        entries: list[tuple[str, str]] = [
            # An empty value first resets any extraheader the checkout already has.
            (f"http.https://{self.git_host}/.extraheader", ""),
            (
                f"http.https://{self.git_host}/.extraheader",
                f"AUTHORIZATION: basic {basic_credential(placeholder)}",
            ),
            ("core.hooksPath", "/dev/null"),
            ("core.fsmonitor", "false"),
            ("credential.helper", ""),
            ("protocol.allow", "never"),
            ("protocol.https.allow", "always"),
        ]
        entries.extend(extra.items())
        env = {"GIT_CONFIG_COUNT": str(len(entries))}
        for i, (key, value) in enumerate(entries):
            env[f"GIT_CONFIG_KEY_{i}"] = key
            env[f"GIT_CONFIG_VALUE_{i}"] = value
        return env

    def _environment(
        self,
        exe: str,
        repo: str,
        placeholder: str,
        config_dir: str,
        git_rewrites: Mapping[str, str],
    ) -> dict[str, str]:
        env = {
            "GIT_TERMINAL_PROMPT": "0",
            "GCM_INTERACTIVE": "never",
            "GIT_ASKPASS": "",
            "SSH_ASKPASS": "",
            "PAGER": "cat",
            "GIT_PAGER": "cat",
            "NO_COLOR": "1",
        }
        env.update(self.extra_env)
        env.update(self._git_config(placeholder, git_rewrites))
        if exe in ("gh", "gh-signed-commit"):
            env["GH_TOKEN"] = placeholder
            env["GH_REPO"] = repo if self.git_host == "github.com" else f"{self.git_host}/{repo}"
            if self.git_host != "github.com":
                env["GH_HOST"] = self.git_host
                env["GH_ENTERPRISE_TOKEN"] = placeholder
        if exe == "gh":
            env.update(
                {
                    "GH_CONFIG_DIR": config_dir,
                    "GH_PROMPT_DISABLED": "1",
                    "GH_NO_UPDATE_NOTIFIER": "1",
                    "GH_PAGER": "cat",
                    "GH_SPINNER_DISABLED": "1",
                }
            )
        return env

    async def _check_top_level(self, cwd: str, exe: str) -> None:
        probe = await self.sandbox.run(["git", "rev-parse", "--show-prefix"], cwd, {}, 30)
        if probe.exit_code != 0:
            raise GitHubShellDenied(
                f"{exe} must run at the top level of a git checkout; {cwd} is not in one"
            )
        if probe.stdout.strip():
            raise GitHubShellDenied(
                f"{exe} must run at the top level of the git checkout; {cwd} is the "
                f"subdirectory {probe.stdout.strip()!r} (set working_directory to the top level)"
            )

    async def _origin_urls(self, cwd: str, env: Mapping[str, str]) -> list[str] | None:
        urls: list[str] = []
        for extra in ([], ["--push"]):
            res = await self.sandbox.run(
                ["git", "remote", "get-url", *extra, "--all", "origin"], cwd, env, 30
            )
            if res.exit_code != 0:
                return None
            urls.extend(line.strip() for line in res.stdout.splitlines() if line.strip())
        return urls

    async def _check_origin(self, cwd: str, repo: str) -> dict[str, str]:
        """Check origin is ``repo``; return the GIT_CONFIG entries that make it plain https."""
        urls = await self._origin_urls(cwd, {})
        if not urls:
            raise GitHubShellDenied("git needs a remote named origin in this checkout")
        canonical = f"https://{self.git_host}/{repo}.git"
        rewrites: dict[str, str] = {}
        for url in urls:
            named = remote_url_repo(url, self.git_host)
            if named is None or named.lower() != repo.lower():
                raise GitHubShellDenied(
                    f"origin points at {url!r}, not {canonical} (or git@{self.git_host}:{repo}.git)"
                )
            if not url.startswith("https://"):
                rewrites[f"url.{canonical}.insteadOf"] = url
        if rewrites:
            # Verify with exactly the configuration the command will run with.
            probe_env = self._git_config("probe-placeholder", rewrites)
            after = await self._origin_urls(cwd, probe_env)
            if not after or any(remote_url_repo(u, self.git_host) is None for u in after):
                raise GitHubShellDenied("origin could not be rewritten to its https URL")
        return rewrites

    async def _remove_sandbox_path(self, path: str) -> None:
        cleanup = asyncio.ensure_future(
            self.sandbox.run(["rm", "-rf", "--", path], self.workspace, {}, 30)
        )
        with contextlib.suppress(Exception):  # best effort: the directory holds no secret
            await finish_shielded(cleanup, Exception)

    def _clean(
        self, text: str, sandbox_cut: bool, secrets: list[str], slack: int
    ) -> tuple[str, bool]:
        if sandbox_cut:
            text = text[slack:]  # may start inside a secret; that part is beyond our window
        text, cut = truncate_tail(redact(text, secrets), self.max_output_bytes)
        if sandbox_cut and not cut:
            text = f"[output truncated: showing final {self.max_output_bytes} bytes]\n{text}"
        return text, cut or sandbox_cut

    def _output(self, result: RunResult, secrets: list[str], slack: int) -> GitHubShellResult:
        stdout, out_cut = self._clean(result.stdout, result.stdout_truncated, secrets, slack)
        stderr, err_cut = self._clean(result.stderr, result.stderr_truncated, secrets, slack)
        return GitHubShellResult(
            exit_code=result.exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=result.timed_out,
            stdout_truncated=out_cut,
            stderr_truncated=err_cut,
            duration_ms=result.duration_ms,
        )
