"""One result row, engine-neutral, and the per-file assembly of content matches.

Both engines' parsers produce ``Hit`` rows with paths relative to the
directory the engine ran in; ``results`` turns them into the wire models.
Context lines are kept apart from matches: each match carries the context
lines directly around it (up to ``context`` of them, stopping at another
match or a gap), so every row can be read on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .limits import cut_line


@dataclass
class Hit:
    path: str
    line: int = 0
    text: str = ""
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    count: int = 0


def strip_eol(text: str) -> str:
    if text.endswith("\n"):
        text = text[:-1]
    if text.endswith("\r"):
        text = text[:-1]
    return text


def clean_path(path: str) -> str:
    while path.startswith("./"):
        path = path[2:]
    return path


@dataclass
class FileBlock:
    """Matches and context lines of one file, turned into rows when the file ends."""

    path: str
    context: int
    matches: list[tuple[int, str]] = field(default_factory=list)
    around: dict[int, str] = field(default_factory=dict)

    def add_match(self, line: int, text: str) -> None:
        self.matches.append((line, cut_line(strip_eol(text))))

    def add_context(self, line: int, text: str) -> None:
        if self.context:
            self.around[line] = cut_line(strip_eol(text))

    def rows(self) -> list[Hit]:
        hits: list[Hit] = []
        for line, text in self.matches:
            before: list[str] = []
            for n in range(line - 1, line - self.context - 1, -1):
                if n not in self.around:
                    break
                before.insert(0, self.around[n])
            after: list[str] = []
            for n in range(line + 1, line + self.context + 1):
                if n not in self.around:
                    break
                after.append(self.around[n])
            hits.append(Hit(self.path, line, text, before, after))
        return hits


@dataclass
class EngineResult:
    """What one search produced, whichever engine ran it.

    ``complete``: every row was seen (so ``total`` is known); ``capped``: the
    output cap stopped reading; ``presorted``: rows arrived in path order;
    ``failed``: the engine refused the query itself (``stderr`` says why).
    """

    rows: list[Hit]
    complete: bool
    capped: bool
    presorted: bool
    stderr: str
    failed: bool
    # A signal number when the engine died on its own (not killed by us): an ignore file
    # that never ends (a link to /dev/zero) makes rg fail its allocation under RLIMIT_AS.
    died: int | None = None
