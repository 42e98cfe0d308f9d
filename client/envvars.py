"""The environment variables the ``airlock`` CLI reads, under one naming scheme.

Scheme: ``AIRLOCK_<COMPONENT>_<WHAT>``; a name ending in ``_FILE`` always names
a file holding the value (never the value itself), and a secret is better
passed as its ``_FILE`` form. The canonical names below are listed, with every
other variable the project reads, in docs/operations.md (a test checks that
list against the code). Old names keep working as deprecated aliases: reading
one logs a warning once with the name to use instead.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("airlock.client.env")

DAEMON_SOCKET = "AIRLOCK_DAEMON_SOCKET"
DAEMON_TOKEN = "AIRLOCK_DAEMON_TOKEN"
DAEMON_TOKEN_FILE = "AIRLOCK_DAEMON_TOKEN_FILE"
PROXY_CONTROL = "AIRLOCK_PROXY_CONTROL"
PROXY_CONTROL_TOKEN = "AIRLOCK_PROXY_CONTROL_TOKEN"
PROXY_CONTROL_TOKEN_FILE = "AIRLOCK_PROXY_CONTROL_TOKEN_FILE"
SESSION = "AIRLOCK_SESSION"

# canonical name -> deprecated names still honoured (first one set wins)
DEPRECATED: dict[str, tuple[str, ...]] = {
    DAEMON_SOCKET: ("AIRLOCK_SOCKET",),
    DAEMON_TOKEN: ("AIRLOCK_TOKEN",),
    PROXY_CONTROL_TOKEN: ("AIRLOCK_PROXY_TOKEN",),
    PROXY_CONTROL_TOKEN_FILE: ("AIRLOCK_PROXY_TOKEN_FILE",),
}

_warned: set[str] = set()


def get(name: str, default: str | None = None, env: Mapping[str, str] | None = None) -> str | None:
    """``name``'s value, else a deprecated alias's (with a warning), else ``default``."""
    source = os.environ if env is None else env
    value = source.get(name)
    if value:
        return value
    for old in DEPRECATED.get(name, ()):
        value = source.get(old)
        if value:
            if old not in _warned:
                _warned.add(old)
                log.warning("%s is deprecated; set %s instead", old, name)
            return value
    return default


def secret(name: str, file_name: str, env: Mapping[str, str] | None = None) -> str | None:
    """A secret from ``file_name`` (a file) or else ``name`` (the value itself).

    The file wins: it keeps the secret out of ``/proc/PID/environ``. A file that
    is named but unreadable or empty is an error naming the variable.
    """
    path = get(file_name, env=env)
    if path:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(
                f"{file_name}={path}: cannot read it ({exc.strerror or exc})"
            ) from None
        if not value:
            raise ValueError(f"{file_name}={path}: the file is empty")
        return value
    return get(name, env=env)
