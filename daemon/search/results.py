"""Rows to the wire: order, page, and fit into the 64 KiB response budget.

``truncated`` is exact: the engines are asked for one row past the page, so
it is true only when a further row exists (or when the output cap left the
rest unknown). ``total`` is given only when every row was seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..protocol import FileSearchOutput, SearchCount, SearchMatch
from .limits import (
    RESPONSE_BUDGET,
    TIGHT_LINE_CAP,
    TIGHT_LINE_CUT_MARKER,
    cut_line,
)
from .query import Mode
from .rows import Hit
from .walk import path_key

_NOTE_CAP = 1500


def order(rows: list[Hit]) -> list[Hit]:
    """Path then line, paths compared component by component (``rg --sort path`` order)."""
    return sorted(rows, key=lambda h: (path_key(h.path), h.line))


@dataclass
class Page:
    mode: Mode
    engine: str
    rows: list[Hit]
    offset: int
    limit: int
    complete: bool
    capped: bool
    display: Callable[[str], str]
    notes: list[str] = field(default_factory=list)

    def _wire(self, hit: Hit, tight: bool = False) -> Any:
        path = self.display(hit.path)
        if self.mode == "files_with_matches":
            return path
        if self.mode == "count":
            return SearchCount(path=path, count=hit.count)
        if not tight:
            return SearchMatch(
                path=path,
                line=hit.line,
                text=hit.text,
                context_before=hit.before,
                context_after=hit.after,
            )

        def cut(text: str) -> str:
            return cut_line(text, TIGHT_LINE_CAP, TIGHT_LINE_CUT_MARKER)

        return SearchMatch(
            path=path,
            line=hit.line,
            text=cut(hit.text),
            context_before=[cut(t) for t in hit.before],
            context_after=[cut(t) for t in hit.after],
        )

    def build(self) -> FileSearchOutput:
        window = self.rows[self.offset : self.offset + self.limit]
        truncated = len(self.rows) > self.offset + self.limit or self.capped
        total = len(self.rows) if self.complete else None
        items: list[Any] = []
        used = 0
        for hit in window:
            item = self._wire(hit)
            size = _size(item) + 1
            if used + size > RESPONSE_BUDGET and not items:
                item = self._wire(hit, tight=True)
                size = _size(item) + 1
            if used + size > RESPONSE_BUDGET:
                truncated = True
                self.notes.append(
                    f"The response was cut at 64 KiB after {len(items)} rows; call again with "
                    f"offset={self.offset + len(items)} to continue, or narrow the search."
                )
                break
            items.append(item)
            used += size
        note = " ".join(self.notes)
        if len(note) > _NOTE_CAP:
            note = note[: _NOTE_CAP - 3] + "..."
        engine = "rg" if self.engine == "rg" else "grep"
        return FileSearchOutput(
            mode=self.mode,
            engine=engine,
            files=items if self.mode == "files_with_matches" else None,
            matches=items if self.mode == "content" else None,
            counts=items if self.mode == "count" else None,
            total=total,
            truncated=truncated,
            note=note or None,
        )


def _size(item: Any) -> int:
    value = item.model_dump() if hasattr(item, "model_dump") else item
    return len(json.dumps(value).encode("utf-8", errors="surrogateescape"))
