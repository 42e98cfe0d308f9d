"""Bearer tokens with a scope, read from a token file and re-read on SIGHUP.

The file holds one ``TOKEN SCOPE`` pair per line (``#`` starts a comment).
Every presented token is compared with every known token in constant time, so
neither a match's position nor a prefix leaks through timing.
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
        entries: list[tuple[bytes, Scope]] = []
        for number, raw in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
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
        if not entries:
            raise TokenFileError(f"{path} holds no tokens")
        return cls(tuple(entries))

    def scope_of(self, presented: str) -> Scope | None:
        candidate = presented.encode()
        found: Scope | None = None
        for token, scope in self.entries:
            if hmac.compare_digest(candidate, token):
                found = scope
        return found
