"""Wire shapes of the airlock-proxy control API.

One source of truth for the server (``airlock.proxy.control``) and the client
(``airlock.client.proxy``). This module is import-light on purpose: it pulls in
neither mitmproxy nor aiohttp, so an orchestrator can depend on it cheaply.

Real tokens only ever travel *into* the proxy (``Replacement.token``); no model
that the proxy sends back carries one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "ERROR_STATUS",
    "Allow",
    "ErrorBody",
    "ErrorDetail",
    "Event",
    "EventList",
    "GitAllow",
    "GraphQLAllow",
    "Health",
    "LeaseInfo",
    "LeaseList",
    "LeasePut",
    "LeaseRule",
    "LeaseRuleInfo",
    "Replacement",
    "SessionCreate",
    "SessionInfo",
    "error_json",
    "is_valid_hostname",
    "is_valid_id",
    "normalize_host",
    "strip_crlf",
]

# Session and lease ids travel in URLs and (session ids) as the proxy user name,
# so they must not contain ':', '@', '/' or anything needing escaping.
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_LABEL_RE = re.compile(r"^(?!-)[a-z0-9\-_]{1,63}(?<!-)$")
# A placeholder is matched byte-for-byte inside header values: no whitespace,
# no ':' (it must survive the Basic "user:password" split), printable ASCII.
_PLACEHOLDER_RE = re.compile(r"^[A-Za-z0-9_.\-~+/=]{8,512}$")

# Error codes of the control API and their HTTP statuses.
ERROR_STATUS: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "session_not_found": 404,
    "not_found": 404,
    "lease_scope": 403,
    "session_exists": 409,
    "placeholder_in_use": 409,
    "credential_unavailable": 424,
    "store_unavailable": 503,
    "internal": 500,
}


def is_valid_id(value: str) -> bool:
    """True for ids usable in URLs and as a proxy user name."""
    return bool(_ID_RE.match(value))


def normalize_host(host: str) -> str:
    """Lower-case, strip one trailing dot and IPv6 brackets."""
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host.removesuffix(".")


def is_valid_hostname(host: str) -> bool:
    """A plain DNS name (no wildcard, no port, no IP-literal check needed)."""
    if not host or len(host) > 253:
        return False
    return all(_LABEL_RE.match(label) for label in host.split("."))


def strip_crlf(value: str) -> str:
    """Remove CR, LF and NUL: a real value must never split a header."""
    return value.replace("\r", "").replace("\n", "").replace("\0", "")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


_METHOD_RE = re.compile(r"^[A-Za-z]{1,20}$")
_GLOB_RE = re.compile(r"^/[\x21-\x7e]{0,1023}$")
_REF_GLOB_RE = re.compile(r"^refs/[\x21-\x7e]{1,1019}$")
_REPO_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,100}/[A-Za-z0-9_.\-]{1,100}$")
_GQL_NAME_RE = re.compile(r"^[_A-Za-z][_0-9A-Za-z]{0,127}$")
_PERMISSION_RE = re.compile(r"^[a-z_]{1,64}$")


def _each_matches(values: Iterable[str] | None, pattern: re.Pattern[str], message: str) -> None:
    """Raise ``ValueError(message)`` unless every one of ``values`` matches
    ``pattern``: the one check behind every list-of-names field below."""
    for value in values or ():
        if not pattern.match(value):
            raise ValueError(message)


class GraphQLAllow(_Model):
    """GraphQL operations a rule allows (``POST /graphql``); subscriptions never."""

    operations: list[Literal["query", "mutation"]] = Field(min_length=1, max_length=2)
    names: list[str] | None = Field(default=None, max_length=256)

    @field_validator("names")
    @classmethod
    def _names(cls, value: list[str] | None) -> list[str] | None:
        _each_matches(
            value, _GQL_NAME_RE, "operation names are GraphQL names ([_A-Za-z][_0-9A-Za-z]*)"
        )
        return value


class GitAllow(_Model):
    """git smart HTTP a rule allows: fetch from ``repos``, push to ``push_refs``."""

    repos: list[str] = Field(min_length=1, max_length=64)
    push_refs: list[str] | None = Field(default=None, max_length=64)
    allow_delete: bool = False

    @field_validator("repos")
    @classmethod
    def _repos(cls, value: list[str]) -> list[str]:
        _each_matches(value, _REPO_RE, "repos are 'owner/name'")
        return value

    @field_validator("push_refs")
    @classmethod
    def _refs(cls, value: list[str] | None) -> list[str] | None:
        _each_matches(value, _REF_GLOB_RE, "push_refs are globs starting with 'refs/'")
        return value


class Allow(_Model):
    """What a rule's credential may do; every field narrows, none widens.

    ``methods`` and ``paths`` apply to every request of the rule except GraphQL
    requests when ``graphql`` is given (those are judged by operation); with
    ``git`` every request must be git smart HTTP for one of its repositories.
    """

    methods: list[str] | None = Field(default=None, min_length=1, max_length=16)
    paths: list[str] | None = Field(default=None, min_length=1, max_length=256)
    graphql: GraphQLAllow | None = None
    git: GitAllow | None = None

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        _each_matches(value, _METHOD_RE, "methods are HTTP method names such as GET")
        return [m.upper() for m in value]

    @field_validator("paths")
    @classmethod
    def _paths(cls, value: list[str] | None) -> list[str] | None:
        for glob in value or []:
            if not _GLOB_RE.match(glob) or "//" in glob or "?" in glob:
                raise ValueError("paths are globs starting with '/' (no '//', no query)")
        return value


class Replacement(_Model):
    """What the proxy writes in place of the placeholder.

    Either ``token`` (the real credential) or ``provider`` (the proxy mints the
    credential itself: ``github_app`` with ``repositories`` and
    ``permissions``). ``token`` is never echoed back by the proxy, and its
    ``repr`` is hidden so that it cannot leak through logs or tracebacks.
    """

    scheme: Literal["bearer", "token", "basic"]
    token: str | None = Field(default=None, min_length=1, max_length=65536, repr=False)
    username: str = Field(default="x-access-token", min_length=1, max_length=256)
    provider: Literal["github_app"] | None = None
    repositories: list[str] | None = Field(default=None, min_length=1, max_length=500)
    permissions: dict[str, Literal["read", "write", "admin"]] | None = None

    @field_validator("token", "username")
    @classmethod
    def _no_crlf(cls, value: str | None) -> str | None:
        if value is None:
            return None
        cleaned = strip_crlf(value)
        if not cleaned:
            raise ValueError("must not be empty")
        return cleaned

    @field_validator("username")
    @classmethod
    def _no_colon(cls, value: str) -> str:
        if ":" in value:
            raise ValueError("must not contain ':'")
        return value

    @field_validator("repositories")
    @classmethod
    def _repositories(cls, value: list[str] | None) -> list[str] | None:
        _each_matches(value, _REPO_RE, "repositories are 'owner/name'")
        if value and len({r.split("/")[0].lower() for r in value}) != 1:
            raise ValueError("repositories must share one owner (one app installation)")
        return value

    @field_validator("permissions")
    @classmethod
    def _permissions(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        _each_matches(
            value, _PERMISSION_RE, "permission names are lower-case words such as contents"
        )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Replacement:
        if self.provider is None:
            if self.token is None:
                raise ValueError("give token, or provider with repositories")
            if self.repositories is not None or self.permissions is not None:
                raise ValueError("repositories and permissions need a provider")
        else:
            if self.token is not None:
                raise ValueError("give token or provider, not both")
            if not self.repositories:
                raise ValueError("provider github_app needs repositories ['owner/name', ...]")
        return self


class LeaseRule(_Model):
    """Swap ``placeholder`` for ``replace`` in ``header`` of requests to ``host``."""

    host: str
    header: str = "authorization"
    placeholder: str
    schemes: list[Literal["token", "bearer", "basic"]] = Field(min_length=1)
    replace: Replacement
    allow: Allow | None = None

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        host = normalize_host(value)
        if not is_valid_hostname(host):
            raise ValueError("must be a plain DNS host name")
        return host

    @field_validator("header")
    @classmethod
    def _header(cls, value: str) -> str:
        name = value.strip().lower()
        if not re.match(r"^[a-z0-9!#$%&'*+.^_`|~\-]{1,128}$", name):
            raise ValueError("must be an HTTP header name")
        if name in {"proxy-authorization", "host", "cookie", "content-length"}:
            raise ValueError("this header cannot carry a placeholder")
        return name

    @field_validator("placeholder")
    @classmethod
    def _placeholder(cls, value: str) -> str:
        if not _PLACEHOLDER_RE.match(value):
            raise ValueError("must be 8..512 characters of [A-Za-z0-9_.-~+/=]")
        return value


class LeasePut(_Model):
    ttl_s: int = Field(ge=1, le=7 * 24 * 3600)
    rules: list[LeaseRule] = Field(min_length=1, max_length=64)


class LeaseRuleInfo(_Model):
    """A rule as the control API shows it: where, which header, what it allows."""

    host: str
    header: str
    allow: Allow | None = None


class LeaseInfo(_Model):
    """Metadata of a lease: never its tokens (nor its placeholders)."""

    lease_id: str
    hosts: list[str]
    expires_at: datetime
    rules: list[LeaseRuleInfo] = Field(default_factory=list)


class LeaseList(_Model):
    leases: list[LeaseInfo]


class SessionCreate(_Model):
    session_id: str | None = None
    allow: list[str] = Field(default_factory=list, max_length=256)
    ttl_s: int = Field(default=3600, ge=1, le=30 * 24 * 3600)

    @field_validator("session_id")
    @classmethod
    def _sid(cls, value: str | None) -> str | None:
        if value is not None and not is_valid_id(value):
            raise ValueError("must match [A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
        return value

    @field_validator("allow")
    @classmethod
    def _allow(cls, value: list[str]) -> list[str]:
        out: list[str] = []
        for pattern in value:
            norm = normalize_host(pattern)
            bare = norm[2:] if norm.startswith("*.") else norm
            if norm != "*" and not is_valid_hostname(bare):
                raise ValueError("allow patterns are 'host', '*.domain' or '*'")
            out.append(norm)
        return out


class SessionInfo(_Model):
    """``proxy_url`` carries the session's proxy credentials (not a real token)."""

    session_id: str
    proxy_url: str
    expires_at: datetime


class Health(_Model):
    status: Literal["ok", "degraded"]
    store: str
    version: str


class Event(BaseModel):
    """One proxy event: ``seq`` orders them, ``type`` says what, the rest is detail.

    Details are metadata (session, lease, host, reason, method, path); never a
    token or a placeholder.
    """

    model_config = ConfigDict(extra="allow")

    seq: int
    at: datetime
    type: Literal[
        "exfiltration_attempt",
        "lease_scope",
        "lease_installed",
        "lease_removed",
        "lease_expired",
        "session_closed",
        "limit",
    ]
    session: str | None = None


MAX_EVENT_WAIT_S = 60.0
"""The longest an events long poll waits for a first event (``wait_s``)."""


class EventList(_Model):
    events: list[Event]
    next: int


class ErrorDetail(_Model):
    code: str
    message: str


class ErrorBody(_Model):
    error: ErrorDetail


def error_json(code: str, message: str) -> bytes:
    """The proxy's one JSON error body, ``{"error": {"code", "message"}}``, as bytes.

    Every answer the proxy makes itself uses it: refusals to the sandbox, the
    mitmproxy error pages, the head guard's raw answers and the control API.
    """
    return json.dumps({"error": {"code": code, "message": message}}).encode()
