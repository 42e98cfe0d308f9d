"""Wire shapes of the airlock-proxy control API.

One source of truth for the server (``airlock.proxy.control``) and the client
(``airlock.client.proxy``). This module is import-light on purpose: it pulls in
neither mitmproxy nor aiohttp, so an orchestrator can depend on it cheaply.

Real tokens only ever travel *into* the proxy (``Replacement.token``); no model
that the proxy sends back carries one.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "ERROR_STATUS",
    "ErrorBody",
    "ErrorDetail",
    "Health",
    "LeaseInfo",
    "LeaseList",
    "LeasePut",
    "LeaseRule",
    "Replacement",
    "SessionCreate",
    "SessionInfo",
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
    "session_exists": 409,
    "placeholder_in_use": 409,
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


class Replacement(_Model):
    """What the proxy writes in place of the placeholder.

    ``token`` is the real credential. It is never echoed back by the proxy, and
    its ``repr`` is hidden so that it cannot leak through logs or tracebacks.
    """

    scheme: Literal["bearer", "token", "basic"]
    token: str = Field(min_length=1, max_length=65536, repr=False)
    username: str = Field(default="x-access-token", min_length=1, max_length=256)

    @field_validator("token", "username")
    @classmethod
    def _no_crlf(cls, value: str) -> str:
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


class LeaseRule(_Model):
    """Swap ``placeholder`` for ``replace`` in ``header`` of requests to ``host``."""

    host: str
    header: str = "authorization"
    placeholder: str
    schemes: list[Literal["token", "bearer", "basic"]] = Field(min_length=1)
    replace: Replacement

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


class LeaseInfo(_Model):
    """Metadata of a lease: never its tokens (nor its placeholders)."""

    lease_id: str
    hosts: list[str]
    expires_at: datetime


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


class ErrorDetail(_Model):
    code: str
    message: str


class ErrorBody(_Model):
    error: ErrorDetail
