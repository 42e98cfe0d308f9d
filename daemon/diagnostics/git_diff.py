"""The ``git-diff`` check: ``git diff --check`` on the touched paths inside a work tree.

git judges only lines that differ from the index, which is exactly "what this
change adds": trailing whitespace, space-before-tab, blank lines at EOF and
leftover conflict markers, honouring the repository's ``core.whitespace`` and
``.gitattributes``. Files git does not track (new files, files outside any
repository) go to the ``whitespace`` check instead.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from airlock.daemon.diagnostics.model import MAX_FINDINGS_PER_FILE, Finding, finding
from airlock.daemon.diagnostics.procs import CheckUnavailable, run_bounded

CHECK = "git-diff"

_HEADER = re.compile(r"^(?P<path>.+):(?P<line>\d+): (?P<message>.+)$")
_CODES: dict[str, str] = {
    "trailing whitespace": "trailing-whitespace",
    "space before tab in indent": "space-before-tab",
    "indent with spaces": "indent-with-non-tab",
    "tab in indent": "tab-in-indent",
    "new blank line at EOF": "blank-at-eof",
    "leftover conflict marker": "conflict-marker",
}


def git_env() -> dict[str, str]:
    """English messages, no prompts, and no index.lock taken by a read-only diff."""
    return {
        **os.environ,
        "LC_ALL": "C",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
    }


def git_executable() -> str:
    found = shutil.which("git")
    if found is None:
        raise CheckUnavailable("git is not installed")
    return found


def find_repo(path: Path) -> Path | None:
    """The work tree holding ``path``: the nearest ancestor with a ``.git`` entry.

    Blocking (stat calls): callers run it in a thread.
    """
    for folder in (path, *path.parents) if path.is_dir() else path.parents:
        if (folder / ".git").exists():
            return folder
    return None


async def tracked_files(repo: Path, files: Iterable[Path], timeout_s: float) -> set[Path]:
    """Which of ``files`` git tracks (``ls-files``), as real paths."""
    rels = [str(f.relative_to(repo)) for f in files]
    if not rels:
        return set()
    done = await run_bounded(
        [git_executable(), "--literal-pathspecs", "ls-files", "-z", "--", *rels],
        cwd=repo,
        timeout_s=timeout_s,
        env=git_env(),
    )
    if done.returncode != 0:
        raise CheckUnavailable(
            "git ls-files failed: " + done.stderr.decode("utf-8", "replace").strip()[:300]
        )
    names = [n for n in done.stdout.decode("utf-8", "replace").split("\0") if n]
    return {repo / n for n in names}


async def diff_check(repo: Path, files: Mapping[Path, str], timeout_s: float) -> list[Finding]:
    """``git diff --check`` for ``files`` (real path -> display), parsed into findings."""
    if not files:
        return []
    display_by_rel = {str(real.relative_to(repo)): shown for real, shown in files.items()}
    done = await run_bounded(
        [
            git_executable(),
            "--literal-pathspecs",
            "-c",
            "core.quotepath=off",
            "diff",
            "--check",
            "--no-color",
            "--no-ext-diff",
            "--",
            *display_by_rel,
        ],
        cwd=repo,
        timeout_s=timeout_s,
        env=git_env(),
    )
    # Exit 0: clean; 2 (or 1 on old gits): problems found; anything else is git failing.
    if done.returncode not in (0, 1, 2) or (done.returncode != 0 and not done.stdout):
        raise CheckUnavailable(
            "git diff --check failed: " + done.stderr.decode("utf-8", "replace").strip()[:300]
        )
    return parse_check_output(done.stdout.decode("utf-8", "replace"), display_by_rel)


def parse_check_output(output: str, display_by_rel: Mapping[str, str]) -> list[Finding]:
    """Turn ``path:line: message.`` + ``+offending line`` pairs into findings."""
    out: list[Finding] = []
    lines = output.split("\n")
    for index, raw in enumerate(lines):
        match = _HEADER.match(raw)
        if match is None or raw.startswith(("+", "-", " ")):
            continue
        rel = match["path"]
        if rel.startswith('"') and rel.endswith('"'):
            rel = rel[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        message = match["message"].rstrip(".")
        following = lines[index + 1] if index + 1 < len(lines) else ""
        anchor = following[1:] if following.startswith("+") else ""
        code = _CODES.get(message, "whitespace")
        column = len(anchor.rstrip(" \t")) + 1 if code == "trailing-whitespace" else 1
        out.append(
            finding(
                path=display_by_rel.get(rel, rel),
                line=int(match["line"]),
                column=column,
                severity="error" if code == "conflict-marker" else "warning",
                check=CHECK,
                code=code,
                message=message,
                anchor=anchor,
            )
        )
        if len(out) >= MAX_FINDINGS_PER_FILE * max(1, len(display_by_rel)):
            break
    return out
