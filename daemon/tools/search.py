"""``file_search``: ripgrep (or the grep fallback) made deterministic, bounded and honest.

Flow: resolve ``path`` through the shared resolver (a symlink out of the
workspace is ``path_escape`` before any engine runs), pick the engine resolved
at start-up, run it (``airlock.daemon.search.rg`` / ``.grep``) with the caps,
order and page the rows, and say in ``note`` what the caps or the ignore rules
may have hidden.
"""

from __future__ import annotations

import asyncio
import dataclasses
import stat
from pathlib import Path

from ..context import ToolContext
from ..errors import Internal, InvalidRequest
from ..paths import ResolvedPath, check_regular, lstat_existing
from ..protocol import FileSearchInput, FileSearchOutput
from ..search.engine import INSTALL_HINT, resolve_engine
from ..search.grep import search_grep
from ..search.ignore import has_rules, star_ignored_dirs, why_ignored
from ..search.leases import current_leases, leased_under
from ..search.leases import note as leases_note
from ..search.limits import has_regex_meta
from ..search.query import Query, file_filters
from ..search.recount import recount
from ..search.results import Page, order
from ..search.rg import search_rg
from ..search.verify import verify_rows
from .listing import printable


async def file_search(ctx: ToolContext, req: FileSearchInput) -> FileSearchOutput:
    target = ctx.resolve(req.path, intent="read", granted=req.granted_paths)
    is_dir = await asyncio.to_thread(_probe, ctx, target)
    engine = await resolve_engine(ctx)
    if engine is None:
        raise Internal(INSTALL_HINT, {"engine": None})
    query = Query(
        pattern=req.pattern,
        fixed=req.fixed_strings
        if req.fixed_strings is not None
        else not has_regex_meta(req.pattern),
        case_insensitive=req.case_insensitive,
        glob=req.glob or None,
        type=req.type or None,
        mode=req.output_mode,
        context=req.context if req.output_mode == "content" else 0,
        include_ignored=req.include_ignored,
    )
    root = target.root
    rel = target.relative.as_posix()
    rel = "" if rel == "." else rel
    leases = current_leases()
    leased = await asyncio.to_thread(leased_under, root, rel, leases) if leases else []
    if leased:
        query = dataclasses.replace(query, exclude=tuple(leased))
    user = ctx.config.exec_user
    if engine.engine == "grep":
        file_filters(query)  # an unknown type or a broken glob is refused before any walk
    loop = asyncio.get_running_loop()
    timeout_s = ctx.config.search_timeout_s
    deadline = loop.time() + timeout_s
    want = req.offset + req.limit + 1
    with ctx.roots.root_dir(root) as root_fd:
        # The engine starts in the root the resolver holds open (its /proc fd link names
        # that very directory, whatever was renamed meanwhile), and its rows are then
        # checked through the resolver: see airlock.daemon.search.verify. "self": the
        # child inherits the fd and changes directory before exec; the daemon's own
        # /proc entry is not the exec user's to enter.
        cwd = Path(f"/proc/self/fd/{root_fd}")
        if engine.engine == "rg":
            result = await search_rg(
                engine.path,
                query,
                cwd,
                rel,
                is_dir=is_dir,
                want=want,
                deadline=deadline,
                timeout_s=timeout_s,
                user=user,
            )
        else:
            result = await search_grep(
                engine,
                query,
                root,
                rel,
                deadline=deadline,
                timeout_s=timeout_s,
                root_fd=root_fd,
                user=user,
            )
    # Every row is answered from the bytes the resolver opens now, never from what the
    # engine's names pointed at while it walked (search.verify, search.recount).
    unopened = 0
    if req.output_mode == "content":
        checked = await asyncio.to_thread(verify_rows, ctx.roots, root, result.rows, content=True)
    else:
        recounted = await recount(
            engine,
            query,
            ctx.roots,
            root,
            result.rows,
            user=user,
            deadline=deadline,
            timeout_s=timeout_s,
        )
        checked, unopened = recounted.rows, recounted.skipped
    rows = checked if result.presorted else order(checked)
    stderr = result.stderr
    if result.failed:
        raise InvalidRequest(
            f"{engine.engine} refused the query: {stderr[:1000]}. Fix the pattern (rg uses Rust "
            "regex syntax), pass fixed_strings=true to search it literally, or check type/glob.",
            {"engine": engine.engine, "stderr": stderr[:2000]},
        )
    notes: list[str] = []
    if leased:
        notes.append(leases_note(leased))
    if unopened:
        notes.append(
            f"{unopened} file{'' if unopened == 1 else 's'} the engine reported could not be "
            "opened again to count (removed, replaced by a special file or a link, or under "
            f"a lease meanwhile) and {'is' if unopened == 1 else 'are'} left out; retry once "
            "the tree is stable."
        )
    if result.capped:
        notes.append(
            "The engine's output reached the 256 KiB cap and the search was stopped there, so "
            "later results were not read; narrow path, glob or pattern, or use "
            "output_mode='files_with_matches' or 'count'."
        )
    if result.died is not None:
        notes.append(
            f"The search engine stopped early (signal {result.died}), so results are "
            "incomplete. An ignore file that never ends (a .gitignore linked to /dev/zero, "
            "say) is the usual cause: pass include_ignored=true, which reads no ignore files."
        )
    if stderr:
        # The engine's own words are not quoted: it names paths it met while walking, and
        # a directory swapped for a symlink mid-walk would make those outside names.
        errors = len(stderr.splitlines())
        kinds = [k for k in _ERROR_KINDS if k.lower() in stderr.lower()]
        why = ", ".join(kinds) if kinds else "unreadable, vanished or changed while searched"
        notes.append(
            f"Some files could not be searched ({errors} engine error"
            f"{'' if errors == 1 else 's'}: {why}); results may be partial. Retry, or narrow "
            "path."
        )
    if not req.include_ignored:
        notes.extend(await asyncio.to_thread(_ignore_notes, ctx, root, rel, is_dir, not rows))

    def display(path: str) -> str:
        return printable(ctx.roots.display(root / path)) if path else target.display

    page = Page(
        mode=req.output_mode,
        engine=engine.engine,
        rows=rows,
        offset=req.offset,
        limit=req.limit,
        complete=result.complete,
        capped=result.capped,
        display=display,
        notes=notes,
    )
    return page.build()


