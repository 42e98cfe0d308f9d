"""Bearer tokens with a scope, read from a token file and re-read on SIGHUP.

The file holds one ``TOKEN SCOPE`` pair per line (``#`` starts a comment).
Every presented token is compared with every known token in constant time, so
neither a match's position nor a prefix leaks through timing.

An empty file (or one with only comments) is a valid, empty table: it revokes
every token, which is how an orchestrator cuts a sandbox off with one write and
a SIGHUP. A malformed file is an error, so a half-written file never replaces
a good table; the caller keeps the old one and logs why. Error messages name
the line number, never the line (it may hold a token).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Scope = Literal["read", "write"]


class TokenFileError(ValueError):
    pass


@dataclass(frozen=True)
class TokenTable:
    entries: tuple[tuple[bytes, Scope], ...]

    @classmethod
    def load(cls, path: Path) -> TokenTable:
        """Parse ``path``; raise :class:`TokenFileError` (never a partial table) when it is bad."""
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise TokenFileError(f"{path} is not UTF-8 text") from None
        except OSError as exc:
            raise TokenFileError(f"{path} cannot be read ({exc.strerror or exc})") from None
        entries: list[tuple[bytes, Scope]] = []
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or parts[1] not in ("read", "write"):
                raise TokenFileError(
                    f"{path}:{number}: expected 'TOKEN SCOPE' with scope read or write"
                )
            scope: Scope = "read" if parts[1] == "read" else "write"
            entries.append((parts[0].encode(), scope))
        return cls(tuple(entries))

    def scope_of(self, presented: str) -> Scope | None:
        candidate = presented.encode("utf-8", "surrogateescape")
        found: Scope | None = None
        for token, scope in self.entries:
            if hmac.compare_digest(candidate, token):
                found = scope
        return found
