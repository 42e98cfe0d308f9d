"""The ``git-diff`` check: ``git diff --check`` of the work tree against the index.

git judges only lines that differ from the index, which is exactly "what this
change adds": trailing whitespace, space-before-tab, blank lines at EOF and
leftover conflict markers. Files git does not track (new files, files outside
any repository) go to the ``whitespace`` check instead.

Why git never looks at the work tree here: a repository's own configuration
can make git run programs (``core.fsmonitor``, ``filter.*.clean``/``process``
drivers named by ``.gitattributes``, ``diff.*.textconv``, hooks, a lazy fetch's
transport), and the repository belongs to the agent. So git only reads the
index (``ls-files --stage``) and raw blobs (``cat-file --batch``: no filters)
with every program-running setting turned off, and the comparison itself runs
as ``git diff --no-index --check`` between two private copies (index blob,
work-tree bytes) in an empty directory outside any repository, with no system
or global configuration. Nothing from the workspace can run, in any scope. The
price: the repository's ``core.whitespace`` and whitespace attributes are not
honoured (git's defaults apply), and filtered files (LFS) compare raw bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .model import MAX_FINDINGS_PER_FILE, Finding, finding
from .procs import READ_SCOPE, CheckUnavailable, RunAs, run_bounded

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
MAX_FILE_BYTES = 64 * 1024 * 1024
_BLOBS_KEPT = 64
_RESULTS_KEPT = 256

SAFE_CONFIG: tuple[str, ...] = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "protocol.allow=never",
    "diff.external=",
    "core.quotepath=off",
)
"""``-c`` settings on every git call: nothing the repository configures may run a program."""


def git_env(home: str | None = None) -> dict[str, str]:
    """English messages, no prompts, no locks, no lazy fetch; nothing from ``os.environ``
    that could point git at another program (GIT_EXTERNAL_DIFF, GIT_SSH...)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k not in ("EDITOR",)}
    env.update(
        {
            "LC_ALL": "C",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
            "GIT_NO_LAZY_FETCH": "1",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
        }
    )
    if home is not None:
        env["HOME"] = home
    return env


def git_executable() -> str:
    found = shutil.which("git")
    if found is None:
        raise CheckUnavailable("git is not installed")
    return found


def _git(repo: Path | None, *args: str) -> list[str]:
    argv = [git_executable(), "--literal-pathspecs"]
    for setting in SAFE_CONFIG:
        argv += ["-c", setting]
    if repo is not None:  # the daemon may run as another user than the repository's owner
        argv += ["-c", f"safe.directory={repo}"]
    return [*argv, *args]


@dataclass(frozen=True)
class IndexEntry:
    blob: str
    mode: str


async def index_entries(
    repo: Path, files: Iterable[Path], timeout_s: float, run_as: RunAs = READ_SCOPE
) -> dict[Path, IndexEntry]:
    """The stage-0 index entries of ``files`` (real paths) that are regular files."""
    rels = [str(f.relative_to(repo)) for f in files]
    if not rels:
        return {}
    done = await run_bounded(
        _git(repo, "ls-files", "--stage", "-z", "--", *rels),
        cwd=repo,
        timeout_s=timeout_s,
        env=git_env(),
        run_as=run_as,
    )
    if done.returncode != 0:
        raise CheckUnavailable(
            "git ls-files failed: " + done.stderr.decode("utf-8", "replace").strip()[:300]
        )
    out: dict[Path, IndexEntry] = {}
    for record in done.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        fields = meta.split()
        if len(fields) != 3 or fields[2] != b"0" or not fields[0].startswith(b"100"):
            continue  # conflicted stages, symlinks, submodules: nothing to compare
        out[repo / os.fsdecode(name)] = IndexEntry(fields[1].decode(), fields[0].decode())
    return out


async def tracked_files(
    repo: Path, files: Iterable[Path], timeout_s: float, run_as: RunAs = READ_SCOPE
) -> set[Path]:
    """Which of ``files`` git tracks, as real paths."""
    return set(await index_entries(repo, files, timeout_s, run_as))


class BlobCache:
    """Raw index blobs by id (``cat-file --batch``: never filtered), the last few kept."""

    def __init__(self) -> None:
        self._blobs: OrderedDict[str, bytes] = OrderedDict()

    async def get(
        self, repo: Path, blobs: Iterable[str], timeout_s: float, run_as: RunAs = READ_SCOPE
    ) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(blobs))
        missing = [b for b in wanted if b not in self._blobs]
        if missing:
            done = await run_bounded(
                _git(repo, "cat-file", "--batch"),
                cwd=repo,
                timeout_s=timeout_s,
                env=git_env(),
                stdin=("\n".join(missing) + "\n").encode(),
                run_as=run_as,
            )
            if done.returncode != 0:
                raise CheckUnavailable(
                    "git cat-file failed: " + done.stderr.decode("utf-8", "replace").strip()[:300]
                )
            for blob, data in _parse_batch(done.stdout).items():
                self._blobs[blob] = data
            while len(self._blobs) > _BLOBS_KEPT:
                self._blobs.popitem(last=False)
        found: dict[str, bytes] = {}
        for blob in wanted:
            kept = self._blobs.get(blob)
            if kept is not None:
                self._blobs.move_to_end(blob)
                found[blob] = kept
        return found


def _parse_batch(out: bytes) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    at = 0
    while at < len(out):
        end = out.find(b"\n", at)
        if end < 0:
            break
        header = out[at:end].split()
        at = end + 1
        if len(header) != 3:  # "<id> missing"
            continue
        size = int(header[2])
        found[header[0].decode()] = out[at : at + size]
        at += size + 1
    return found