# What an engine's complaint may be quoted as: fixed phrases only, never its paths.
_ERROR_KINDS = (
    "Permission denied",
    "No such file or directory",
    "Is a directory",
    "Input/output error",
    "Too many levels of symbolic links",
    "File name too long",
)


def _probe(ctx: ToolContext, target: ResolvedPath) -> bool:
    """Whether ``target`` is a directory (else a regular file); asked through the resolver's
    fds, so a FIFO, socket or device is refused before any engine could block on it."""
    st = lstat_existing(ctx.roots, target, "search its parent directory or '.'")
    if stat.S_ISDIR(st.st_mode):
        return True
    check_regular(st, target.display)
    return False


def _ignore_notes(ctx: ToolContext, root: Path, rel: str, is_dir: bool, empty: bool) -> list[str]:
    """Say when ignore rules may have hidden results, and how to include them."""
    with ctx.roots.root_dir(root) as root_fd:
        return _notes(root, rel, is_dir, empty, root_fd)


def _notes(root: Path, rel: str, is_dir: bool, empty: bool, root_fd: int) -> list[str]:
    notes: list[str] = []
    hidden = why_ignored(root, rel, root_fd)
    if hidden is not None:
        notes.append(
            f"{rel} lies in {hidden.path}, which {hidden.rule.source} ignores "
            f"({hidden.rule.line!r}); ignore rules inside it still apply, so files may be "
            "skipped; pass include_ignored=true to search everything there."
        )
    stars = star_ignored_dirs(root, rel, root_fd=root_fd) if is_dir else []
    if stars:
        listed = ", ".join(f"{s}/" for s in stars)
        notes.append(
            f"Skipped because their own .gitignore ignores everything ('*', as a virtualenv's "
            f"does): {listed}; pass include_ignored=true to search them."
        )
    if empty and not notes and has_rules(root, root_fd):
        notes.append(
            "No matches in files that .gitignore rules leave visible; pass include_ignored=true "
            "to search ignored files too."
        )
    return notes
