"""The diagnostics service the tools call.

``run`` answers the ``diagnostics`` tool; ``tracker`` gives an editing tool a
baseline-before / result-after pair so it reports only what the edit
introduced. The checks live in the modules beside this one; this module
decides which check applies to which file, runs them concurrently off the
event loop, and turns every failure into a ``skipped`` entry: a check never
raises and never fails an edit.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AirlockError, IsDirectory, NotFound, TooLarge
from ..fsio import read_file_bytes
from ..identity import ExecUser
from ..paths import ResolvedPath, Roots
from ..protocol import (
    ALL_CHECKS,
    CheckName,
    DiagnosticsOutput,
)
from ..worktree import find_work_tree
from . import git_diff, types
from .ahead import Ahead
from .expand import MAX_FILES, expand
from .model import (
    CheckResult,
    Finding,
    finding,
)
from .procs import CheckTimeout, CheckUnavailable, RunAs
from .report import Results, capped, skip, skipped_entries
from .tracker import EditTracker
from .worker_client import WorkerClient, WorkerGone

_MEMO_FILES = 256
TYPES_BACKOFF_S = 300.0
"""After a type check times out, editing tools skip it for the same files this long
(saying so): otherwise every edit of a file too big to check waits out the timeout."""
_ANSWERS_KEPT = 64

__all__ = ["Ahead", "DiagnosticsService", "EditTracker"]


class DiagnosticsService:
    """Runs the checks; owns the worker process that parses files."""

    def __init__(
        self,
        workspace: Path,
        timeout_s: float = 20.0,
        *,
        edit_checks: Sequence[CheckName] = ALL_CHECKS,
        exec_user: ExecUser | None = None,
        roots: Roots | None = None,
    ) -> None:
        self.workspace = workspace
        self.roots = roots if roots is not None else Roots(workspace=workspace)
        """Every file a check reads is read through these (fd-relative, beneath its root):
        the worker is sent bytes, never a path to open."""
        self.timeout_s = timeout_s
        self.write_scope = RunAs(workspace_code=True, user=exec_user)
        """Who programs of the workspace run as (editing tools, write-scope ``diagnostics``)."""
        self.read_scope = RunAs(workspace_code=False, user=exec_user)
        """Read-scope checkers: only trusted programs, and still as the exec user, so a
        checker reads nothing for the agent that the agent could not read itself (a
        workspace module symlinked to a root-only file stays unreadable)."""
        # git reads the repository the agent controls: as the exec user.
        self.git = git_diff.GitDiffCheck(self.read_scope)
        self.edit_checks: list[CheckName] = list(edit_checks)
        """The checks an editing tool's tracker runs (a deployment may drop ``types``)."""
        # The worker is sent bytes over a pipe and opens nothing (docs/daemon.md, "Acting
        # as the exec user"): it stays the daemon's, so it runs wherever its interpreter is.
        self.worker = WorkerClient()
        self.checkers = types.Checkers()
        self.generation = 0
        """Counts finished edits; remembered type results are valid within one generation."""
        self._memo: OrderedDict[Path, _Remembered] = OrderedDict()
        self._answers: OrderedDict[tuple[Path, str, tuple[str, ...], bytes], dict[str, Any]] = (
            OrderedDict()
        )
        """The worker's answers by (file, checks, content digest): syntax and whitespace
        depend on the bytes alone, so a baseline over bytes the last edit's after-check
        saw needs no trip to the worker."""
        self._timed_out: dict[tuple[object, ...], float] = {}
        """When a type check of a group of files last timed out (monotonic seconds)."""
        self.type_checker_runs = 0
        """How many checker processes were started (tests and the benchmark read it)."""
        self.checked_ahead = 0
        """How many files' after-edit results came from checking their bytes ahead of
        the write (tests read it)."""

    async def run(
        self,
        paths: Sequence[ResolvedPath],
        checks: Sequence[CheckName] = ALL_CHECKS,
        *,
        scope: str = "read",
    ) -> DiagnosticsOutput:
        """The ``diagnostics`` tool. ``scope`` is the caller's token scope: ``read`` runs no
        program of the workspace; ``write`` runs them as the exec user."""
        wanted = list(dict.fromkeys(checks))
        expansion = await asyncio.to_thread(expand, self.roots, paths)
        run_as = self.write_scope if scope == "write" else self.read_scope
        results = await self.collect(expansion.paths, wanted, run_as=run_as)
        for check in wanted:
            for reason in expansion.unreadable_names:
                results[check].skipped.append(reason)
        for folder in expansion.truncated:
            for check in wanted:
                results[check].skipped.append(
                    f"only the first {MAX_FILES} files under {folder} were checked; "
                    "name subfolders or files to check the rest"
                )
        findings: dict[str, list[Finding]] = {c: results[c].findings for c in wanted}
        diagnostics = capped(results, wanted, findings)
        return DiagnosticsOutput(
            diagnostics=diagnostics,
            checks_run=[c for c in wanted if results[c].ran],
            skipped=skipped_entries(results, wanted, with_not_applicable=True),
        )

    def describe(self) -> dict[str, object]:
        """What the checks run with, for ``/v1/health``'s ``engines`` (blocking: a thread)."""
        pyright = types.basedpyright_argv()
        node = types.node_executable()
        typescript = types.find_typescript(self.workspace / "x.ts", node)
        return {
            "syntax": "tree-sitter",
            "python_types": pyright[0] if pyright else None,
            "node": node,
            "typescript": str(typescript) if typescript else None,
            "timeout_s": self.timeout_s,
        }

    def tracker(self, paths: Sequence[ResolvedPath], enabled: bool = True) -> EditTracker:
        return EditTracker(self, paths, enabled)

    async def aclose(self) -> None:
        """Stop the worker processes (daemon shutdown, end of a test)."""
        await self.worker.aclose()
        await self.checkers.aclose()

    # ------------------------------------------------------------ collecting

    async def collect(
        self,
        paths: Sequence[ResolvedPath],
        checks: Sequence[str],
        *,
        reuse_types: bool = False,
        run_as: RunAs | None = None,
        worker_plan: dict[Path, list[str]] | None = None,
        ahead: Ahead | None = None,
        for_edit: bool = False,
    ) -> Results:
        """Every requested check over ``paths``; never raises (failures become skips).

        ``reuse_types``: a baseline may take the type findings remembered from
        the previous run over the same bytes, when no edit finished since (the
        usual case: edit N's result is edit N+1's baseline), saving one type
        checker run per edit.
        ``worker_plan``: filled with the worker checks asked of each file (an
        edit's after-check asks the same ones ahead of its write, :meth:`ahead`).
        ``ahead``: worker results already computed from the bytes this edit
        wrote; a file whose plan is unchanged takes them instead of a new request.
        ``for_edit``: an editing tool is waiting; type checks that timed out
        recently on the same files are skipped (see :data:`TYPES_BACKOFF_S`).
        """
        run_as = self.write_scope if run_as is None else run_as
        results: Results = {c: CheckResult(c) for c in checks}
        files = {p.real: p.display for p in paths}
        resolved = {p.real: p for p in paths}
        jobs: list[asyncio.Future[None]] = []
        try:
            if "types" in checks:  # the slowest: start it before the git bookkeeping
                jobs.append(
                    asyncio.ensure_future(
                        self._types_job(results["types"], resolved, reuse_types, run_as, for_edit)
                    )
                )
            repos, dirs = await asyncio.to_thread(_repos_of, list(files))
            entries = await self._tracked(results, files, repos) if "git-diff" in checks else {}
            tracked = set(entries)
            if "git-diff" in checks:
                jobs.extend(
                    asyncio.ensure_future(job)
                    for job in self._git_jobs(
                        results["git-diff"], files, repos, entries, dirs, resolved
                    )
                )
            worker_checks = [c for c in ("syntax", "whitespace") if c in checks]
            from_ahead: list[Path] = []
            for real, display in files.items() if worker_checks else ():
                wanted = [c for c in worker_checks if c == "syntax" or real not in tracked]
                if worker_plan is not None:
                    worker_plan[real] = wanted
                if not wanted:
                    continue
                if ahead is not None and ahead.checks_for(real) == wanted:
                    from_ahead.append(real)
                    continue
                jobs.append(
                    asyncio.ensure_future(
                        self._worker_job(results, real, display, wanted, resolved=resolved[real])
                    )
                )
            await asyncio.gather(*jobs)
            for real in from_ahead:
                assert ahead is not None
                _merge(results, await ahead.results(real))
                self.checked_ahead += 1
            if "syntax" in checks and "types" in checks:
                _drop_checker_parse_errors(results)
        except Exception as exc:
            for result in results.values():
                skip(result, _reason(exc), [])
        finally:
            for job in jobs:
                job.cancel()  # only unfinished ones (an unexpected error, or our cancellation)
        return results

    async def _tracked(
        self, results: Results, files: dict[Path, str], repos: dict[Path, Path | None]
    ) -> dict[Path, git_diff.IndexEntry]:
        """The index entries of the files git tracks (regular files at stage 0)."""
        tracked: dict[Path, git_diff.IndexEntry] = {}
        by_repo: dict[Path, list[Path]] = {}
        for real, repo in repos.items():
            if repo is not None:
                by_repo.setdefault(repo, []).append(real)
        for repo, members in by_repo.items():
            try:
                tracked.update(
                    await git_diff.index_entries(repo, members, self.timeout_s, self.read_scope)
                )
            except (CheckTimeout, CheckUnavailable) as exc:
                skip(results["git-diff"], _reason(exc), [files[m] for m in members])
        return tracked

    def _git_jobs(
        self,
        result: CheckResult,
        files: dict[Path, str],
        repos: dict[Path, Path | None],
        entries: dict[Path, git_diff.IndexEntry],
        dirs: set[Path],
        resolved: dict[Path, ResolvedPath],
    ) -> list[Awaitable[None]]:
        by_repo: dict[Path, dict[Path, str]] = {}
        for real, display in files.items():
            repo = repos.get(real)
            if repo is not None and real in entries:
                by_repo.setdefault(repo, {})[real] = display
            else:
                result.not_applicable.append(display)

        async def one(repo: Path, members: dict[Path, str]) -> None:
            async def body() -> None:
                result.findings.extend(
                    await self.git.run(
                        repo,
                        members,
                        entries,
                        self.timeout_s,
                        read=lambda real: self._read_worktree(resolved[real]),
                    )
                )
                result.ran = True

            await _guarded(result, list(members.values()), body)

        return [one(repo, members) for repo, members in by_repo.items()]

    def ahead(self, contents: dict[Path, tuple[str, bytes]], plan: dict[Path, list[str]]) -> Ahead:
        """Start the worker checks of bytes about to be written, so they overlap the write.

        ``contents`` maps a file to its display name and new bytes; ``plan`` is
        the baseline's worker plan (which checks each file was asked). Syntax and
        whitespace depend on the bytes alone, so checking them before they reach
        the disk answers exactly what checking the file afterwards would.
        """
        ahead = Ahead()
        for real, (display, data) in contents.items():
            wanted = plan.get(real)
            if not wanted or len(data) > AHEAD_MAX_BYTES:
                continue
            results: Results = {c: CheckResult(c) for c in wanted}
            job = self._worker_job(results, real, display, wanted, data)
            ahead.add(real, wanted, results, job)
        return ahead

    async def _worker_job(
        self,
        results: Results,
        real: Path,
        display: str,
        checks: list[str],
        content: bytes | None = None,
        *,
        resolved: ResolvedPath | None = None,
    ) -> None:
        """One file's worker checks, over ``content`` or the file's bytes read through the
        resolver (``resolved``): a path swapped for a link mid-call is refused there, so
        no check ever sees a byte from outside the roots."""

        async def body() -> None:
            answer: dict[str, Any]
            if content is None:
                assert resolved is not None
                unreadable, read, digest = await asyncio.to_thread(
                    _read_and_digest, self.roots, resolved
                )
            else:
                unreadable, read, digest = "ok", content, await asyncio.to_thread(_digest, content)
            if isinstance(read, bytes):
                key = (real, display, tuple(checks), digest)
                known = self._answers.get(key)
                if known is not None:  # edit N's after-check is edit N+1's baseline
                    self._answers.move_to_end(key)
                    answer = known
                else:
                    answer = await self.worker.request(
                        {"path": str(real), "display": display, "checks": checks},
                        self.timeout_s,
                        read,
                    )
                    if answer.get("state") == "ok":
                        self._answers[key] = answer
                        while len(self._answers) > _ANSWERS_KEPT:
                            self._answers.popitem(last=False)
            else:
                answer = {"state": unreadable, "detail": read}
            state = answer.get("state")
            for check in checks:
                result = results[check]
                if state in ("missing", "binary"):
                    result.not_applicable.append(display)
                    continue
                if state != "ok":
                    reason = "file too large" if state == "too_large" else str(answer.get("detail"))
                    skip(result, reason, [display])
                    continue
                part = answer.get("results", {}).get(check, {})
                if part.get("error"):
                    skip(result, str(part["error"]), [display])
                elif part.get("applicable"):
                    result.ran = True
                    result.findings.extend(
                        finding(**{k: v for k, v in item.items()})
                        for item in part.get("findings", [])
                    )
                else:
                    result.not_applicable.append(display)

        await _guarded_many(results, checks, [display], body)

    def _read_worktree(self, where: ResolvedPath) -> bytes | None:
        """A tracked file's bytes for the git check, through the resolver (blocking)."""
        _, data = _read_for_check(self.roots, where)
        if isinstance(data, bytes) and len(data) <= git_diff.MAX_FILE_BYTES:
            return data
        return None

    async def _types_job(
        self,
        result: CheckResult,
        resolved: dict[Path, ResolvedPath],
        reuse: bool,
        run_as: RunAs,
        for_edit: bool = False,
    ) -> None:
        generation = self.generation
        plan, digests = await asyncio.to_thread(
            _plan_and_digest, resolved, run_as, self.workspace, self.roots
        )
        result.not_applicable.extend(plan.not_applicable)
        for reason, displays in plan.unavailable.items():
            skip(result, reason, displays)

        async def one(group: types.TypeGroup) -> None:
            slow_key = (group.tool, group.cwd, frozenset(group.files), run_as.key)
            timed_out_at = self._timed_out.get(slow_key)
            if (
                for_edit
                and timed_out_at is not None
                and time.monotonic() - timed_out_at < TYPES_BACKOFF_S
            ):
                skip(
                    result,
                    "not run for this edit: the type check of these files timed out "
                    f"(over {self.timeout_s:g} s) recently; call diagnostics with checks "
                    '["types"] to run it again',
                    list(group.files.values()),
                )
                return
            remembered = [self._memo.get(real) for real in group.files] if reuse else []
            if remembered and all(
                m is not None
                and m.generation == generation
                and m.digest == digests.get(real)
                and m.identity == run_as.key
                for m, real in zip(remembered, group.files, strict=True)
            ):
                for m in remembered:
                    assert m is not None
                    result.findings.extend(m.findings)
                result.ran = True
                return

            async def body() -> None:
                self.type_checker_runs += 1
                try:
                    found = await types.run_group(group, self.timeout_s, self.checkers)
                except CheckTimeout:
                    self._timed_out[slow_key] = time.monotonic()
                    raise
                self._timed_out.pop(slow_key, None)
                result.findings.extend(found)
                result.ran = True
                if self.generation == generation:
                    self._remember(group, found, digests, generation, run_as)

            await _guarded(result, list(group.files.values()), body)

        await asyncio.gather(*(one(g) for g in plan.groups))

    def _remember(
        self,
        group: types.TypeGroup,
        found: list[Finding],
        digests: dict[Path, str],
        generation: int,
        run_as: RunAs,
    ) -> None:
        for real, display in group.files.items():
            digest = digests.get(real)
            if digest is None:
                continue
            mine = [f for f in found if f.diagnostic.path == display]
            self._memo[real] = _Remembered(digest, generation, mine, run_as.key)
            self._memo.move_to_end(real)
        while len(self._memo) > _MEMO_FILES:
            self._memo.popitem(last=False)


