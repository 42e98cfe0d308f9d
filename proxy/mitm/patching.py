"""The one way a module of this package replaces a mitmproxy attribute.

Every replacement goes through :func:`replace`, which keeps what was there
first, so :func:`restore_all` (called by :func:`airlock.proxy.mitm.uninstall`)
puts mitmproxy back exactly as it was: a test, or a second proxy in the same
process, starts from mitmproxy's own behaviour.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")

_MISSING = object()
# (id(owner), name) -> (owner, name, what owner's own namespace held, or _MISSING)
_saved: dict[tuple[int, str], tuple[Any, str, Any]] = {}


class Setting(Generic[T]):
    """What a patch needs from the live proxy: set by ``install``, cleared by :func:`restore_all`.

    A patched mitmproxy function is a plain function on a mitmproxy class, so
    it finds the live proxy's callbacks here, not through an addon instance.
    """

    def __init__(self) -> None:
        self.value: T | None = None
        _settings.append(self)


_settings: list[Setting[Any]] = []


def replace(owner: Any, name: str, value: Any) -> None:
    """``setattr(owner, name, value)``, remembering the original the first time."""
    key = (id(owner), name)
    if key not in _saved:
        # The owner's own entry only: an inherited attribute is restored by deleting ours.
        _saved[key] = (owner, name, vars(owner).get(name, _MISSING))
    setattr(owner, name, value)


def restore_all() -> None:
    """Undo every :func:`replace`, newest first, and clear every :class:`Setting`."""
    for setting in _settings:
        setting.value = None
    for owner, name, original in reversed(list(_saved.values())):
        if original is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, original)
    _saved.clear()


def replaced() -> list[tuple[Any, str]]:
    """What is replaced now (owner, attribute name), for tests and diagnostics."""
    return [(owner, name) for owner, name, _ in _saved.values()]
