"""A local GitHub for tests: REST, GraphQL, app tokens and git smart HTTP.

Real ``gh`` and real ``git`` talk to it through the real proxy (``--resolve``
maps ``api.github.com:443`` and ``github.com:443`` to its two listeners), and
``GitHubAppProvider`` talks to it directly at :attr:`FakeGitHub.api_url`.
Everything is served over TLS with a :class:`tests.fakes.tls.TestCA` leaf for
``api.github.com``, ``github.com``, ``127.0.0.1`` and ``localhost``.

Usage::

    async with FakeGitHub(tmp_path, org="acme") as gh:
        await gh.create_repo("acme/widgets")            # bare repo with one commit on main
        gh.api_url        # https://127.0.0.1:PORT (direct; GitHubAppProvider api_url)
        gh.resolve        # ["api.github.com:443:127.0.0.1:P1", "github.com:443:127.0.0.1:P2"]
        gh.ca_path        # trust anchor (proxy --upstream-ca, or ssl for direct use)
        gh.app_id, gh.app_private_key_pem, gh.installation_id("acme")
        token = gh.issue_token(["acme/widgets"])        # mint without a JWT (test set-up)
        gh.mints          # every token minted, in order (assert "no mint" with len(gh.mints))
        gh.requests       # every request: RequestRecord(listener, method, path, auth_kind, token)

API listener (``api.github.com``; also under ``/api/v3`` and ``/api/graphql`` for
GitHub Enterprise style ``api_url``s). ``token X`` / ``Bearer X`` = an installation
token; repository routes answer 404 for repositories outside the token's scope,
as GitHub does; an expired or unknown token gets 401 "Bad credentials".

- ``GET /orgs/{org}/installation``, ``GET /repos/{o}/{r}/installation``: app JWT.
- ``POST /app/installations/{id}/access_tokens`` ``{repositories?, permissions?}``:
  verifies the RS256 JWT with the app's public key (``iss``, ``iat`` not in the
  future, ``exp`` in the future and at most 10 minutes after ``iat``), returns
  ``{token, expires_at, permissions, repositories, repository_selection}`` (201).
  Unknown repositories or permissions the app lacks → 422.
- ``GET /user`` (the bot user), ``GET /repos/{o}/{r}``,
  ``GET/POST /repos/{o}/{r}/pulls``, ``GET /repos/{o}/{r}/pulls/{n}``,
  ``GET /repos/{o}/{r}/pulls/{n}/reviews``,
  ``GET /repos/{o}/{r}/commits/{ref}`` (``commit.verification.verified`` is true for
  commits made by ``createCommitOnBranch``), ``GET .../commits/{ref}/check-runs``,
  ``GET .../commits/{ref}/status``, ``POST /repos/{o}/{r}/git/refs`` ``{ref, sha}``,
  ``GET /repos/{o}/{r}/git/ref/{ref}``, ``POST /repos/{o}/{r}/issues/{n}/comments``.
- ``POST /graphql``: ``createCommitOnBranch`` (real commit via git plumbing, checks
  ``expectedHeadOid``, a stale head gives GitHub's ``STALE_DATA`` error),
  ``repository { ref(qualifiedName) { target { oid } } defaultBranchRef {...} }``,
  ``repository { pullRequest(number) {...} }`` (what ``gh pr view`` asks),
  ``createPullRequest`` and the repository-info query ``gh pr create`` sends.

``FakeGitHub(..., enterprise_host="ghe.example.test")`` adds a third listener that
serves that host like GitHub Enterprise Server: the API under ``/api/v3`` and
``/api/graphql`` and git smart HTTP at ``/{o}/{r}.git`` on the same host
(``resolve`` then has a third entry).

Git listener (``github.com``): ``/{o}/{r}(.git)/info/refs``, ``git-upload-pack``,
``git-receive-pack`` through real ``git http-backend`` on bare repositories under
:attr:`FakeGitHub.repos_dir`; only ``Basic x-access-token:<live token for that repo>``
is accepted (anything else → 401).

Test controls (plain methods, no HTTP): :meth:`add_pull_sync` (open a PR without a
token), :meth:`add_check_run` / :meth:`set_check_runs`, :meth:`add_status`,
:meth:`add_review`, :meth:`set_pull`, :meth:`expire_token`, :meth:`fail_next`
(inject an HTTP status for the next N requests to a path prefix),
``delays[path] = seconds`` (slow responses; cut short when the fake stops),
``echo_tokens = True`` (``GET /user`` then echoes the presented token raw and in its
Basic form, to test redaction), :meth:`head_sha`, :meth:`git` (run git in a bare
repo), :meth:`pull_numbers`. Observations: ``mints``, ``requests``, ``graphql_log``,
``jwt_rejections``, ``verified_commits``, ``max_in_flight`` (most requests handled at
once, for serialisation tests).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import itertools
import json
import os
import re
import secrets
import string
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from airlock.client._closing import AsyncClosing
from tests.fakes.tls import TestCA

DEFAULT_APP_PERMISSIONS = {
    "contents": "write",
    "pull_requests": "write",
    "issues": "write",
    "checks": "read",
    "statuses": "read",
    "metadata": "read",
}
_TOKEN_ALPHABET = string.ascii_letters + string.digits


@dataclass
class Mint:
    """One installation token the fake handed out."""

    token: str
    installation_id: int
    repositories: tuple[str, ...]  # "owner/repo"
    permissions: dict[str, str]
    expires_at: float
    via_jwt: bool = True


@dataclass
class RequestRecord:
    listener: str  # "api" or "git"
    method: str
    path: str
    query: str
    auth_kind: str  # "none", "token", "bearer", "basic", "jwt"
    token: str | None  # the credential presented (raw), for assertions
    status: int = 0


@dataclass
class _Pull:
    number: int
    title: str
    body: str
    head: str
    base: str
    user: str
    state: str = "open"
    draft: bool = False
    merged: bool = False
    mergeable: bool | None = True
    mergeable_state: str = "clean"
    created_at: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Repo:
    full_name: str
    path: Path
    id: int
    default_branch: str
    pulls: dict[int, _Pull] = field(default_factory=dict)
    next_number: int = 1
    comments: list[dict[str, Any]] = field(default_factory=list)


def _now_iso(ts: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(ts if ts is not None else time.time(), dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"message": message, "documentation_url": "https://docs.github.com/rest"}, status=status
    )


class FakeGitHub(AsyncClosing):
    """The fake; an async context manager that starts both TLS listeners."""

    def __init__(
        self,
        directory: Path,
        *,
        org: str = "acme",
        ca: TestCA | None = None,
        token_ttl_s: float = 3600.0,
        app_id: int = 4242,
        app_permissions: Mapping[str, str] | None = None,
        bot_login: str = "airlock-app[bot]",
        enterprise_host: str | None = None,
    ) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca = ca or TestCA(directory / "ca")
        self.ca_path = self.ca.ca_path
        self.enterprise_host = enterprise_host
        names = ["api.github.com", "github.com", "127.0.0.1", "localhost"]
        self.leaf = self.ca.issue(*names, *([enterprise_host] if enterprise_host else []))
        self.repos_dir = directory / "repos"
        self.repos_dir.mkdir(exist_ok=True)
        self.org = org
        self.app_id = app_id
        self.app_permissions = dict(app_permissions or DEFAULT_APP_PERMISSIONS)
        self.bot_login = bot_login
        self.token_ttl_s = token_ttl_s
        self._app_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.app_private_key_pem = self._app_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ).decode()
        self._installations: dict[str, int] = {}
        self._ids = itertools.count(1000)
        self.add_installation(org)
        self._repos: dict[str, _Repo] = {}
        self._tokens: dict[str, Mint] = {}
        self.mints: list[Mint] = []
        self.jwt_rejections: list[str] = []
        self.requests: list[RequestRecord] = []
        self.graphql_log: list[dict[str, Any]] = []
        self.verified_commits: set[str] = set()
        self._check_runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._statuses: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._reviews: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._faults: list[list[Any]] = []  # [path_prefix, status, remaining, body]
        self.delays: dict[str, float] = {}
        self.echo_tokens = False
        self.in_flight = 0
        self.max_in_flight = 0  # most requests ever handled at once (serialisation tests)
        self._runners: list[web.AppRunner] = []
        self._stopping = asyncio.Event()
        self.api_port = 0
        self.git_port = 0
        self.ghe_port = 0
        self._repo_locks: dict[str, asyncio.Lock] = {}
        self._home = Path(tempfile.mkdtemp(prefix="fakegh-home-", dir=directory))

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> FakeGitHub:
        await self.start()
        return self

    async def aclose(self) -> None:
        """Leaving ``async with`` stops both servers (the client's AsyncClosing protocol)."""
        await self.stop()

    async def start(self) -> None:
        ctx = self.leaf.server_context()
        api = web.Application(middlewares=[self._middleware("api")], client_max_size=64 << 20)
        self._api_routes(api)
        v3 = web.Application()
        self._api_routes(v3)
        api.add_subapp("/api/v3", v3)
        api.router.add_post("/api/graphql", self._graphql)
        git = web.Application(middlewares=[self._middleware("git")], client_max_size=256 << 20)
        git.router.add_route(
            "*", r"/{owner}/{name}/{rest:(info/refs|git-upload-pack|git-receive-pack)}", self._git
        )
        listeners = [(api, "api_port"), (git, "git_port")]
        if self.enterprise_host:
            # GitHub Enterprise Server: one host, API under /api/v3 and /api/graphql.
            ghe = web.Application(middlewares=[self._middleware("ghe")], client_max_size=256 << 20)
            ghe_v3 = web.Application()
            self._api_routes(ghe_v3)
            ghe.add_subapp("/api/v3", ghe_v3)
            ghe.router.add_post("/api/graphql", self._graphql)
            ghe.router.add_route(
                "*",
                r"/{owner}/{name}/{rest:(info/refs|git-upload-pack|git-receive-pack)}",
                self._git,
            )
            listeners.append((ghe, "ghe_port"))
        for app, attr in listeners:
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
            await site.start()
            self._runners.append(runner)
            setattr(self, attr, runner.addresses[0][1])

    async def stop(self) -> None:
        self._stopping.set()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    @property
    def api_url(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def git_url(self) -> str:
        return f"https://127.0.0.1:{self.git_port}"

    @property
    def resolve(self) -> list[str]:
        """``--resolve`` values for the proxy: the real host names to our listeners."""
        entries = [
            f"api.github.com:443:127.0.0.1:{self.api_port}",
            f"github.com:443:127.0.0.1:{self.git_port}",
        ]
        if self.enterprise_host:
            entries.append(f"{self.enterprise_host}:443:127.0.0.1:{self.ghe_port}")
        return entries

    # ----------------------------------------------------------------- set-up helpers

    def add_installation(self, org: str) -> int:
        inst = next(self._ids)
        self._installations[org.lower()] = inst
        return inst

    def installation_id(self, org: str | None = None) -> int:
        return self._installations[(org or self.org).lower()]

    async def create_repo(
        self,
        full_name: str,
        *,
        default_branch: str = "main",
        files: Mapping[str, str] | None = None,
    ) -> Path:
        """A bare repository with one commit on ``default_branch`` holding ``files``."""
        owner, name = full_name.split("/")
        path = self.repos_dir / owner / f"{name}.git"
        path.parent.mkdir(parents=True, exist_ok=True)
        await self._run_git(None, "init", "-q", "--bare", "-b", default_branch, str(path))
        await self._run_git(path, "config", "http.receivepack", "true")
        self._repos[full_name.lower()] = _Repo(full_name, path, next(self._ids), default_branch)
        content = dict(files or {"README.md": f"# {name}\n"})
        oid = await self._commit_files(
            path,
            None,
            content,
            [],
            "Initial commit",
            "",
            author=("Fake Owner", "owner@example.com"),
        )
        await self._run_git(path, "update-ref", f"refs/heads/{default_branch}", oid)
        return path

    def repo_path(self, full_name: str) -> Path:
        return self._repos[full_name.lower()].path

    def issue_token(
        self,
        repositories: Sequence[str],
        *,
        permissions: Mapping[str, str] | None = None,
        ttl_s: float | None = None,
    ) -> str:
        """Mint an installation token without a JWT (for tests that need one directly)."""
        return self._mint(
            self.installation_id(repositories[0].split("/")[0] if repositories else None),
            tuple(repositories),
            dict(permissions or self.app_permissions),
            ttl_s,
            via_jwt=False,
        ).token

    def expire_token(self, token: str) -> None:
        self._tokens[token].expires_at = time.time() - 1

    def fail_next(self, path_prefix: str, status: int, count: int = 1, message: str = "") -> None:
        """The next ``count`` requests whose path starts with ``path_prefix`` get ``status``."""
        self._faults.append([path_prefix, status, count, message or f"injected {status}"])

    def add_check_run(
        self,
        repo: str,
        sha: str,
        name: str,
        *,
        status: str = "completed",
        conclusion: str | None = "success",
    ) -> dict[str, Any]:
        run = {
            "id": next(self._ids),
            "name": name,
            "head_sha": sha,
            "status": status,
            "conclusion": conclusion if status == "completed" else None,
            "started_at": _now_iso(),
            "completed_at": _now_iso() if status == "completed" else None,
            "html_url": f"https://github.com/{repo}/runs/{name}",
            "details_url": f"https://github.com/{repo}/runs/{name}",
            "app": {"slug": "github-actions", "name": "GitHub Actions"},
        }
        self._check_runs.setdefault((repo.lower(), sha), []).append(run)
        return run

    def set_check_runs(self, repo: str, sha: str, runs: list[dict[str, Any]]) -> None:
        self._check_runs[(repo.lower(), sha)] = list(runs)

    def add_status(
        self, repo: str, sha: str, context: str, state: str, description: str = ""
    ) -> None:
        self._statuses.setdefault((repo.lower(), sha), []).append(
            {
                "id": next(self._ids),
                "context": context,
                "state": state,
                "description": description,
                "target_url": None,
                "created_at": _now_iso(),
                "updated_at": _now_iso(),
            }
        )

    def add_review(
        self,
        repo: str,
        number: int,
        login: str,
        state: str,
        *,
        body: str = "",
        commit_id: str | None = None,
    ) -> dict[str, Any]:
        review = {
            "id": next(self._ids),
            "user": {"login": login, "type": "User"},
            "state": state,
            "body": body,
            "commit_id": commit_id,
            "submitted_at": _now_iso(),
            "author_association": "OWNER",
        }
        self._reviews.setdefault((repo.lower(), number), []).append(review)
        return review

    def add_pull_sync(
        self, repo: str, *, title: str, head: str, base: str | None = None, body: str = ""
    ) -> int:
        r = self._repos[repo.lower()]
        number = r.next_number
        r.next_number += 1
        r.pulls[number] = _Pull(
            number, title, body, head, base or r.default_branch, "someone", created_at=_now_iso()
        )
        return number

    def set_pull(self, repo: str, number: int, **fields: Any) -> None:
        """Change a pull request: state, merged, mergeable, mergeable_state, draft, title..."""
        pull = self._repos[repo.lower()].pulls[number]
        for key, value in fields.items():
            if hasattr(pull, key):
                setattr(pull, key, value)
            else:
                pull.extra[key] = value

    def pull_numbers(self, repo: str) -> list[int]:
        return sorted(self._repos[repo.lower()].pulls)

    async def head_sha(self, repo: str, branch: str) -> str | None:
        return await self._resolve(self._repos[repo.lower()].path, f"refs/heads/{branch}")

    async def git(self, repo: str, *args: str) -> str:
        """Run git in the bare repository of ``repo``; returns stdout."""
        return await self._run_git(self._repos[repo.lower()].path, *args)

    # ----------------------------------------------------------------- tokens

    def _mint(
        self,
        installation: int,
        repositories: tuple[str, ...],
        permissions: dict[str, str],
        ttl_s: float | None,
        *,
        via_jwt: bool,
    ) -> Mint:
        # Deliberately not 40 characters: clients must not assume a length.
        token = "ghs_" + "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(52))
        expires = time.time() + (ttl_s if ttl_s is not None else self.token_ttl_s)
        mint = Mint(token, installation, repositories, permissions, expires, via_jwt)
        self._tokens[token] = mint
        self.mints.append(mint)
        return mint

    def _verify_jwt(self, jwt: str) -> str | None:
        """None when ``jwt`` is a valid app JWT, else the reason."""
        parts = jwt.split(".")
        if len(parts) != 3:
            return "not a JWT"
        try:
            header = json.loads(_b64url_decode(parts[0]))
            payload = json.loads(_b64url_decode(parts[1]))
            signature = _b64url_decode(parts[2])
        except ValueError:
            return "undecodable JWT"
        if header.get("alg") != "RS256":
            return "alg must be RS256"
        try:
            self._app_key.public_key().verify(
                signature,
                f"{parts[0]}.{parts[1]}".encode("ascii"),
                padding.PKCS1v15(),
                hashes.SHA256(),
            )
        except InvalidSignature:
            return "bad signature"
        now = time.time()
        iat, exp = payload.get("iat"), payload.get("exp")
        if str(payload.get("iss")) != str(self.app_id):
            return "wrong iss"
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "iat/exp missing"
        if iat > now + 5:
            return "iat in the future"
        if exp <= now:
            return "expired JWT"
        if exp - iat > 600 or exp > now + 600:
            return "exp too far in the future"
        return None

    def _credential(self, request: web.Request) -> tuple[str, str | None]:
        auth = request.headers.get("Authorization", "")
        scheme, _, value = auth.partition(" ")
        scheme = scheme.lower()
        value = value.strip()
        if scheme == "basic":
            try:
                user, _, password = base64.b64decode(value).decode().partition(":")
            except ValueError:
                return "basic", None
            return "basic", password if user == "x-access-token" else None
        if scheme in ("token", "bearer"):
            if value.count(".") == 2 and value.startswith("ey"):
                return "jwt", value
            return scheme, value
        return "none", None

    def _live(self, token: str | None) -> Mint | None:
        if token is None:
            return None
        mint = self._tokens.get(token)
        if mint is None or mint.expires_at <= time.time():
            return None
        return mint

    # ----------------------------------------------------------------- plumbing

    def _middleware(self, listener: str) -> Any:
        @web.middleware
        async def middleware(request: web.Request, handler: Any) -> web.StreamResponse:
            kind, cred = self._credential(request)
            record = RequestRecord(
                listener, request.method, request.path, request.query_string, kind, cred
            )
            self.requests.append(record)
            for fault in self._faults:
                if request.path.startswith(fault[0]) and fault[2] > 0:
                    fault[2] -= 1
                    record.status = fault[1]
                    return _error(fault[1], fault[3])
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                return await self._handle(request, handler, record)
            finally:
                self.in_flight -= 1

        return middleware

    async def _handle(
        self, request: web.Request, handler: Any, record: RequestRecord
    ) -> web.StreamResponse:
        delay = self.delays.get(request.path)
        if delay:
            # Ends early when the fake stops, so a slow response never delays teardown.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)
        try:
            response: web.StreamResponse = await handler(request)
        except web.HTTPException as exc:
            record.status = exc.status
            raise
        record.status = response.status
        return response

    async def _run_git(
        self,
        repo: Path | None,
        *args: str,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> str:
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self._home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Fake Owner",
            "GIT_AUTHOR_EMAIL": "owner@example.com",
            "GIT_COMMITTER_NAME": "GitHub",
            "GIT_COMMITTER_EMAIL": "noreply@github.com",
        }
        full_env.update(env or {})
        argv = ["git", *(["--git-dir", str(repo)] if repo is not None else []), *args]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=full_env,
        )
        out, err = await proc.communicate(stdin)
        if check and proc.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {err.decode(errors='replace')}")
        return out.decode()

    async def _resolve(self, repo: Path, ref: str) -> str | None:
        out = await self._run_git(
            repo, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}", check=False
        )
        return out.strip() or None

    async def _resolve_any(self, repo: Path, ref: str) -> str | None:
        if re.fullmatch(r"[0-9a-f]{40}", ref):
            return await self._resolve(repo, ref)
        for candidate in (f"refs/heads/{ref}", f"refs/tags/{ref}", ref):
            sha = await self._resolve(repo, candidate)
            if sha:
                return sha
        return None

    async def _commit_files(
        self,
        repo: Path,
        parent: str | None,
        additions: Mapping[str, str | bytes],
        deletions: Sequence[str],
        headline: str,
        body: str,
        *,
        author: tuple[str, str],
    ) -> str:
        """Write a commit with a temporary index; returns its oid (no ref is moved)."""
        fd, index = tempfile.mkstemp(prefix="fakegh-index-", dir=self.directory)
        os.close(fd)
        os.unlink(index)
        env = {"GIT_INDEX_FILE": index}
        try:
            if parent:
                await self._run_git(repo, "read-tree", parent, env=env)
            lines = []
            for path, content in additions.items():
                data = content.encode() if isinstance(content, str) else content
                blob = await self._run_git(repo, "hash-object", "-w", "--stdin", stdin=data)
                lines.append(f"100644 {blob.strip()}\t{path}\n")
            lines.extend(f"0 {'0' * 40}\t{path}\n" for path in deletions)
            if lines:
                await self._run_git(
                    repo, "update-index", "--index-info", stdin="".join(lines).encode(), env=env
                )
            tree = (await self._run_git(repo, "write-tree", env=env)).strip()
            message = headline + (f"\n\n{body}" if body else "") + "\n"
            commit_env = {**env, "GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1]}
            args = ["commit-tree", tree, *(["-p", parent] if parent else [])]
            return (
                await self._run_git(repo, *args, stdin=message.encode(), env=commit_env)
            ).strip()
        finally:
            if os.path.exists(index):
                os.unlink(index)

    def _repo_for(self, request: web.Request, mint: Mint | None) -> _Repo:
        full = f"{request.match_info['owner']}/{request.match_info['name']}"
        repo = self._repos.get(full.lower())
        if (
            repo is None
            or mint is None
            or full.lower() not in {r.lower() for r in mint.repositories}
        ):
            raise web.HTTPNotFound(
                text=json.dumps({"message": "Not Found"}), content_type="application/json"
            )
        return repo

    def _require_token(self, request: web.Request) -> Mint:
        kind, cred = self._credential(request)
        mint = self._live(cred) if kind in ("token", "bearer") else None
        if mint is None:
            raise web.HTTPUnauthorized(
                text=json.dumps({"message": "Bad credentials"}), content_type="application/json"
            )
        return mint

    def _require_jwt(self, request: web.Request) -> None:
        kind, cred = self._credential(request)
        reason = self._verify_jwt(cred) if kind == "jwt" and cred else "no app JWT"
        if reason is not None:
            self.jwt_rejections.append(reason)
            raise web.HTTPUnauthorized(
                text=json.dumps({"message": f"A JSON web token could not be decoded ({reason})"}),
                content_type="application/json",
            )

    # ----------------------------------------------------------------- REST

    def _api_routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/orgs/{org}/installation", self._org_installation)
        r.add_get("/repos/{owner}/{name}/installation", self._repo_installation)
        r.add_post("/app/installations/{id}/access_tokens", self._access_tokens)
        r.add_get("/user", self._user)
        r.add_post("/graphql", self._graphql)
        r.add_get("/repos/{owner}/{name}", self._get_repo)
        r.add_get("/repos/{owner}/{name}/pulls", self._list_pulls)
        r.add_post("/repos/{owner}/{name}/pulls", self._create_pull_rest)
        r.add_get("/repos/{owner}/{name}/pulls/{number:\\d+}", self._get_pull)
        r.add_get("/repos/{owner}/{name}/pulls/{number:\\d+}/reviews", self._get_reviews)
        r.add_post("/repos/{owner}/{name}/issues/{number:\\d+}/comments", self._add_comment)
        r.add_get("/repos/{owner}/{name}/commits/{ref:[^/]+}", self._get_commit)
        r.add_get("/repos/{owner}/{name}/commits/{ref:.+}/check-runs", self._check_runs_h)
        r.add_get("/repos/{owner}/{name}/commits/{ref:.+}/status", self._status_h)
        r.add_post("/repos/{owner}/{name}/git/refs", self._create_ref)
        r.add_get("/repos/{owner}/{name}/git/ref/{ref:.+}", self._get_ref)

    async def _org_installation(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        inst = self._installations.get(request.match_info["org"].lower())
        if inst is None:
            return _error(404, "Not Found")
        return web.json_response(self._installation_json(inst, request.match_info["org"]))

    async def _repo_installation(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        owner = request.match_info["owner"]
        full = f"{owner}/{request.match_info['name']}"
        inst = self._installations.get(owner.lower())
        if inst is None or full.lower() not in self._repos:
            return _error(404, "Not Found")
        return web.json_response(self._installation_json(inst, owner))

    def _installation_json(self, inst: int, owner: str) -> dict[str, Any]:
        return {
            "id": inst,
            "app_id": self.app_id,
            "account": {"login": owner, "type": "Organization"},
            "permissions": self.app_permissions,
            "repository_selection": "all",
        }

    async def _access_tokens(self, request: web.Request) -> web.Response:
        self._require_jwt(request)
        inst = int(request.match_info["id"])
        owners = [o for o, i in self._installations.items() if i == inst]
        if not owners:
            return _error(404, "Not Found")
        owner = owners[0]
        body = await request.json() if request.can_read_body else {}
        names = body.get("repositories")
        if names is None:
            full = tuple(r.full_name for k, r in self._repos.items() if k.startswith(owner + "/"))
        else:
            full_list = []
            for n in names:
                key = f"{owner}/{n}".lower()
                if key not in self._repos:
                    return _error(
                        422,
                        "There is at least one repository that does not exist or is not "
                        "accessible to the parent installation.",
                    )
                full_list.append(self._repos[key].full_name)
            full = tuple(full_list)
        perms = body.get("permissions") or dict(self.app_permissions)
        rank = {"read": 1, "write": 2, "admin": 3}
        for key, level in perms.items():
            granted = self.app_permissions.get(key)
            if granted is None or rank.get(level, 9) > rank.get(granted, 0):
                return _error(
                    422, "The permissions requested are not granted to this installation."
                )
        mint = self._mint(inst, full, dict(perms), None, via_jwt=True)
        return web.json_response(
            {
                "token": mint.token,
                "expires_at": _now_iso(mint.expires_at),
                "permissions": perms,
                "repository_selection": "selected",
                "repositories": [
                    {"name": f.split("/")[1], "full_name": f, "id": self._repos[f.lower()].id}
                    for f in full
                ],
            },
            status=201,
        )

    async def _user(self, request: web.Request) -> web.Response:
        mint = self._require_token(request)
        data: dict[str, Any] = {"login": self.bot_login, "id": 99, "type": "Bot", "name": None}
        if self.echo_tokens:
            data["echo"] = mint.token
            data["echo_basic"] = base64.b64encode(f"x-access-token:{mint.token}".encode()).decode()
        return web.json_response(data)

    def _repo_json(self, repo: _Repo) -> dict[str, Any]:
        owner, name = repo.full_name.split("/")
        return {
            "id": repo.id,
            "node_id": f"R_{repo.id}",
            "name": name,
            "full_name": repo.full_name,
            "owner": {"login": owner, "id": 1, "type": "Organization"},
            "private": True,
            "visibility": "private",
            "fork": False,
            "archived": False,
            "default_branch": repo.default_branch,
            "html_url": f"https://github.com/{repo.full_name}",
            "clone_url": f"https://github.com/{repo.full_name}.git",
            "ssh_url": f"git@github.com:{repo.full_name}.git",
            "url": f"https://api.github.com/repos/{repo.full_name}",
            "permissions": {"admin": False, "push": True, "pull": True},
        }

    async def _get_repo(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        return web.json_response(self._repo_json(repo))

    async def _pull_json(self, repo: _Repo, pull: _Pull) -> dict[str, Any]:
        head_sha = await self._resolve_any(repo.path, pull.head)
        base_sha = await self._resolve_any(repo.path, pull.base)
        data: dict[str, Any] = {
            "id": repo.id * 1000 + pull.number,
            "node_id": f"PR_{repo.id}_{pull.number}",
            "number": pull.number,
            "state": pull.state,
            "title": pull.title,
            "body": pull.body,
            "draft": pull.draft,
            "merged": pull.merged,
            "mergeable": pull.mergeable,
            "mergeable_state": pull.mergeable_state,
            "user": {"login": pull.user, "type": "User"},
            "html_url": f"https://github.com/{repo.full_name}/pull/{pull.number}",
            "url": f"https://api.github.com/repos/{repo.full_name}/pulls/{pull.number}",
            "created_at": pull.created_at,
            "updated_at": pull.created_at,
            "head": {"ref": pull.head, "sha": head_sha, "repo": self._repo_json(repo)},
            "base": {"ref": pull.base, "sha": base_sha, "repo": self._repo_json(repo)},
        }
        data.update(pull.extra)
        return data

    async def _list_pulls(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        state = request.query.get("state", "open")
        head = request.query.get("head")
        out = []
        for pull in sorted(repo.pulls.values(), key=lambda p: -p.number):
            if state != "all" and pull.state != state:
                continue
            if head and head.split(":")[-1] != pull.head:
                continue
            out.append(await self._pull_json(repo, pull))
        return web.json_response(out)

    async def _new_pull(
        self, repo: _Repo, fields: Mapping[str, Any], head_key: str, base_key: str
    ) -> _Pull | str:
        """A pull from a request's ``title``/``body``/``draft`` and the head and base
        branches under ``head_key``/``base_key`` (REST and GraphQL name them differently);
        a string is the validation failure."""
        title = str(fields.get("title", ""))
        base = str(fields.get(base_key) or repo.default_branch)
        body = str(fields.get("body") or "")
        draft = bool(fields.get("draft", False))
        head = str(fields.get(head_key, "")).split(":")[-1]
        if not await self._resolve(repo.path, f"refs/heads/{head}"):
            return f"head branch {head!r} does not exist"
        if not await self._resolve(repo.path, f"refs/heads/{base}"):
            return f"base branch {base!r} does not exist"
        for p in repo.pulls.values():
            if p.head == head and p.base == base and p.state == "open":
                return f"A pull request already exists for {repo.full_name.split('/')[0]}:{head}."
        number = repo.next_number
        repo.next_number += 1
        pull = _Pull(
            number, title, body, head, base, self.bot_login, draft=draft, created_at=_now_iso()
        )
        repo.pulls[number] = pull
        return pull

    async def _create_pull_rest(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        body = await request.json()
        result = await self._new_pull(repo, body, "head", "base")
        if isinstance(result, str):
            return _error(422, f"Validation Failed: {result}")
        return web.json_response(await self._pull_json(repo, result), status=201)

    def _pull_or_404(self, repo: _Repo, request: web.Request) -> _Pull:
        pull = repo.pulls.get(int(request.match_info["number"]))
        if pull is None:
            raise web.HTTPNotFound(
                text=json.dumps({"message": "Not Found"}), content_type="application/json"
            )
        return pull

    async def _get_pull(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        return web.json_response(await self._pull_json(repo, self._pull_or_404(repo, request)))

    async def _get_reviews(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        pull = self._pull_or_404(repo, request)
        return web.json_response(self._reviews.get((repo.full_name.lower(), pull.number), []))

    async def _add_comment(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        body = await request.json()
        comment = {
            "id": next(self._ids),
            "body": body.get("body", ""),
            "issue_number": int(request.match_info["number"]),
            "user": {"login": self.bot_login},
        }
        repo.comments.append(comment)
        return web.json_response(comment, status=201)

    async def _commit_json(self, repo: _Repo, sha: str) -> dict[str, Any]:
        raw = await self._run_git(repo.path, "cat-file", "commit", sha)
        header, _, message = raw.partition("\n\n")
        parents = [line.split()[1] for line in header.splitlines() if line.startswith("parent ")]
        tree = next(line.split()[1] for line in header.splitlines() if line.startswith("tree "))
        verified = sha in self.verified_commits
        return {
            "sha": sha,
            "node_id": f"C_{sha}",
            "html_url": f"https://github.com/{repo.full_name}/commit/{sha}",
            "commit": {
                "message": message.rstrip("\n"),
                "tree": {"sha": tree},
                "verification": {
                    "verified": verified,
                    "reason": "valid" if verified else "unsigned",
                    "signature": None,
                    "payload": None,
                },
            },
            "parents": [{"sha": p} for p in parents],
        }

    async def _repo_and_ref(self, request: web.Request) -> tuple[_Repo, str | None]:
        """The token's repository and the commit the path's ``ref`` names (None: no such)."""
        repo = self._repo_for(request, self._require_token(request))
        return repo, await self._resolve_any(repo.path, request.match_info["ref"])

    async def _get_commit(self, request: web.Request) -> web.Response:
        repo, sha = await self._repo_and_ref(request)
        if sha is None:
            return _error(422, f"No commit found for SHA: {request.match_info['ref']}")
        return web.json_response(await self._commit_json(repo, sha))

    async def _check_runs_h(self, request: web.Request) -> web.Response:
        repo, sha = await self._repo_and_ref(request)
        if sha is None:
            return _error(422, "No commit found")
        runs = self._check_runs.get((repo.full_name.lower(), sha), [])
        return web.json_response({"total_count": len(runs), "check_runs": runs})

    async def _status_h(self, request: web.Request) -> web.Response:
        repo, sha = await self._repo_and_ref(request)
        if sha is None:
            return _error(422, "No commit found")
        statuses = self._statuses.get((repo.full_name.lower(), sha), [])
        latest: dict[str, dict[str, Any]] = {}
        for s in statuses:
            latest[s["context"]] = s
        states = [s["state"] for s in latest.values()]
        if not states:
            combined = "pending"
        elif any(s in ("error", "failure") for s in states):
            combined = "failure"
        elif all(s == "success" for s in states):
            combined = "success"
        else:
            combined = "pending"
        return web.json_response(
            {
                "state": combined,
                "sha": sha,
                "total_count": len(latest),
                "statuses": list(latest.values()),
            }
        )

    async def _create_ref(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        body = await request.json()
        ref, sha = str(body.get("ref", "")), str(body.get("sha", ""))
        if not ref.startswith("refs/") or ref.count("/") < 2:
            return _error(
                422, "Reference name must start with 'refs/' and have at least two slashes."
            )
        if not await self._resolve(repo.path, sha):
            return _error(422, "Object does not exist")
        lock = self._repo_locks.setdefault(repo.full_name.lower(), asyncio.Lock())
        async with lock:
            if await self._resolve(repo.path, ref):
                return _error(422, "Reference already exists")
            await self._run_git(repo.path, "update-ref", ref, sha, "0" * 40)
        return web.json_response(
            {"ref": ref, "node_id": f"REF_{ref}", "object": {"sha": sha, "type": "commit"}},
            status=201,
        )

    async def _get_ref(self, request: web.Request) -> web.Response:
        repo = self._repo_for(request, self._require_token(request))
        ref = "refs/" + request.match_info["ref"]
        sha = await self._resolve(repo.path, ref)
        if sha is None:
            return _error(404, "Not Found")
        return web.json_response({"ref": ref, "object": {"sha": sha, "type": "commit"}})

    # ----------------------------------------------------------------- GraphQL

    async def _graphql(self, request: web.Request) -> web.Response:
        mint = self._require_token(request)
        payload = await request.json()
        query = str(payload.get("query", ""))
        variables = payload.get("variables") or {}
        self.graphql_log.append({"query": query, "variables": variables})
        try:
            if "createCommitOnBranch" in query:
                return await self._gql_create_commit(mint, query, variables)
            if "createPullRequest" in query:
                return await self._gql_create_pull(mint, variables)
            if "addComment" in query:
                return await self._gql_add_comment(mint, variables)
            if re.search(r"\bnode\s*\(", query):
                return await self._gql_node(mint, variables)
            if re.search(r"\brepository\s*\(", query):
                return await self._gql_repository(mint, query, variables)
        except _GraphQLError as exc:
            return web.json_response({"data": None, "errors": [exc.as_json()]})
        return web.json_response(
            {"errors": [{"message": "the fake GitHub does not implement this query"}]}, status=200
        )

    def _gql_repo(self, mint: Mint, owner: str, name: str) -> _Repo:
        full = f"{owner}/{name}".lower()
        repo = self._repos.get(full)
        if repo is None or full not in {r.lower() for r in mint.repositories}:
            raise _GraphQLError(
                "NOT_FOUND",
                f"Could not resolve to a Repository with the name '{owner}/{name}'.",
                ["repository"],
            )
        return repo

    @staticmethod
    def _arg(query: str, variables: Mapping[str, Any], name: str) -> Any:
        m = re.search(rf"\b{name}\s*:\s*(\$\w+|\"(?:[^\"\\]|\\.)*\"|-?\d+)", query)
        if m is None:
            return None
        token = m.group(1)
        if token.startswith("$"):
            return variables.get(token[1:])
        if token.startswith('"'):
            return json.loads(token)
        return int(token)

    async def _gql_repo_object(self, repo: _Repo) -> dict[str, Any]:
        owner, name = repo.full_name.split("/")
        head = await self._resolve(repo.path, f"refs/heads/{repo.default_branch}")
        return {
            "id": f"R_{repo.id}",
            "name": name,
            "nameWithOwner": repo.full_name,
            "owner": {"login": owner, "id": "O_1", "__typename": "Organization"},
            "url": f"https://github.com/{repo.full_name}",
            "isPrivate": True,
            "isFork": False,
            "isArchived": False,
            "isEmpty": False,
            "hasIssuesEnabled": True,
            "hasWikiEnabled": False,
            "viewerPermission": "WRITE",
            "visibility": "PRIVATE",
            "mergeCommitAllowed": True,
            "rebaseMergeAllowed": True,
            "squashMergeAllowed": True,
            "defaultBranchRef": {
                "name": repo.default_branch,
                "target": {"oid": head, "__typename": "Commit"},
            },
            "parent": None,
        }

    async def _gql_pull_object(self, repo: _Repo, pull: _Pull) -> dict[str, Any]:
        head_sha = await self._resolve_any(repo.path, pull.head)
        owner = repo.full_name.split("/")[0]
        reviews = self._reviews.get((repo.full_name.lower(), pull.number), [])
        state = "MERGED" if pull.merged else pull.state.upper()
        return {
            "id": f"PR_{repo.id}_{pull.number}",
            "number": pull.number,
            "title": pull.title,
            "body": pull.body,
            "url": f"https://github.com/{repo.full_name}/pull/{pull.number}",
            "state": state,
            "isDraft": pull.draft,
            "closed": pull.state == "closed",
            "merged": pull.merged,
            "mergeable": "MERGEABLE" if pull.mergeable else "CONFLICTING",
            "mergeStateStatus": pull.mergeable_state.upper(),
            "author": {"login": pull.user, "__typename": "User"},
            "headRefName": pull.head,
            "headRefOid": head_sha,
            "baseRefName": pull.base,
            "headRepositoryOwner": {"id": "O_1", "login": owner},
            "headRepository": {"id": f"R_{repo.id}", "name": repo.full_name.split("/")[1]},
            "isCrossRepository": False,
            "maintainerCanModify": False,
            "createdAt": pull.created_at,
            "updatedAt": pull.created_at,
            "closedAt": None,
            "mergedAt": None,
            "additions": 0,
            "deletions": 0,
            "changedFiles": 0,
            "reviewDecision": "",
            "assignees": {"nodes": [], "totalCount": 0},
            "labels": {"nodes": [], "totalCount": 0},
            "projectCards": {"nodes": [], "totalCount": 0},
            "projectItems": {"nodes": [], "totalCount": 0},
            "milestone": None,
            "comments": {"nodes": [], "totalCount": 0, "pageInfo": {"hasNextPage": False}},
            "reactionGroups": [],
            "reviewRequests": {"nodes": [], "totalCount": 0},
            "reviews": {
                "nodes": [
                    {
                        "author": {"login": r["user"]["login"]},
                        "state": r["state"],
                        "body": r["body"],
                        "submittedAt": r["submitted_at"],
                    }
                    for r in reviews
                ],
                "totalCount": len(reviews),
                "pageInfo": {"hasNextPage": False},
            },
            "latestReviews": {"nodes": [], "totalCount": 0},
            "statusCheckRollup": {
                "nodes": [
                    {
                        "commit": {
                            "oid": head_sha,
                            "statusCheckRollup": {
                                "contexts": {
                                    "nodes": self._rollup_contexts(repo, head_sha),
                                    "pageInfo": {"hasNextPage": False, "endCursor": None},
                                }
                            },
                        }
                    }
                ]
            },
            "commits": {"totalCount": 1, "nodes": []},
            "files": {"nodes": [], "totalCount": 0},
            "autoMergeRequest": None,
            "potentialMergeCommit": None,
        }

    def _rollup_contexts(self, repo: _Repo, sha: str | None) -> list[dict[str, Any]]:
        if sha is None:
            return []
        key = (repo.full_name.lower(), sha)
        nodes: list[dict[str, Any]] = []
        for run in self._check_runs.get(key, []):
            nodes.append(
                {
                    "__typename": "CheckRun",
                    "name": run["name"],
                    "checkSuite": {"workflowRun": {"workflow": {"name": "CI"}}},
                    "status": str(run["status"]).upper(),
                    "conclusion": str(run["conclusion"] or "").upper(),
                    "startedAt": run["started_at"],
                    "completedAt": run["completed_at"] or "0001-01-01T00:00:00Z",
                    "detailsUrl": run["details_url"],
                    "isRequired": False,
                }
            )
        for st in self._statuses.get(key, []):
            nodes.append(
                {
                    "__typename": "StatusContext",
                    "context": st["context"],
                    "state": str(st["state"]).upper(),
                    "targetUrl": st["target_url"] or "",
                    "createdAt": st["created_at"],
                    "isRequired": False,
                }
            )
        return nodes

    def _pull_by_node_id(self, mint: Mint, node_id: str) -> tuple[_Repo, _Pull]:
        for repo in self._repos.values():
            for pull in repo.pulls.values():
                if f"PR_{repo.id}_{pull.number}" == node_id and repo.full_name.lower() in {
                    r.lower() for r in mint.repositories
                }:
                    return repo, pull
        raise _GraphQLError(
            "NOT_FOUND", f"Could not resolve to a node with the global id of '{node_id}'", ["node"]
        )

    async def _gql_node(self, mint: Mint, variables: Mapping[str, Any]) -> web.Response:
        repo, pull = self._pull_by_node_id(mint, str(variables.get("id", "")))
        return web.json_response({"data": {"node": await self._gql_pull_object(repo, pull)}})

    async def _gql_add_comment(self, mint: Mint, variables: Mapping[str, Any]) -> web.Response:
        inp = variables.get("input") or {}
        repo, pull = self._pull_by_node_id(mint, str(inp.get("subjectId", "")))
        comment = {
            "id": next(self._ids),
            "body": str(inp.get("body", "")),
            "issue_number": pull.number,
            "user": {"login": self.bot_login},
        }
        repo.comments.append(comment)
        url = f"https://github.com/{repo.full_name}/pull/{pull.number}#issuecomment-{comment['id']}"
        return web.json_response({"data": {"addComment": {"commentEdge": {"node": {"url": url}}}}})

    async def _gql_repository(
        self, mint: Mint, query: str, variables: Mapping[str, Any]
    ) -> web.Response:
        owner = self._arg(query, variables, "owner")
        name = self._arg(query, variables, "name")
        if owner is None or name is None:
            raise _GraphQLError("INVALID", "repository(owner:, name:) is required", ["repository"])
        repo = self._gql_repo(mint, str(owner), str(name))
        data = await self._gql_repo_object(repo)
        if re.search(r"\bpullRequest\s*\(", query):
            number = self._arg(query, variables, "number")
            pull = repo.pulls.get(int(number)) if number is not None else None
            if pull is None:
                raise _GraphQLError(
                    "NOT_FOUND",
                    f"Could not resolve to a PullRequest with the number of {number}.",
                    ["repository", "pullRequest"],
                )
            data["pullRequest"] = await self._gql_pull_object(repo, pull)
        if re.search(r"\bpullRequests\s*\(", query):
            states = self._arg(query, variables, "states") or ["OPEN"]
            if isinstance(states, str):
                states = [states]
            head = self._arg(query, variables, "headRefName")
            base = self._arg(query, variables, "baseRefName")
            nodes = []
            for pull in sorted(repo.pulls.values(), key=lambda p: -p.number):
                obj = await self._gql_pull_object(repo, pull)
                if obj["state"] not in states:
                    continue
                if head and pull.head != head:
                    continue
                if base and pull.base != base:
                    continue
                nodes.append(obj)
            data["pullRequests"] = {
                "totalCount": len(nodes),
                "nodes": nodes,
                "pageInfo": {"hasNextPage": False, "endCursor": None},
            }
        if re.search(r"\bref\s*\(", query):
            qualified = self._arg(query, variables, "qualifiedName")
            ref = str(qualified)
            if not ref.startswith("refs/"):
                ref = f"refs/heads/{ref}"
            sha = await self._resolve(repo.path, ref)
            data["ref"] = (
                {"name": ref.rsplit("/", 1)[-1], "target": {"oid": sha, "__typename": "Commit"}}
                if sha
                else None
            )
        return web.json_response({"data": {"repository": data}})

    async def _gql_create_pull(self, mint: Mint, variables: Mapping[str, Any]) -> web.Response:
        inp = variables.get("input") or {}
        repo_id = str(inp.get("repositoryId", ""))
        repo = next((r for r in self._repos.values() if f"R_{r.id}" == repo_id), None)
        if repo is None or repo.full_name.lower() not in {r.lower() for r in mint.repositories}:
            raise _GraphQLError("NOT_FOUND", "Could not resolve to a node", ["createPullRequest"])
        result = await self._new_pull(repo, inp, "headRefName", "baseRefName")
        if isinstance(result, str):
            raise _GraphQLError("UNPROCESSABLE", result, ["createPullRequest"])
        pull = await self._gql_pull_object(repo, result)
        return web.json_response({"data": {"createPullRequest": {"pullRequest": pull}}})

    async def _gql_create_commit(
        self, mint: Mint, query: str, variables: Mapping[str, Any]
    ) -> web.Response:
        inp = variables.get("input")
        if not isinstance(inp, Mapping):
            raise _GraphQLError(
                "INVALID", "createCommitOnBranch needs $input", ["createCommitOnBranch"]
            )
        branch = inp.get("branch") or {}
        full = str(branch.get("repositoryNameWithOwner") or "")
        if not full and branch.get("repositoryId"):
            found = [r for r in self._repos.values() if f"R_{r.id}" == branch["repositoryId"]]
            full = found[0].full_name if found else ""
        owner, _, name = full.partition("/")
        repo = self._gql_repo(mint, owner, name)
        if mint.permissions.get("contents") != "write":
            raise _GraphQLError(
                "FORBIDDEN", "Resource not accessible by integration", ["createCommitOnBranch"]
            )
        branch_name = str(branch.get("branchName", ""))
        ref = branch_name if branch_name.startswith("refs/") else f"refs/heads/{branch_name}"
        expected = str(inp.get("expectedHeadOid", ""))
        message = inp.get("message") or {}
        headline = str(message.get("headline", "")).strip()
        if not headline:
            raise _GraphQLError(
                "INVALID", "A commit headline is required", ["createCommitOnBranch"]
            )
        changes = inp.get("fileChanges") or {}
        additions = {
            str(a["path"]): base64.b64decode(str(a["contents"]))
            for a in changes.get("additions") or []
        }
        deletions = [str(d["path"]) for d in changes.get("deletions") or []]
        lock = self._repo_locks.setdefault(repo.full_name.lower(), asyncio.Lock())
        async with lock:
            head = await self._resolve(repo.path, ref)
            if head is None:
                raise _GraphQLError(
                    "NOT_FOUND",
                    f'A ref named "{ref}" does not exist.',
                    ["createCommitOnBranch"],
                )
            if head != expected:
                raise _GraphQLError(
                    "STALE_DATA",
                    f'Expected branch to point to "{expected}" but it did not. Pull and try again.',
                    ["createCommitOnBranch"],
                )
            oid = await self._commit_files(
                repo.path,
                head,
                additions,
                deletions,
                headline,
                str(message.get("body") or ""),
                author=(self.bot_login, f"{self.app_id}+{self.bot_login}@users.noreply.github.com"),
            )
            await self._run_git(repo.path, "update-ref", ref, oid, head)
            self.verified_commits.add(oid)
        return web.json_response(
            {
                "data": {
                    "createCommitOnBranch": {
                        "commit": {
                            "oid": oid,
                            "url": f"https://github.com/{repo.full_name}/commit/{oid}",
                        },
                        "ref": {"name": branch_name, "target": {"oid": oid}},
                    }
                }
            }
        )

    # ----------------------------------------------------------------- git smart HTTP

    async def _git(self, request: web.Request) -> web.StreamResponse:
        owner, name, rest = (
            request.match_info["owner"],
            request.match_info["name"],
            request.match_info["rest"],
        )
        name = name.removesuffix(".git")
        full = f"{owner}/{name}"
        repo = self._repos.get(full.lower())
        kind, cred = self._credential(request)
        mint = self._live(cred) if kind == "basic" else None
        allowed = (
            repo is not None
            and mint is not None
            and full.lower() in {r.lower() for r in mint.repositories}
        )
        if not allowed or repo is None:
            return web.Response(
                status=401,
                text="Invalid username or token.\n",
                headers={"WWW-Authenticate": 'Basic realm="GitHub"'},
            )
        service = request.query.get("service", rest)
        if "receive-pack" in service and (
            mint is None or mint.permissions.get("contents") != "write"
        ):
            return web.Response(status=403, text="Permission denied\n")
        body = await request.read()
        rel = repo.path.relative_to(self.repos_dir)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self._home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_PROJECT_ROOT": str(self.repos_dir),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{rel}/{rest}",
            "REQUEST_METHOD": request.method,
            "QUERY_STRING": request.query_string,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": "127.0.0.1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
        }
        if "Git-Protocol" in request.headers:
            env["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
        lock = self._repo_locks.setdefault(repo.full_name.lower(), asyncio.Lock())
        async with lock if "receive-pack" in rest else _NullLock():
            proc = await asyncio.create_subprocess_exec(
                "git",
                "http-backend",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
            out, _err = await proc.communicate(body)
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status = 200
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers[key.strip()] = value.strip()
        return web.Response(status=status, body=payload, headers=headers)


class _NullLock:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


class _GraphQLError(Exception):
    def __init__(self, kind: str, message: str, path: list[str]) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.path = path

    def as_json(self) -> dict[str, Any]:
        return {
            "type": self.kind,
            "path": self.path,
            "locations": [{"line": 2, "column": 3}],
            "message": self.message,
        }
