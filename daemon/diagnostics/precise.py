"""Exact parsers for the languages that have one in Python: precise messages.

tree-sitter recovers from errors and reports many of them, but its messages
are generic and its positions can be far off (tree-sitter-yaml wraps a whole
document in one ERROR starting at line 1). Python (``ast``), JSON (``json``),
TOML (``tomllib``) and YAML (PyYAML's event parser, so custom tags are not
errors) say exactly what is wrong and where, but stop at the first error.
:func:`combine` merges the two views.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from .model import Finding, finding

CHECK = "syntax"
PY_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")
_TOML_END = re.compile(r"\s*\(at end of document\)$")
_YAML_DOCUMENT = re.compile(r"^---(\s|$)")


@dataclass(frozen=True)
class ParseError:
    line: int  # 1-based
    column: int  # 1-based
    message: str


def _python(text: str) -> list[ParseError]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as exc:
        return [ParseError(exc.lineno or 1, exc.offset or 1, exc.msg)]
    except (ValueError, RecursionError, MemoryError):
        return []
    return []


def _json(text: str) -> list[ParseError]:
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return [ParseError(exc.lineno, exc.colno, exc.msg)]
    except RecursionError:
        return []
    return []


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas -> JSON, every position kept.

    Comments and trailing commas become spaces (newlines stay), so the line and
    column of any remaining error are those of the original text.
    """
    out = list(text)
    i, n = 0, len(text)
    last_significant = -1  # index of the last non-space character outside comments
    before_last = -1  # the one before it: a comma right after ":" is an error, not trailing
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            before_last, last_significant = last_significant, min(j, n - 1)
            i = j + 1
            continue
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j == -1 else j
            out[i:j] = " " * (j - i)
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j == -1 else j + 2
            out[i:j] = ["\n" if c == "\n" else " " for c in text[i:j]]
            i = j
            continue
        if (
            ch in "}]"
            and last_significant >= 0
            and out[last_significant] == ","
            and (before_last < 0 or out[before_last] not in ":,[{")
        ):
            out[last_significant] = " "
        if not ch.isspace():
            before_last, last_significant = last_significant, i
        i += 1
    return "".join(out)


def _jsonc(text: str) -> list[ParseError]:
    return _json(strip_jsonc(text))


def _toml(text: str) -> list[ParseError]:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        position = _TOML_POSITION.search(message)
        if position is not None:
            return [
                ParseError(int(position[1]), int(position[2]), message[: position.start()].strip())
            ]
        line = text.count("\n") + 1
        return [ParseError(line, 1, _TOML_END.sub("", message).strip() + " (at end of file)")]
    return []


def _yaml(text: str) -> list[ParseError]:
    """One error per YAML document: documents are split at ``---`` lines and parsed alone."""
    try:
        import yaml
    except ImportError:
        return []
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    errors: list[ParseError] = []
    lines = text.split("\n")
    starts = [0] + [i for i, line in enumerate(lines) if i and _YAML_DOCUMENT.match(line)]
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else len(lines)
        chunk = "\n".join(lines[start:end])
        try:
            for _ in yaml.parse(chunk, Loader=loader):
                pass
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            parts = [p for p in (exc.context, exc.problem) if p]
            message = "; ".join(parts) or "invalid YAML"
            line = start + (mark.line + 1 if mark is not None else 1)
            errors.append(ParseError(line, (mark.column + 1) if mark is not None else 1, message))
        except yaml.YAMLError as exc:
            errors.append(ParseError(start + 1, 1, str(exc).split("\n", 1)[0]))
    return errors


@dataclass(frozen=True)
class Policy:
    parse: Callable[[str], list[ParseError]]
    trust_tree_sitter_when_only_precise_fails: bool
    """JSON: tree-sitter accepting what ``json`` rejects means JSONC (comments, trailing
    commas: tsconfig.json and friends), which is not an error."""


POLICIES: dict[str, Policy] = {
    "python": Policy(_python, False),
    "json": Policy(_json, True),
    "jsonc": Policy(_jsonc, False),
    "toml": Policy(_toml, False),
    "yaml": Policy(_yaml, False),
}


def combine(language: str, text: str, display: str, tree_found: list[Finding]) -> list[Finding]:
    """Merge the exact parser's verdict with tree-sitter's findings.

    - The exact parser accepts the file: tree-sitter's complaints are grammar
      lag or leniency differences; dropped.
    - It rejects the file: its precise findings come first, plus tree-sitter's
      on later, other lines (the exact parser stops at its first error, and
      everything before that error parsed cleanly, so earlier tree-sitter
      findings are false).
    - Only it rejects the file: reported (for Python with a note that the
      daemon's Python may be older than the project's), except JSON (JSONC).
    """
    policy = POLICIES[language]
    errors = policy.parse(text)
    if not errors:
        return []
    if not tree_found and policy.trust_tree_sitter_when_only_precise_fails:
        return []
    lines = text.split("\n")
    precise: list[Finding] = []
    for error in errors:
        message = error.message
        if language == "python" and not tree_found:
            message += (
                f" (reported by Python {PY_VERSION}'s parser; tree-sitter accepts this, so it "
                f"may be syntax newer than Python {PY_VERSION})"
            )
        precise.append(
            finding(
                path=display,
                line=error.line,
                column=error.column,
                severity="error",
                check=CHECK,
                code=f"{language}-syntax",
                message=message,
                anchor=lines[error.line - 1] if 0 < error.line <= len(lines) else "",
            )
        )
    first = min(e.line for e in errors)
    taken = {e.line for e in errors}
    rest = [f for f in tree_found if f.diagnostic.line > first and f.diagnostic.line not in taken]
    return [*precise, *rest]
