"""Output hygiene for the GitHub shell tool: redaction, then tail truncation.

The proxy already scrubs real tokens from responses, but the tool does not rely
on that alone (streamed bodies, encodings the proxy does not know, a future
delivery mode without the proxy): every form of the real token we can predict
is replaced before output leaves the tool.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

REDACTED = "[redacted]"
DEFAULT_LIMIT = 100_000


def basic_credential(token: str, username: str = "x-access-token") -> str:
    """The base64 of ``username:token``, as it appears in ``Authorization: Basic``."""
    return base64.b64encode(f"{username}:{token}".encode()).decode("ascii")


def secret_forms(token: str) -> list[str]:
    """Every predictable spelling of ``token`` in output: raw and the git Basic forms."""
    forms = [token, basic_credential(token), basic_credential(token).rstrip("=")]
    forms.append(base64.b64encode(token.encode()).decode("ascii").rstrip("="))
    # Longest first, so a Basic form is replaced whole before its parts.
    return sorted({f for f in forms if len(f) >= 8}, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace each secret in ``text`` with ``[redacted]``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def truncate_tail(text: str, limit: int = DEFAULT_LIMIT) -> tuple[str, bool]:
    """Keep the final ``limit`` bytes of ``text`` (UTF-8), prefixed with a marker when cut."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text, False
    tail = data[-limit:]
    # Do not start in the middle of a multi-byte character.
    start = 0
    while start < len(tail) and start < 4 and (tail[start] & 0xC0) == 0x80:
        start += 1
    kept = tail[start:].decode("utf-8", "replace")
    return f"[output truncated: showing final {limit} bytes]\n{kept}", True
