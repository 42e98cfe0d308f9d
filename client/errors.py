"""One root for every error ``airlock.client`` raises: :class:`ClientError`.

An orchestrator wraps a model's tool call in one ``except ClientError`` and
still tells the cases apart:

- :class:`ToolError` (exported as ``AirlockError`` too): the daemon answered with
  an error envelope. Each daemon code has a subclass named like the daemon's
  exception (``PathEscape``, ``HunkNotFound``...), and each of those *also*
  subclasses the daemon's class of the same name, so code written as
  ``except airlock.daemon.errors.PathEscape`` keeps working.
- :class:`DaemonUnavailable`: airlockd could not be reached (no socket,
  connection refused, the connection dropped before an answer).
- :class:`CallTimeout`: no answer within the call's timeout (a stopped or
  wedged daemon). Also a :class:`TimeoutError`.
- :class:`ProxyUnavailable`: airlock-proxy's control API could not be reached
  (a :class:`~airlock.client.proxy.ProxyError` with status 0).

Import-light on purpose (the daemon's error table only) so every client module,
the credential providers included, can derive from :class:`ClientError`.
"""

from __future__ import annotations

from typing import Any

from airlock.daemon import errors as _daemon


class ClientError(Exception):
    """Base of every error the airlock clients raise."""


class DaemonUnavailable(ClientError):
    """airlockd could not be reached; check the socket/URL and that the daemon runs."""


class CallTimeout(ClientError, TimeoutError):
    """No answer within the call's timeout; the daemon may be stopped or overloaded."""


class ToolError(_daemon.AirlockError, ClientError):
    """The daemon refused a call: ``code``, ``message`` (for the model) and ``details``."""


class InvalidRequest(_daemon.InvalidRequest, ToolError):
    pass


class Unauthorized(_daemon.Unauthorized, ToolError):
    pass


class Forbidden(_daemon.Forbidden, ToolError):
    pass


class PathEscape(_daemon.PathEscape, ToolError):
    pass


class GeneratedFile(_daemon.GeneratedFile, ToolError):
    pass


class ReadOnly(_daemon.ReadOnly, ToolError):
    pass


class NotFound(_daemon.NotFound, ToolError):
    pass


class UnknownTool(_daemon.UnknownTool, ToolError):
    pass


class IsDirectory(_daemon.IsDirectory, ToolError):
    pass


class BinaryFile(_daemon.BinaryFile, ToolError):
    pass


class TooLarge(_daemon.TooLarge, ToolError):
    pass


class PatchParseError(_daemon.PatchParseError, ToolError):
    pass


class HunkNotFound(_daemon.HunkNotFound, ToolError):
    pass


class AmbiguousMatch(_daemon.AmbiguousMatch, ToolError):
    pass


class StaleWrite(_daemon.StaleWrite, ToolError):
    pass


class Conflict(_daemon.Conflict, ToolError):
    pass


class Timeout(_daemon.Timeout, ToolError):
    pass


class NoSpace(_daemon.NoSpace, ToolError):
    """The sandbox's disk (or quota) is full; nothing was written. Free space and retry."""


class Internal(_daemon.Internal, ToolError):
    pass


# One class per daemon code, declared above so ``except errors.HunkNotFound``
# type-checks; the map is derived from those declarations, and
# tests/client/test_client_errors.py checks it covers the daemon's table exactly.
_CLIENT_TYPES: dict[type[_daemon.AirlockError], type[ToolError]] = {
    cls.__mro__[1]: cls for cls in ToolError.__subclasses__()
}
_DECLARED = frozenset(_CLIENT_TYPES)


def declared_daemon_types() -> frozenset[type[_daemon.AirlockError]]:
    """The daemon classes this module declares a client class for (before any is made later)."""
    return _DECLARED


def client_type(daemon_type: type[_daemon.AirlockError]) -> type[ToolError]:
    """The client class for a daemon error class; one is made for codes added later."""
    cls = _CLIENT_TYPES.get(daemon_type)
    if cls is None:
        cls = type(daemon_type.__name__, (daemon_type, ToolError), {"__module__": __name__})
        _CLIENT_TYPES[daemon_type] = cls
    return cls


def tool_error(code: str, message: str, details: dict[str, Any] | None = None) -> ToolError:
    """The typed client exception for an error envelope from airlockd."""
    try:
        daemon_type = _daemon.ERROR_TYPES[_daemon.ErrorCode(code)]
    except (ValueError, KeyError):
        daemon_type = _daemon.Internal
    return client_type(daemon_type)(message, details)


def all_tool_error_types() -> list[type[ToolError]]:
    """A client class for every code the daemon defines (tests check they are ClientErrors)."""
    return [client_type(t) for t in _daemon.ERROR_TYPES.values()]
