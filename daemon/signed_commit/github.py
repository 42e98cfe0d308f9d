"""GitHub over HTTPS with the standard library only: REST and GraphQL.

The sandbox image needs nothing beyond Python for this script, so it uses
``urllib``: ``ProxyHandler()`` honours ``HTTPS_PROXY``/``NO_PROXY`` (and sends
the proxy credentials from the URL on CONNECT), and the TLS context trusts
``SSL_CERT_FILE`` (where the sandbox image installs the proxy's CA). The token
is the placeholder ``GH_TOKEN``; the proxy swaps it for the real one on the way
out, so nothing here ever sees a real credential.

Endpoints: ``GITHUB_API_URL`` (REST base, e.g. ``https://ghe.example/api/v3``)
and ``GITHUB_GRAPHQL_URL`` win; else ``GH_HOST`` names a GitHub Enterprise host;
else github.com.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from .errors import SignedCommitError

USER_AGENT = "airlock-signed-commit"
_TIMEOUT_S = 120.0
_MAX_ERROR_TEXT = 300


@dataclass(frozen=True)
class Endpoints:
    rest: str
    graphql: str
    git_host: str

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Endpoints:
        env = os.environ if env is None else env
        api = (env.get("GITHUB_API_URL") or "").rstrip("/")
        host = (env.get("GH_HOST") or "").strip().lower()
        if not api:
            if host and host != "github.com":
                api = f"https://{host}/api/v3"
            else:
                api = "https://api.github.com"
        graphql = (env.get("GITHUB_GRAPHQL_URL") or "").rstrip("/")
        if not graphql:
            graphql = (
                api[: -len("/api/v3")] + "/api/graphql"
                if api.endswith("/api/v3")
                else api + "/graphql"
            )
        if not host:
            netloc = urlsplit(api).netloc.lower()
            host = netloc[len("api.") :] if netloc.startswith("api.") else netloc
        return cls(rest=api, graphql=graphql, git_host=host)


class NetworkError(SignedCommitError):
    """GitHub could not be reached, or the connection broke mid-request."""


class HTTPError(SignedCommitError):
    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class GraphQLError(SignedCommitError):
    def __init__(self, errors: list[Any]) -> None:
        messages = "; ".join(
            str(e.get("message", e)) if isinstance(e, Mapping) else str(e) for e in errors
        )
        super().__init__(f"GitHub GraphQL error: {messages[: _MAX_ERROR_TEXT * 2]}")
        self.errors = errors

    @property
    def is_stale_head(self) -> bool:
        """Whether GitHub refused because the branch moved (``expectedHeadOid``)."""
        for err in self.errors:
            if not isinstance(err, Mapping):
                continue
            text = str(err.get("message", "")).lower()
            if (
                err.get("type") == "STALE_DATA"
                or "expectedheadoid" in text
                or "expected branch to point to" in text
            ):
                return True
        return False


def ssl_context(env: Mapping[str, str] | None = None) -> ssl.SSLContext:
    env = os.environ if env is None else env
    cafile = env.get("SSL_CERT_FILE") or None
    return ssl.create_default_context(cafile=cafile)


class GitHubClient:
    """REST and GraphQL calls with ``Authorization: bearer <GH_TOKEN>``."""

    def __init__(self, endpoints: Endpoints, token: str, context: ssl.SSLContext) -> None:
        self.endpoints = endpoints
        self._token = token
        self._opener = urllib.request.build_opener(
            urllib.request.ProxyHandler(), urllib.request.HTTPSHandler(context=context)
        )

    def _request(self, method: str, url: str, payload: Any | None) -> tuple[int, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"bearer {self._token}")
        req.add_header("Accept", "application/vnd.github+json")
        req.add_header("X-GitHub-Api-Version", "2022-11-28")
        req.add_header("User-Agent", USER_AGENT)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with self._opener.open(req, timeout=_TIMEOUT_S) as resp:
                return resp.status, _json(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _json(exc.read())
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise NetworkError(
                f"cannot reach {urlsplit(url).netloc} ({reason}). gh-signed-commit reaches "
                "GitHub through HTTPS_PROXY; run it through the GitHub shell tool."
            ) from None

    def rest(self, method: str, path: str, payload: Any | None = None) -> tuple[int, Any]:
        return self._request(method, self.endpoints.rest + path, payload)

    def graphql(self, query: str, variables: Mapping[str, Any]) -> Any:
        status, body = self._request(
            "POST", self.endpoints.graphql, {"query": query, "variables": dict(variables)}
        )
        if status >= 400 and not (isinstance(body, Mapping) and body.get("errors")):
            raise http_error("GraphQL request", status, body)
        if not isinstance(body, Mapping):
            raise SignedCommitError("GitHub GraphQL answered something that is not JSON")
        if body.get("errors"):
            raise GraphQLError(list(body["errors"]))
        return body.get("data")

    # -- the REST calls the commit needs -------------------------------------

    def branch_head(self, repo: str, branch: str) -> str | None:
        """The branch's head commit, or None when the branch does not exist."""
        status, body = self.rest("GET", f"/repos/{repo}/git/ref/heads/{quote(branch, safe='/')}")
        if status == 404:
            return None
        if status != 200:
            raise http_error(f"looking up branch {branch}", status, body)
        sha = _get(body, "object", "sha")
        if not isinstance(sha, str) or not sha:
            raise SignedCommitError(f"GitHub returned no commit for branch {branch}")
        return sha

    def default_branch(self, repo: str) -> str:
        status, body = self.rest("GET", f"/repos/{repo}")
        if status != 200:
            raise http_error(f"reading repository {repo}", status, body)
        name = _get(body, "default_branch")
        if not isinstance(name, str) or not name:
            raise SignedCommitError(f"GitHub returned no default branch for {repo}")
        return name

    def create_branch(self, repo: str, branch: str, sha: str) -> bool:
        """Create ``branch`` at ``sha``; False when it already exists (a race)."""
        status, body = self.rest(
            "POST", f"/repos/{repo}/git/refs", {"ref": f"refs/heads/{branch}", "sha": sha}
        )
        if status in (200, 201):
            return True
        if status == 422 and "already exists" in str(_get(body, "message") or "").lower():
            return False
        raise http_error(f"creating branch {branch}", status, body)


def http_error(what: str, status: int, body: Any) -> HTTPError:
    message = str(_get(body, "message") or "")[:_MAX_ERROR_TEXT]
    hint = {
        401: "the credential was not accepted; run gh-signed-commit through the GitHub shell tool",
        403: "the credential lacks access (contents: write) to this repository",
        404: "the repository or branch does not exist, or the credential cannot see it",
    }.get(status, "")
    detail = "; ".join(p for p in (message, hint) if p)
    return HTTPError(
        f"{what}: GitHub answered HTTP {status}" + (f" ({detail})" if detail else ""), status
    )


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None


def _get(body: Any, *path: str) -> Any:
    for part in path:
        if not isinstance(body, Mapping):
            return None
        body = body.get(part)
    return body
