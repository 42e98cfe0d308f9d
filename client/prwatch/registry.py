"""Which PRs an orchestrator is watching, over a plain JSON-serialisable dict.

The registry is deliberately just a ``dict`` (key → entry) that the caller owns
and persists however it likes (a file, Redis, its own database row): the
functions here change it in place and return it, so both ``reg = register(reg,
...)`` and ``register(reg, ...)`` read naturally. Every operation is idempotent,
so a crashed orchestrator can replay its last step without harm:

- ``register``: adds an ``active`` entry with a fresh notification state; on an
  active entry it changes nothing; on a completed or cancelled entry it starts
  a new watch (fresh state, ``active``).
- ``complete`` / ``cancel``: an active entry becomes ``completed`` /
  ``cancelled``; a missing or already finished entry is left as it is (a
  completed watch is not turned into a cancelled one after the fact).
- ``delete``: removes the entry; a missing one is fine.

Keys are ``owner/repo#number`` (``key("o/r", 42) == "o/r#42"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from .notify import WatchState, initial_state

Status = Literal["active", "completed", "cancelled"]
RegistryState = dict[str, Any]


def key(repo: str, number: int) -> str:
    """The registry key of ``repo``'s PR ``number``: ``owner/repo#number``."""
    owner, sep, name = repo.partition("/")
    if not sep or not owner or not name or "/" in name or "#" in repo:
        raise ValueError(f"repository must look like owner/name, got {repo!r}")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise ValueError(f"PR number must be a positive integer, got {number!r}")
    return f"{repo}#{number}"


def parse_key(value: str) -> tuple[str, int]:
    """Inverse of :func:`key`."""
    repo, sep, number = value.rpartition("#")
    if not sep or not number.isdigit():
        raise ValueError(f"not a registry key (owner/repo#number): {value!r}")
    key(repo, int(number))
    return repo, int(number)


def _resolve(repo_or_key: str, number: int | None) -> str:
    if number is None:
        parse_key(repo_or_key)
        return repo_or_key
    return key(repo_or_key, number)


def register(
    registry: RegistryState,
    repo_or_key: str,
    number: int | None = None,
    *,
    data: Mapping[str, Any] | None = None,
) -> RegistryState:
    """Start watching a PR (``register(reg, "o/r", 42)`` or ``register(reg, "o/r#42")``).

    ``data`` is the caller's own JSON-serialisable metadata (e.g. which agent
    to wake); it is stored with a new watch and left alone on a repeat.
    """
    k = _resolve(repo_or_key, number)
    entry = registry.get(k)
    if isinstance(entry, Mapping) and entry.get("status") == "active":
        return registry
    repo, num = parse_key(k)
    registry[k] = {
        "repo": repo,
        "number": num,
        "status": "active",
        "state": initial_state().to_json(),
        "data": dict(data or {}),
    }
    return registry


def _finish(
    registry: RegistryState, repo_or_key: str, number: int | None, status: Status
) -> RegistryState:
    k = _resolve(repo_or_key, number)
    entry = registry.get(k)
    if isinstance(entry, dict) and entry.get("status") == "active":
        entry["status"] = status
    return registry


def complete(registry: RegistryState, repo_or_key: str, number: int | None = None) -> RegistryState:
    """Mark a watch done (the PR merged or closed, or the work finished)."""
    return _finish(registry, repo_or_key, number, "completed")


def cancel(registry: RegistryState, repo_or_key: str, number: int | None = None) -> RegistryState:
    """Stop a watch that is no longer wanted."""
    return _finish(registry, repo_or_key, number, "cancelled")


def delete(registry: RegistryState, repo_or_key: str, number: int | None = None) -> RegistryState:
    """Forget a watch entirely."""
    registry.pop(_resolve(repo_or_key, number), None)
    return registry


def status(registry: RegistryState, repo_or_key: str, number: int | None = None) -> Status | None:
    """The entry's status, or None when it is not registered."""
    entry = registry.get(_resolve(repo_or_key, number))
    if not isinstance(entry, Mapping):
        return None
    value = entry.get("status")
    if value == "active":
        return "active"
    if value == "completed":
        return "completed"
    if value == "cancelled":
        return "cancelled"
    return None


def active(registry: RegistryState) -> list[str]:
    """Keys of the active watches, sorted."""
    return sorted(
        k for k, v in registry.items() if isinstance(v, Mapping) and v.get("status") == "active"
    )


def get_state(registry: RegistryState, repo_or_key: str, number: int | None = None) -> WatchState:
    """The stored notification state (a fresh one when none is stored)."""
    entry = registry.get(_resolve(repo_or_key, number))
    if isinstance(entry, Mapping) and isinstance(entry.get("state"), Mapping):
        return WatchState.from_json(entry["state"])
    return initial_state()


def put_state(registry: RegistryState, watch_key: str, state: WatchState) -> RegistryState:
    """Store the notification state after a poll; ignored for unknown keys."""
    entry = registry.get(_resolve(watch_key, None))
    if isinstance(entry, dict):
        entry["state"] = state.to_json()
    return registry
