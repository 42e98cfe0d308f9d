"""ProxyClient: the orchestrator's handle on airlock-proxy's control API.

``lease(...)`` is the way to hand a credential to one command: it installs the
lease, yields, and always deletes it (on success, on error and on cancellation;
the delete is shielded so a cancelled task cannot skip it). Errors are
:class:`ProxyError` built from the server's code and message only; they never
contain the request body, so a token cannot end up in a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
from pydantic import BaseModel, ValidationError

from airlock.proxy.protocol import (
    Event,
    EventList,
    Health,
    LeaseInfo,
    LeaseList,
    LeasePut,
    LeaseRule,
    SessionCreate,
    SessionInfo,
)

from . import tracing
from ._closing import AsyncClosing
from ._shielded import finish_shielded
from .errors import ClientError

__all__ = ["ProxyClient", "ProxyError", "ProxyUnavailable"]

M = TypeVar("M", bound=BaseModel)


class ProxyError(ClientError):
    """A control API call failed: ``status`` (0 when unreachable), ``code``, ``message``."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code} ({status}): {message}")
        self.status = status
        self.code = code
        self.message = message


class ProxyUnavailable(ProxyError):
    """The control API could not be reached or did not answer in time (status 0)."""


def _invalid(exc: ValidationError) -> ProxyError:
    """Client-side validation failure, described without the offending values."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False, include_context=False):
        loc = ".".join(str(x) for x in err.get("loc", ())) or "body"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return ProxyError(400, "invalid_request", "; ".join(parts))


def _build(model: type[M], **fields: Any) -> M:
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _seg(value: str) -> str:
    """One URL path segment: an id can never reach another route."""
    return quote(value, safe="")


def _endpoint(control: str) -> tuple[str | None, str]:
    """(unix socket path or None, base URL)."""
    if control.startswith("tcp://"):
        return None, "http://" + control[len("tcp://") :].rstrip("/")
    if control.startswith(("http://", "https://")):
        return None, control.rstrip("/")
    path = control[len("unix:") :] if control.startswith("unix:") else control
    return path, "http://airlock-proxy"


class ProxyClient(AsyncClosing):
    """Every request carries a W3C ``traceparent`` (``traceparent=``, else the current
    OpenTelemetry span, else a fresh trace); the proxy stores a lease PUT's trace id with
    the lease and writes it on that lease's swap audit lines."""

    def __init__(
        self,
        control: str,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        connect_timeout_s: float = 5.0,
        traceparent: str | None = None,
    ) -> None:
        if traceparent is not None and tracing.parse(traceparent) is None:
            raise ValueError(f"traceparent={traceparent!r} is not a valid W3C traceparent")
        self._traceparent = traceparent
        self._socket, self._base = _endpoint(control)
        self._token = token
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, connect=connect_timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector: aiohttp.BaseConnector
            if self._socket is not None:
                connector = aiohttp.UnixConnector(path=self._socket)
            else:
                connector = aiohttp.TCPConnector()
            headers = {"authorization": f"Bearer {self._token}"} if self._token else {}
            self._session = aiohttp.ClientSession(
                connector=connector, headers=headers, timeout=self._timeout
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _request(
        self, method: str, path: str, body: Any = None, *, expect_json: bool = True
    ) -> Any:
        try:
            headers = {tracing.HEADER: tracing.outgoing(self._traceparent)}
            async with self._http().request(
                method, self._base + path, json=body, headers=headers
            ) as resp:
                raw = await resp.read()
                if resp.status >= 400:
                    code, message = "http_error", resp.reason or "error"
                    with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
                        err = (await resp.json(content_type=None))["error"]
                        code, message = str(err["code"]), str(err["message"])
                    raise ProxyError(resp.status, code, message)
                if not expect_json:
                    return raw.decode()
                if resp.status == 204 or not raw:
                    return None
                return await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ServerTimeoutError):
            raise ProxyUnavailable(0, "timeout", "control API timed out") from None
        except aiohttp.ClientError as exc:
            raise ProxyUnavailable(
                0, "unreachable", f"control API unreachable: {type(exc).__name__}"
            ) from None

    async def health(self) -> Health:
        return Health.model_validate(await self._request("GET", "/v1/health"))

    async def ca_pem(self) -> str:
        text: str = await self._request("GET", "/v1/ca.pem", expect_json=False)
        return text

    async def create_session(
        self, allow: Sequence[str] = (), ttl_s: int = 3600, session_id: str | None = None
    ) -> SessionInfo:
        body = _build(SessionCreate, session_id=session_id, allow=list(allow), ttl_s=ttl_s)
        data = await self._request(
            "POST", "/v1/sessions", body.model_dump(mode="json", exclude_none=True)
        )
        return SessionInfo.model_validate(data)

    async def delete_session(self, session_id: str) -> None:
        await self._request("DELETE", f"/v1/sessions/{_seg(session_id)}")

    async def put_lease(
        self,
        session_id: str,
        lease_id: str,
        rules: Sequence[LeaseRule | dict[str, Any]],
        ttl_s: int,
    ) -> LeaseInfo:
        parsed = [r if isinstance(r, LeaseRule) else _build(LeaseRule, **r) for r in rules]
        body = _build(LeasePut, ttl_s=ttl_s, rules=parsed)
        data = await self._request(
            "PUT",
            f"/v1/sessions/{_seg(session_id)}/leases/{_seg(lease_id)}",
            body.model_dump(mode="json", exclude_none=True),
        )
        return LeaseInfo.model_validate(data)

    async def delete_lease(self, session_id: str, lease_id: str) -> None:
        await self._request("DELETE", f"/v1/sessions/{_seg(session_id)}/leases/{_seg(lease_id)}")

    async def list_leases(self, session_id: str) -> list[LeaseInfo]:
        data = await self._request("GET", f"/v1/sessions/{_seg(session_id)}/leases")
        return LeaseList.model_validate(data).leases

    async def events_page(
        self, session_id: str | None = None, *, after: int = 0, wait_s: float = 0.0
    ) -> EventList:
        """One long poll: events after ``after`` (of one session, or of all when None)."""
        path = "/v1/events" if session_id is None else f"/v1/sessions/{_seg(session_id)}/events"
        query = f"?after={int(after)}&wait_s={float(wait_s):g}"
        return EventList.model_validate(await self._request("GET", path + query))

    async def events(
        self, session_id: str | None = None, *, after: int = 0, wait_s: float = 25.0
    ) -> AsyncIterator[Event]:
        """Every event from ``after`` on, as it happens (an endless async iterator).

        Long polls with ``wait_s`` (keep it under the client timeout); stop by
        breaking out of the ``async for`` or cancelling the task.
        """
        wait_s = min(wait_s, max(self._timeout.total or 30.0, 1.0) - 0.5)
        while True:
            page = await self.events_page(session_id, after=after, wait_s=wait_s)
            for event in page.events:
                yield event
            after = page.next

    @contextlib.asynccontextmanager
    async def lease(
        self,
        session_id: str,
        rules: Sequence[LeaseRule | dict[str, Any]],
        ttl_s: int,
        lease_id: str | None = None,
    ) -> AsyncIterator[LeaseInfo]:
        """Install a lease for the body of the ``async with``; always remove it."""
        lid = lease_id or f"l-{uuid.uuid4().hex}"
        put = asyncio.ensure_future(self.put_lease(session_id, lid, rules, ttl_s))
        try:
            # Shielded so that a cancellation cannot leave a PUT in flight that
            # lands after our DELETE; we wait for it, then delete.
            info = await asyncio.shield(put)
            yield info
        finally:
            if not put.done():
                with contextlib.suppress(ProxyError, asyncio.CancelledError):
                    await asyncio.wait({put}, timeout=self._timeout.total)
            # Shielded: a cancelled caller must not leave a live credential behind.
            delete = asyncio.ensure_future(self.delete_lease(session_id, lid))
            await finish_shielded(delete, ProxyError)
