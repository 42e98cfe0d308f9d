"""The shapes the checks share: one finding, one check's outcome, the limits.

A :class:`Finding` is a diagnostic plus the text of the line it sits on. The
anchor never leaves the daemon; the baseline subtraction uses it to decide
*which* of several identical-looking problems an edit added (the one whose
line is new beats the one whose line merely moved).

Plain dataclasses, no pydantic: the worker process imports this module and
its start-up time is paid after every worker restart.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from ..protocol import Severity

if TYPE_CHECKING:
    from ..protocol import Diagnostic

MAX_DIAGNOSTICS = 50
"""Per check, in any one answer: a model cannot act on more, and they cost tokens."""

MAX_MESSAGE_CHARS = 1000
MAX_FINDINGS_PER_FILE = 1000
"""Collected before subtraction (a cap applied before it would corrupt the multiset)."""

_LINE_REF = re.compile(r"\bline \d+")


def cut_message(message: str) -> str:
    """Messages are cut at 1000 characters with a visible marker."""
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[: MAX_MESSAGE_CHARS - 1] + "…"


@dataclass(frozen=True)
class Diag:
    """The wire fields of one diagnostic (``protocol.Diagnostic``), without pydantic."""

    path: str
    line: int
    column: int
    severity: Severity
    check: str
    code: str
    message: str

    def to_wire(self) -> Diagnostic:
        from ..protocol import Diagnostic

        return Diagnostic(**asdict(self))


@dataclass(frozen=True)
class Finding:
    """A diagnostic and the stripped text of its line (the subtraction's tie-breaker)."""

    diagnostic: Diag
    anchor: str = ""

    @property
    def key(self) -> tuple[str, str, str, str]:
        """The multiset key: path, check, code and message, never the position.

        "on line 12" inside a message (Python says "does not match opening
        parenthesis '[' on line 3") is normalised too, so moved code keeps its key.
        """
        d = self.diagnostic
        return (d.path, d.check, d.code, _LINE_REF.sub("line N", d.message))


def finding(
    *,
    path: str,
    line: int,
    column: int,
    severity: Severity,
    check: str,
    code: str,
    message: str,
    anchor: str = "",
) -> Finding:
    return Finding(
        Diag(
            path=path,
            line=max(1, line),
            column=max(1, column),
            severity=severity,
            check=check,
            code=code,
            message=cut_message(message),
        ),
        anchor.strip(),
    )


@dataclass
class CheckResult:
    """What one check produced over a set of files.

    ``ran`` says the check executed on at least one file; ``skipped`` holds the
    reasons it could not run on some (tool missing, timeout, crash) and
    ``skipped_paths`` those files, and ``not_applicable`` the files it has nothing to say about (a README for
    ``syntax``), which only the ``diagnostics`` tool reports.
    """

    check: str
    findings: list[Finding] = field(default_factory=list)
    ran: bool = False
    skipped: list[str] = field(default_factory=list)
    skipped_paths: set[str] = field(default_factory=set)
    not_applicable: list[str] = field(default_factory=list)
