"""A search request reduced to what the engines need, and the file filters for the grep
fallback that mirror rg's ``--glob``/``--type`` semantics."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..errors import InvalidRequest
from .filetypes import FILE_TYPES
from .globs import translate

Mode = Literal["files_with_matches", "content", "count"]


@dataclass(frozen=True)
class Query:
    pattern: str
    fixed: bool
    case_insensitive: bool
    glob: str | None
    type: str | None
    mode: Mode
    context: int
    include_ignored: bool
    # Paths (relative to the root) never to open: files under a lease (search.leases).
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class GlobFilter:
    """rg ``--glob`` semantics: a whitelist glob keeps matching files (directories are
    never pruned by it); a ``!glob`` drops matching files and prunes matching directories.
    A glob without ``/`` matches the file name at any depth; with ``/``, the path
    relative to the directory the search runs in."""

    regex: re.Pattern[str]
    negate: bool
    anchored: bool
    dir_only: bool

    @classmethod
    def parse(cls, glob: str) -> GlobFilter:
        negate = glob.startswith("!")
        body = glob[1:] if negate else glob
        dir_only = body.endswith("/")
        body = body.rstrip("/")
        anchored = "/" in body
        body = body.removeprefix("/")
        try:
            regex = re.compile("^" + translate(body, braces=True) + "$", re.DOTALL)
        except re.error as exc:
            raise InvalidRequest(
                f"glob {glob!r} is not a valid glob ({exc}); use e.g. '*.py' or 'src/**/*.ts'",
                {"glob": glob},
            ) from None
        return cls(regex, negate, anchored, dir_only)

    def _matches(self, rel: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        target = rel if self.anchored else rel.rsplit("/", 1)[-1]
        return self.regex.match(target) is not None

    def keep_file(self, rel: str) -> bool:
        matched = self._matches(rel, False)
        return not matched if self.negate else matched

    def prune_dir(self, rel: str) -> bool:
        return self.negate and self._matches(rel, True)


def type_filter(name: str) -> Callable[[str], bool]:
    globs = FILE_TYPES.get(name)
    if globs is None:
        raise InvalidRequest(
            f"unrecognized file type {name!r}; known types: {', '.join(sorted(FILE_TYPES))}. "
            "Or use glob, e.g. '*.ext'.",
            {"type": name},
        )
    regexes = [re.compile("^" + translate(g) + "$") for g in globs]

    def keep(rel: str) -> bool:
        base = rel.rsplit("/", 1)[-1]
        return any(r.match(base) for r in regexes)

    return keep


def file_filters(query: Query) -> tuple[Callable[[str], bool] | None, Callable[[str], bool] | None]:
    """(keep_file, prune_dir) for the walker, combining ``glob`` and ``type``."""
    keeps: list[Callable[[str], bool]] = []
    prune: Callable[[str], bool] | None = None
    if query.glob:
        glob = GlobFilter.parse(query.glob)
        keeps.append(glob.keep_file)
        prune = glob.prune_dir
    if query.type:
        keeps.append(type_filter(query.type))
    if not keeps:
        return None, prune

    def keep_file(rel: str) -> bool:
        return all(k(rel) for k in keeps)

    return keep_file, prune
