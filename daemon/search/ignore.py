""".gitignore semantics for the places where rg does not do the walking.

The grep fallback and ``file_list`` walk the tree themselves; this module gives
them the same answer rg gives: ``.gitignore``, ``.ignore`` and ``.rgignore``
files in every directory (deeper files win, and within a directory
``.rgignore`` > ``.ignore`` > ``.gitignore``; within a file the last matching
line wins), plus ``.git/info/exclude`` of the enclosing repository. Like rg
with ``--no-require-git``, the rules apply outside git work trees too. A
directory that is ignored is not descended into, so its contents stay hidden
even if a later line would re-include them (git's rule).

Global git excludes (``core.excludesFile``) are not read: they belong to a
developer's machine, not to the workspace.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from airlock.daemon.search.globs import translate

# Lowest precedence first, as rg orders them within one directory.
IGNORE_FILE_NAMES: tuple[str, ...] = (".gitignore", ".ignore", ".rgignore")
_STAR_LINES = frozenset({"*", "/*", "**", "/**"})
# Bounds the venv scan so a note never costs more than a few hundred directory reads.
_STAR_SCAN_DIRS = 400


@dataclass(frozen=True)
class Rule:
    """One .gitignore line, compiled."""

    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool
    source: str
    line: str

    def matches(self, sub: str, is_dir: bool) -> bool:
        if self.dir_only and not is_dir:
            return False
        target = sub if self.anchored else sub.rsplit("/", 1)[-1]
        return self.regex.match(target) is not None

    @property
    def is_star(self) -> bool:
        """A line that ignores everything beside it (a venv's or a build tool's ``*``)."""
        return not self.negate and self.line.strip() in _STAR_LINES


def parse_line(raw: str, source: str) -> Rule | None:
    line = raw.rstrip("\n").rstrip("\r")
    if not line or line.startswith("#"):
        return None
    # Trailing spaces are dropped unless escaped with a backslash.
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line:
        return None
    original = line
    negate = line.startswith("!")
    if negate:
        line = line[1:]
    dir_only = line.endswith("/") and not line.endswith("\\/")
    if dir_only:
        line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.removeprefix("/")
    try:
        regex = re.compile("^" + translate(line) + "$", re.DOTALL)
    except re.error:
        return None
    return Rule(regex, negate, dir_only, anchored, source, original)


@dataclass(frozen=True)
class RuleFile:
    """The rules of one ignore file; ``base`` is its directory relative to the ignore root."""

    base: str
    rules: tuple[Rule, ...]

    def decide(self, rel: str, is_dir: bool) -> Rule | None:
        if self.base:
            if not rel.startswith(self.base + "/"):
                return None
            sub = rel[len(self.base) + 1 :]
        else:
            sub = rel
        for rule in reversed(self.rules):
            if rule.matches(sub, is_dir):
                return rule
        return None

    @property
    def has_star(self) -> bool:
        return any(rule.is_star for rule in self.rules)


def read_rule_file(path: Path, base: str, source: str) -> RuleFile | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace")
    rules = tuple(r for r in (parse_line(raw, source) for raw in text.split("\n")) if r)
    return RuleFile(base, rules) if rules else None


def load_dir(dir_abs: Path, base: str) -> tuple[RuleFile, ...]:
    """The ignore files of one directory, lowest precedence first."""
    found: list[RuleFile] = []
    for name in IGNORE_FILE_NAMES:
        source = f"{base}/{name}" if base else name
        rule_file = read_rule_file(dir_abs / name, base, source)
        if rule_file is not None:
            found.append(rule_file)
    return tuple(found)


def find_ignore_root(root: Path) -> Path:
    """The git work tree holding ``root``, else ``root``: where rule files start to count."""
    for candidate in (root, *root.parents):
        if (candidate / ".git").exists():
            return candidate
    return root


@dataclass(frozen=True)
class IgnoreStack:
    """The rule files in effect inside one directory, lowest precedence first.

    Paths given to ``decide`` are relative to the walk's root; ``prefix`` is the
    root's own path relative to the ignore root, so rule bases line up.
    """

    ignore_root: Path
    prefix: str
    frames: tuple[RuleFile, ...]

    def _key(self, rel: str) -> str:
        if not self.prefix:
            return rel
        return f"{self.prefix}/{rel}" if rel else self.prefix

    def decide(self, rel: str, is_dir: bool) -> Rule | None:
        key = self._key(rel)
        for frame in reversed(self.frames):
            rule = frame.decide(key, is_dir)
            if rule is not None:
                return rule
        return None

    def ignored(self, rel: str, is_dir: bool) -> bool:
        rule = self.decide(rel, is_dir)
        return rule is not None and not rule.negate

    def enter(self, dir_abs: Path, rel: str) -> IgnoreStack:
        """The stack inside ``dir_abs`` (``rel`` relative to the walk's root)."""
        added = load_dir(dir_abs, self._key(rel))
        if not added:
            return self
        return IgnoreStack(self.ignore_root, self.prefix, self.frames + added)


def stack_for(root: Path, rel_dir: str) -> IgnoreStack:
    """The stack in effect inside ``root/rel_dir``: every rule file from the ignore root down."""
    ignore_root = find_ignore_root(root)
    prefix = root.relative_to(ignore_root).as_posix()
    prefix = "" if prefix == "." else prefix
    frames: list[RuleFile] = []
    exclude = read_rule_file(ignore_root / ".git" / "info" / "exclude", "", ".git/info/exclude")
    if exclude is not None:
        frames.append(exclude)
    # Directories from the ignore root down to root itself, then down to rel_dir.
    chain: list[tuple[Path, str]] = [(ignore_root, "")]
    walked = ""
    for part in Path(prefix).parts if prefix else ():
        walked = f"{walked}/{part}" if walked else part
        chain.append((ignore_root / walked, walked))
    for part in rel_dir.split("/") if rel_dir not in ("", ".") else ():
        walked = f"{walked}/{part}" if walked else part
        chain.append((ignore_root / walked, walked))
    for dir_abs, base in chain:
        frames.extend(load_dir(dir_abs, base))
    return IgnoreStack(ignore_root, prefix, tuple(frames))


@dataclass(frozen=True)
class HiddenBy:
    """Why a path is hidden: the ignored directory and the line that hides it."""

    path: str
    rule: Rule


def why_ignored(root: Path, rel: str) -> HiddenBy | None:
    """The first ancestor-or-self of ``rel`` (relative to ``root``) that ignore rules hide.

    Used for notes only: rg searches a path it is given explicitly, but rules
    inside it (a venv's ``*``) still hide its contents.
    """
    if rel in ("", "."):
        return None
    parts = rel.split("/")
    for depth in range(1, len(parts) + 1):
        parent = "/".join(parts[: depth - 1])
        current = "/".join(parts[:depth])
        is_dir = depth < len(parts) or (root / current).is_dir()
        rule = stack_for(root, parent).decide(current, is_dir)
        if rule is not None and not rule.negate:
            return HiddenBy(current, rule)
    return None


def star_ignored_dirs(root: Path, rel: str, *, depth: int = 2, cap: int = 5) -> list[str]:
    """Directories at or under ``root/rel`` (or above it, down from root) whose own
    .gitignore ignores everything, like the one ``python -m venv`` writes.

    Breadth-first to ``depth`` levels, reading directory entries' types without a
    stat each and opening only ``.gitignore`` files, so the note stays cheap on
    large trees (bounded by ``_STAR_SCAN_DIRS`` directories).
    """
    found: list[str] = []
    parts = [] if rel in ("", ".") else rel.split("/")
    for i in range(1, len(parts) + 1):
        above = "/".join(parts[:i])
        if _star_file(root / above / ".gitignore"):
            found.append(above)
    start = root / rel if parts else root
    frontier: list[tuple[Path, str, int]] = [(start, rel if parts else "", 0)]
    visited = 0
    while frontier and len(found) < cap and visited < _STAR_SCAN_DIRS:
        dir_abs, dir_rel, level = frontier.pop(0)
        visited += 1
        if level >= depth:
            continue
        try:
            with os.scandir(dir_abs) as it:
                children = sorted(
                    e.name for e in it if e.name != ".git" and e.is_dir(follow_symlinks=False)
                )
        except OSError:
            continue
        for name in children:
            child_rel = f"{dir_rel}/{name}" if dir_rel else name
            if _star_file(dir_abs / name / ".gitignore"):
                found.append(child_rel)
                if len(found) >= cap:
                    break
            else:
                frontier.append((dir_abs / name, child_rel, level + 1))
    return found


def _star_file(path: Path) -> bool:
    rule_file = read_rule_file(path, "", path.name)
    return rule_file is not None and rule_file.has_star


def has_rules(root: Path) -> bool:
    """Whether any ignore rule applies at ``root`` (for the "no matches" note)."""
    return bool(stack_for(root, "").frames)