def _write_pairs(base: Path, pairs: Mapping[str, tuple[bytes, bytes]]) -> None:
    for index, (old, new) in enumerate(pairs.values()):
        for side, data in (("a", old), ("b", new)):
            folder = base / side / str(index)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "f").write_bytes(data)


async def check_pairs(
    pairs: Mapping[str, tuple[bytes, bytes]], timeout_s: float, run_as: RunAs = READ_SCOPE
) -> dict[str, list[Finding]]:
    """``git diff --check`` of (index bytes, work-tree bytes) per display name.

    Runs in a private temporary directory outside any repository, with no
    system or global configuration: nothing but git's defaults applies.
    """
    if not pairs:
        return {}
    base = Path(tempfile.mkdtemp(prefix="airlock-gitcheck-"))
    user = run_as.user
    if user is not None and os.geteuid() == 0 and not user.is_current:
        os.chown(base, user.uid, user.gid)  # git runs as the exec user and reads it
    try:
        await asyncio.to_thread(_write_pairs, base, pairs)
        done = await run_bounded(
            _git(None, "diff", "--no-index", "--check", "--no-color", "--no-ext-diff", "a", "b"),
            cwd=base,
            timeout_s=timeout_s,
            env={**git_env(home=str(base)), "GIT_CEILING_DIRECTORIES": str(base.parent)},
            run_as=run_as,
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, base, True)
    # --no-index implies --exit-code: 0 clean, 1 differences, 2|3 with problems.
    if done.returncode not in (0, 1, 2, 3) or (done.returncode > 1 and not done.stdout):
        raise CheckUnavailable(
            "git diff --check failed: " + done.stderr.decode("utf-8", "replace").strip()[:300]
        )
    names = list(pairs)
    by_rel = {f"b/{index}/f": name for index, name in enumerate(names)}
    found = parse_check_output(done.stdout.decode("utf-8", "replace"), by_rel)
    out: dict[str, list[Finding]] = {name: [] for name in names}
    for item in found:
        out.setdefault(item.diagnostic.path, []).append(item)
    return out


class GitDiffCheck:
    """The check with its caches: blobs by id, results by (index blob, work-tree digest).

    An edit's result is the next edit's baseline, so a steady stream of edits
    costs one ``git diff`` per edit (plus one ``ls-files``).
    """

    def __init__(self, run_as: RunAs = READ_SCOPE) -> None:
        self.run_as = run_as
        """Who git runs as: the exec user, so it reads only what the agent could."""
        self.blobs = BlobCache()
        self._results: OrderedDict[tuple[str, str, bytes], list[Finding]] = OrderedDict()
        self.git_runs = 0
        """``git diff`` processes started (the benchmark and tests read it)."""

    async def run(
        self,
        repo: Path,
        files: Mapping[Path, str],
        entries: Mapping[Path, IndexEntry],
        timeout_s: float,
        read: Callable[[Path], bytes | None],
    ) -> list[Finding]:
        """Findings for ``files`` (real -> display) that have an index entry.

        ``read`` gives a work-tree file's bytes (None: not a regular file, too
        large, gone): the service's resolver reader, so a folder swapped for a
        symlink is refused rather than followed.
        """
        wanted = {real: display for real, display in files.items() if real in entries}
        if not wanted:
            return []
        worktree = await asyncio.to_thread(lambda: {r: read(r) for r in wanted})
        blobs = await self.blobs.get(
            repo, (entries[r].blob for r in wanted), timeout_s, self.run_as
        )
        out: list[Finding] = []
        pairs: dict[str, tuple[bytes, bytes]] = {}
        keys: dict[str, tuple[str, str, bytes]] = {}
        for real, display in wanted.items():
            data, old = worktree.get(real), blobs.get(entries[real].blob)
            if data is None or old is None:
                continue
            key = (display, entries[real].blob, hashlib.sha256(data).digest())
            cached = self._results.get(key)
            if cached is not None:
                self._results.move_to_end(key)
                out.extend(cached)
            else:
                pairs[display] = (old, data)
                keys[display] = key
        if pairs:
            self.git_runs += 1
            fresh = await check_pairs(pairs, timeout_s, self.run_as)
            for display, found in fresh.items():
                out.extend(found)
                if display in keys:
                    self._results[keys[display]] = found
            while len(self._results) > _RESULTS_KEPT:
                self._results.popitem(last=False)
        return out


def parse_check_output(output: str, display_by_rel: Mapping[str, str]) -> list[Finding]:
    """Turn ``path:line: message.`` + ``+offending line`` pairs into findings."""
    out: list[Finding] = []
    per_file: dict[str, int] = {}
    lines = output.split("\n")
    for index, raw in enumerate(lines):
        match = _HEADER.match(raw)
        if match is None or raw.startswith(("+", "-", " ")):
            continue
        rel = match["path"]
        if rel.startswith('"') and rel.endswith('"'):
            rel = rel[1:-1].encode("latin-1", "backslashreplace").decode("unicode_escape")
        display = display_by_rel.get(rel, rel)
        if per_file.get(display, 0) >= MAX_FINDINGS_PER_FILE:
            continue
        per_file[display] = per_file.get(display, 0) + 1
        message = match["message"].rstrip(".")
        following = lines[index + 1] if index + 1 < len(lines) else ""
        anchor = following[1:] if following.startswith("+") else ""
        code = _CODES.get(message, "whitespace")
        column = len(anchor.rstrip(" \t")) + 1 if code == "trailing-whitespace" else 1
        out.append(
            finding(
                path=display,
                line=int(match["line"]),
                column=column,
                severity="error" if code == "conflict-marker" else "warning",
                check=CHECK,
                code=code,
                message=message,
                anchor=anchor,
            )
        )
    return out
