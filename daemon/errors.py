"""The daemon's error codes, their HTTP statuses, and one exception type each.

Every refusal a tool makes is one of these; the server turns them into the
``{"error": {"code", "message", "details"}}`` envelope and never into a traceback.
Messages are written for a model to act on: what was wrong and what to do next.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar


class ErrorCode(StrEnum):
    INVALID_REQUEST = "invalid_request"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    PATH_ESCAPE = "path_escape"
    GENERATED_FILE = "generated_file"
    READ_ONLY = "read_only"
    NOT_FOUND = "not_found"
    UNKNOWN_TOOL = "unknown_tool"
    IS_DIRECTORY = "is_directory"
    BINARY_FILE = "binary_file"
    TOO_LARGE = "too_large"
    PATCH_PARSE_ERROR = "patch_parse_error"
    HUNK_NOT_FOUND = "hunk_not_found"
    AMBIGUOUS_MATCH = "ambiguous_match"
    STALE_WRITE = "stale_write"
    CONFLICT = "conflict"
    TIMEOUT = "timeout"
    NO_SPACE = "no_space"
    INTERNAL = "internal"


HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.PATH_ESCAPE: 403,
    ErrorCode.GENERATED_FILE: 403,
    ErrorCode.READ_ONLY: 403,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNKNOWN_TOOL: 404,
    ErrorCode.IS_DIRECTORY: 400,
    ErrorCode.BINARY_FILE: 415,
    ErrorCode.TOO_LARGE: 413,
    ErrorCode.PATCH_PARSE_ERROR: 400,
    ErrorCode.HUNK_NOT_FOUND: 409,
    ErrorCode.AMBIGUOUS_MATCH: 409,
    ErrorCode.STALE_WRITE: 409,
    ErrorCode.CONFLICT: 409,
    ErrorCode.TIMEOUT: 504,
    ErrorCode.NO_SPACE: 507,
    ErrorCode.INTERNAL: 500,
}


class AirlockError(Exception):
    """Base of every structured error; ``code`` decides the HTTP status."""

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    @property
    def status(self) -> int:
        return HTTP_STATUS[self.code]

    def to_envelope(self) -> dict[str, Any]:
        return {"error": {"code": str(self.code), "message": self.message, "details": self.details}}


class InvalidRequest(AirlockError):
    code = ErrorCode.INVALID_REQUEST


class Unauthorized(AirlockError):
    code = ErrorCode.UNAUTHORIZED


class Forbidden(AirlockError):
    code = ErrorCode.FORBIDDEN


class PathEscape(AirlockError):
    code = ErrorCode.PATH_ESCAPE


class GeneratedFile(AirlockError):
    code = ErrorCode.GENERATED_FILE


class ReadOnly(AirlockError):
    """The file's mode gives its owner no write bit: edits are refused, as Codex does."""

    code = ErrorCode.READ_ONLY


class NotFound(AirlockError):
    code = ErrorCode.NOT_FOUND


class UnknownTool(AirlockError):
    code = ErrorCode.UNKNOWN_TOOL


class IsDirectory(AirlockError):
    code = ErrorCode.IS_DIRECTORY


class BinaryFile(AirlockError):
    code = ErrorCode.BINARY_FILE


class TooLarge(AirlockError):
    code = ErrorCode.TOO_LARGE


class PatchParseError(AirlockError):
    code = ErrorCode.PATCH_PARSE_ERROR


class HunkNotFound(AirlockError):
    code = ErrorCode.HUNK_NOT_FOUND


class AmbiguousMatch(AirlockError):
    code = ErrorCode.AMBIGUOUS_MATCH


class StaleWrite(AirlockError):
    code = ErrorCode.STALE_WRITE


class Conflict(AirlockError):
    code = ErrorCode.CONFLICT


class Timeout(AirlockError):
    code = ErrorCode.TIMEOUT


class NoSpace(AirlockError):
    """The file system is full (ENOSPC) or the quota is used up (EDQUOT): HTTP 507.

    An edit that meets it writes nothing (a multi-file edit is whole or absent);
    the caller frees space and retries. Not ``internal``: nothing is broken.
    """

    code = ErrorCode.NO_SPACE


class Internal(AirlockError):
    code = ErrorCode.INTERNAL


ERROR_TYPES: dict[ErrorCode, type[AirlockError]] = {
    cls.code: cls
    for cls in (
        InvalidRequest,
        Unauthorized,
        Forbidden,
        PathEscape,
        GeneratedFile,
        ReadOnly,
        NotFound,
        UnknownTool,
        IsDirectory,
        BinaryFile,
        TooLarge,
        PatchParseError,
        HunkNotFound,
        AmbiguousMatch,
        StaleWrite,
        Conflict,
        Timeout,
        NoSpace,
        Internal,
    )
}


def error_from_envelope(code: str, message: str, details: dict[str, Any] | None) -> AirlockError:
    """Rebuild the typed exception a peer sent (used by the client)."""
    try:
        cls = ERROR_TYPES[ErrorCode(code)]
    except ValueError:
        cls = Internal
    return cls(message, details)