AHEAD_MAX_BYTES = 16 * 1024 * 1024
"""Larger files are checked from disk after the write (their bytes are not piped)."""


def _merge(into: Results, part: Results) -> None:
    for check, result in part.items():
        target = into[check]
        target.ran = target.ran or result.ran
        target.findings.extend(result.findings)
        target.not_applicable.extend(result.not_applicable)
        target.skipped.extend(result.skipped)
        target.skipped_paths.update(result.skipped_paths)


@dataclass(frozen=True)
class _Remembered:
    """The type findings of one file's bytes, valid while no edit has finished since."""

    digest: str
    generation: int
    findings: list[Finding]
    identity: tuple[bool, int | None]


WORKER_MAX_BYTES = 64 * 1024 * 1024
"""Files above this are not parsed (the worker would answer ``too_large`` anyway)."""


def _read_for_check(roots: Roots, resolved: ResolvedPath) -> tuple[str, bytes | str]:
    """``("ok", bytes)``, or the worker's state for a file it cannot check and why."""
    try:
        data, _ = read_file_bytes(roots, resolved, max_bytes=WORKER_MAX_BYTES)
    except NotFound:
        return "missing", ""
    except IsDirectory:
        return "missing", "a directory"
    except TooLarge:
        return "too_large", ""
    except AirlockError as exc:
        return "unreadable", exc.message
    except OSError as exc:
        return "unreadable", str(exc)
    return "ok", data


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _read_and_digest(roots: Roots, resolved: ResolvedPath) -> tuple[str, bytes | str, bytes]:
    state, data = _read_for_check(roots, resolved)
    return state, data, _digest(data) if isinstance(data, bytes) else b""


