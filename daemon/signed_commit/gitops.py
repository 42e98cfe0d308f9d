"""Every git command airlock-signed-commit runs, in one place.

All reads run with ``GIT_OPTIONAL_LOCKS=0`` so inspecting the repository never
rewrites the index (the guard promises to leave worktree and index untouched),
and no command ever prompts. The only writes are the final ``git fetch`` and
``git reset --soft`` (never ``--hard``: the worktree is the model's work).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from .errors import SignedCommitError

MODE_SYMLINK = "120000"
MODE_GITLINK = "160000"
MODE_EXECUTABLE = "100755"
_LIST_LIMIT = 20


@dataclass(frozen=True)
class Change:
    """One staged path: an addition (A/M/T, with the staged bytes) or a deletion."""

    kind: Literal["addition", "deletion"]
    path: str
    contents: bytes = b""
    mode: str = "100644"
    oid: str = ""


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_ASKPASS", "true")
    env["LC_ALL"] = "C"
    if extra:
        env.update(extra)
    return env


class Git:
    """A repository's top level and the git commands run in it."""

    def __init__(self, top: Path) -> None:
        self.top = top
        self._env: dict[str, str] = {}
        self._index_copy: Path | None = None

    def __enter__(self) -> Git:
        """Point every command at a private copy of the index.

        Porcelain ``git diff`` refreshes stat data and writes the index back even
        with ``GIT_OPTIONAL_LOCKS=0``; reading through a copy keeps the real index
        byte-for-byte untouched. Nothing here needs to write the real index:
        ``git fetch`` does not touch it and ``git reset --soft`` only moves HEAD.
        """
        index = Path(self.text(["rev-parse", "--path-format=absolute", "--git-path", "index"]))
        fd, name = tempfile.mkstemp(prefix="airlock-signed-commit-index-")
        os.close(fd)
        self._index_copy = Path(name)
        if index.exists():
            shutil.copyfile(index, self._index_copy)
        else:
            self._index_copy.unlink()
        self._env["GIT_INDEX_FILE"] = str(self._index_copy)
        return self

    def __exit__(self, *exc: object) -> None:
        self._env.pop("GIT_INDEX_FILE", None)
        if self._index_copy is not None:
            self._index_copy.unlink(missing_ok=True)
            Path(f"{self._index_copy}.lock").unlink(missing_ok=True)
            self._index_copy = None

    @classmethod
    def discover(cls, cwd: Path | None = None) -> Git:
        proc = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=cwd,
            env=_env(),
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SignedCommitError(
                "not inside a git checkout: run gh-signed-commit from the top level of the "
                "repository's clone"
            )
        return cls(Path(proc.stdout.decode().strip()))

    def run(
        self,
        args: Sequence[str],
        *,
        check: bool = True,
        input_bytes: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        proc = subprocess.run(
            ["git", *args],
            cwd=self.top,
            env=_env({**self._env, **(env or {})}),
            input=input_bytes,
            capture_output=True,
            check=False,
        )
        if check and proc.returncode != 0:
            err = proc.stderr.decode(errors="replace").strip()
            raise SignedCommitError(f"git {' '.join(args[:2])} failed: {err}")
        return proc

    def text(self, args: Sequence[str]) -> str:
        return self.run(args).stdout.decode(errors="replace").strip()

    def head(self) -> str:
        proc = self.run(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], check=False)
        if proc.returncode != 0:
            raise SignedCommitError(
                "this checkout has no commit yet (HEAD is unborn): clone the repository "
                "(gh repo clone OWNER/REPO) and stage your changes on top of it"
            )
        return proc.stdout.decode().strip()

    def remote_url(self, remote: str = "origin") -> str:
        proc = self.run(["remote", "get-url", remote], check=False)
        if proc.returncode != 0:
            raise SignedCommitError(
                f"this checkout has no remote {remote!r}: clone with gh repo clone OWNER/REPO"
            )
        return proc.stdout.decode().strip()

    def unstaged_tracked(self) -> list[str]:
        """Tracked paths whose worktree differs from the index (incl. unmerged)."""
        out = self.run(["diff", "--no-ext-diff", "--name-only", "-z"]).stdout
        return sorted({_decode(p) for p in out.split(b"\0") if p})

    def guard_unstaged(self) -> None:
        """Refuse when tracked files have unstaged changes; touches nothing."""
        paths = self.unstaged_tracked()
        if paths:
            shown = ", ".join(paths[:_LIST_LIMIT])
            more = f" and {len(paths) - _LIST_LIMIT} more" if len(paths) > _LIST_LIMIT else ""
            raise SignedCommitError(
                f"unstaged changes to tracked files: {shown}{more}. gh-signed-commit commits "
                "exactly what is staged, so it refuses while the worktree differs from the "
                "index. Stage them (git add PATH) or discard them (git restore PATH), then run "
                "it again. Nothing was sent and nothing was changed."
            )

    def staged_changes(self) -> list[Change]:
        """The staged changes against HEAD, with the staged bytes of each addition."""
        self.head()
        raw = self.run(["diff", "--cached", "--no-renames", "--name-status", "-z", "HEAD"]).stdout
        fields = raw.split(b"\0")
        if fields and fields[-1] == b"":
            fields.pop()
        if len(fields) % 2:
            raise SignedCommitError("could not parse git diff --cached output")
        entries = [
            (fields[i].decode(errors="replace"), _decode(fields[i + 1]))
            for i in range(0, len(fields), 2)
        ]
        if not entries:
            raise SignedCommitError(
                "nothing is staged: stage the changes to commit with git add PATH "
                "(or git rm PATH for deletions), then run gh-signed-commit again"
            )
        unmerged = [p for s, p in entries if s.startswith("U")]
        if unmerged:
            raise SignedCommitError(
                f"unmerged paths: {', '.join(unmerged[:_LIST_LIMIT])}. Resolve the conflicts "
                "and stage the results (git add PATH) first."
            )
        odd = [f"{s} {p}" for s, p in entries if s[:1] not in ("A", "M", "T", "D")]
        if odd:
            raise SignedCommitError(f"unexpected staged change(s): {', '.join(odd)}")
        index = self._index_entries([p for s, p in entries if s[:1] != "D"])
        changes: list[Change] = []
        for status, path in entries:
            if status.startswith("D"):
                changes.append(Change("deletion", path))
                continue
            mode, oid = index[path]
            if mode == MODE_GITLINK:
                raise SignedCommitError(
                    f"{path} is a submodule: createCommitOnBranch cannot record submodule "
                    "changes. Unstage it (git restore --staged PATH) and update it with git push."
                )
            if mode == MODE_SYMLINK:
                raise SignedCommitError(
                    f"{path} is a symbolic link: createCommitOnBranch can only write regular "
                    "files. Unstage it (git restore --staged PATH) or commit it with git push."
                )
            changes.append(Change("addition", path, mode=mode, oid=oid))
        return self._with_contents(changes)

    def _index_entries(self, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Stage-0 mode and blob oid of ``paths`` (``git ls-files -s``)."""
        wanted = set(paths)
        out = self.run(["ls-files", "--stage", "-z", "--full-name"]).stdout
        found: dict[str, tuple[str, str]] = {}
        for record in out.split(b"\0"):
            if not record:
                continue
            meta, _, raw_path = record.partition(b"\t")
            path = _decode(raw_path)
            if path not in wanted:
                continue
            mode, oid, stage = meta.decode().split(" ")
            if stage == "0":
                found[path] = (mode, oid)
        missing = wanted - found.keys()
        if missing:
            raise SignedCommitError(f"staged path(s) missing from the index: {sorted(missing)}")
        return found

    def _with_contents(self, changes: list[Change]) -> list[Change]:
        """Fill in each addition's staged bytes (one ``git cat-file --batch``)."""
        additions = [c for c in changes if c.kind == "addition"]
        if not additions:
            return changes
        request = b"".join(c.oid.encode() + b"\n" for c in additions)
        out = self.run(["cat-file", "--batch"], input_bytes=request).stdout
        blobs: list[bytes] = []
        pos = 0
        for _ in additions:
            eol = out.index(b"\n", pos)
            header = out[pos:eol].split(b" ")
            if len(header) != 3 or header[1] != b"blob":
                raise SignedCommitError(f"could not read a staged blob: {header!r}")
            size = int(header[2])
            start = eol + 1
            blobs.append(out[start : start + size])
            pos = start + size + 1
        contents = iter(blobs)
        return [replace(c, contents=next(contents)) if c.kind == "addition" else c for c in changes]

    def fetch(self, source: str, branch: str, *, config: Sequence[str] = ()) -> str:
        """``git fetch SOURCE BRANCH``; returns the fetched commit (FETCH_HEAD)."""
        args: list[str] = []
        for item in config:
            args += ["-c", item]
        self.run([*args, "fetch", "--no-tags", source, f"refs/heads/{branch}"])
        return self.text(["rev-parse", "--verify", "FETCH_HEAD^{commit}"])

    def reset_soft(self, oid: str) -> None:
        self.run(["reset", "--soft", oid])

    def has_extraheader(self, url: str) -> bool:
        proc = self.run(["config", "--get-urlmatch", "http.extraheader", url], check=False)
        return proc.returncode == 0 and bool(proc.stdout.strip())


def basic_extraheader(token: str) -> str:
    """The git ``http.extraheader`` value carrying ``token`` (a placeholder) as Basic."""
    creds = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return f"Authorization: Basic {creds}"


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SignedCommitError(
            f"path {raw!r} is not valid UTF-8; GitHub's API cannot name it"
        ) from None
