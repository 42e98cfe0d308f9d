"""A tool call's JSON body, parsed strictly: every bad body is ``invalid_request``, never ``internal``.

``json.loads`` alone lets through, or fails in surprising ways on, inputs a
hostile caller sends on purpose:

- nesting thousands deep raises ``RecursionError`` (not a ``ValueError``);
- an integer of 5,000 digits raises ``ValueError`` from Python's int-parsing
  limit;
- ``"\\ud800"`` decodes to a lone surrogate, which is valid JSON but not
  Unicode: it fails later, deep inside a tool, when the text is encoded;
- ``NaN`` and ``Infinity`` are not JSON at all.

Each becomes a message saying what to fix. Large bodies are parsed on a worker
thread (the caller passes ``offload``) so a big ``file_write`` does not stall
``/v1/health``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from .errors import InvalidRequest
from .workspace import validation_message

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Offload = Callable[[Callable[[], T]], Awaitable[T]]

MAX_DEPTH = 64
OFFLOAD_BYTES = 256 * 1024
_SURROGATE = re.compile("[\ud800-\udfff]")


def _reject_constant(name: str) -> Any:
    raise InvalidRequest(f"the request body holds {name}, which is not JSON; send a number")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def parse_json_body(raw: bytes) -> Any:
    """The body's value, checked for depth and text; raises :class:`InvalidRequest`."""
    if not raw.strip():
        return {}
    try:
        # What json.loads(raw, parse_constant=...) does, without a new decoder per call.
        value = _DECODER.decode(raw.decode(json.detect_encoding(raw), "surrogatepass"))
    except RecursionError:
        raise InvalidRequest(
            f"the request body is nested too deeply; at most {MAX_DEPTH} levels are accepted"
        ) from None
    except UnicodeDecodeError:
        raise InvalidRequest("the request body is not UTF-8; send UTF-8 encoded JSON") from None
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"the request body is not valid JSON ({exc.msg} at line {exc.lineno} column "
            f"{exc.colno}); send a JSON object"
        ) from None
    except ValueError as exc:  # int-parsing limits ("Exceeds the limit (4300 digits)...")
        raise InvalidRequest(
            f"the request body holds a number JSON cannot carry here ({str(exc)[:120]}); "
            "send numbers of ordinary size"
        ) from None
    check_value(value)
    return value


def check_value(value: Any) -> None:
    """Depth at most ``MAX_DEPTH`` and no lone surrogate in any key or string (iteratively)."""
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidRequest(
                f"the request body is nested too deeply at {where}; at most {MAX_DEPTH} levels "
                "are accepted"
            )
        if isinstance(item, str):
            _check_text(item, where)
        elif isinstance(item, dict):
            for key, child in item.items():
                _check_text(key, f"{where} (a key)")
                stack.append((child, f"{where}.{_printable(key)}", depth + 1))
        elif isinstance(item, list):
            stack.extend((child, f"{where}[{i}]", depth + 1) for i, child in enumerate(item))


def _check_text(text: str, where: str) -> None:
    if not text.isascii() and (m := _SURROGATE.search(text)) is not None:
        raise InvalidRequest(
            f"{where} holds a lone UTF-16 surrogate (\\u{ord(m.group()):04x}), which is not "
            "valid Unicode; send the text as proper UTF-8 (a pair of \\u escapes must form "
            "one character)"
        )


def _printable(key: str) -> str:
    return key[:40].encode("ascii", "backslashreplace").decode()


async def read_json_body(raw: bytes, offload: Offload[Any]) -> Any:
    """``parse_json_body``, on a worker thread when the body is large."""
    if len(raw) < OFFLOAD_BYTES:
        return parse_json_body(raw)
    return await offload(lambda: parse_json_body(raw))


async def read_stream_input(request: web.Request, model: type[M], shape: str) -> M:
    """The JSON object body of a streaming route (exec/stream, watch) as ``model``.

    ``shape`` finishes the message for a body that is JSON but not an object.
    """
    try:
        body = await request.json() if request.can_read_body else {}
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise InvalidRequest(
            f"the request body is not valid JSON ({exc}); send a JSON object"
        ) from None
    if not isinstance(body, dict):
        raise InvalidRequest(f"the request body must be a JSON object {shape}")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise InvalidRequest(validation_message(exc)) from None