def _plan_and_digest(
    resolved: dict[Path, ResolvedPath], run_as: RunAs, workspace: Path, roots: Roots
) -> tuple[types.TypePlan, dict[Path, str]]:
    plan = types.plan_types({r: p.display for r, p in resolved.items()}, run_as, workspace)
    digests: dict[Path, str] = {}
    for group in plan.groups:
        for real in group.files:
            where = resolved.get(real)
            if where is None:  # not one of the files asked about: no digest, no reuse
                continue
            _, data = _read_for_check(roots, where)
            if isinstance(data, bytes):
                digests[real] = hashlib.sha256(data).hexdigest()
    return plan, digests


def _drop_checker_parse_errors(results: Results) -> None:
    """basedpyright repeats parse errors (rule-less findings); ``syntax`` already has them."""
    broken = {f.diagnostic.path for f in results["syntax"].findings}
    if broken:
        results["types"].findings = [
            f
            for f in results["types"].findings
            if not (f.diagnostic.path in broken and f.diagnostic.code == types.PYRIGHT_NO_RULE)
        ]


def _repos_of(files: list[Path]) -> tuple[dict[Path, Path | None], set[Path]]:
    """Each path's work tree, and which paths are directories (stat calls: a thread)."""
    return {f: find_work_tree(f) for f in files}, {f for f in files if f.is_dir()}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, CheckTimeout):
        return f"timeout: {exc}"
    if isinstance(exc, (CheckUnavailable, WorkerGone)):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        # A tree deeper than PATH_MAX: git and the type checkers take path strings.
        return (
            "a path is longer than the system's path limit, so this check could not run on "
            "it; check a file in a shallower folder"
        )
    return f"internal error: {exc!r}"


async def _guarded(
    result: CheckResult, displays: list[str], body: Callable[[], Awaitable[None]]
) -> None:
    try:
        await body()
    except Exception as exc:
        skip(result, _reason(exc), displays)


async def _guarded_many(
    results: Results, checks: list[str], displays: list[str], body: Callable[[], Awaitable[None]]
) -> None:
    try:
        await body()
    except Exception as exc:
        for check in checks:
            skip(results[check], _reason(exc), displays)
