"""One way to start an agent command: working dir, environment, user, and errors a model can act on.

``exec``, ``/v1/exec/stream`` and ``process_start`` all come through here, so
they resolve ``cwd`` the same way (a read-intent path inside a root), build the
same environment (the daemon's, the exec user's identity, the caller's
``env``, then the tree marker, which the caller cannot override), run as the
same user, start a new session (own process group), and refuse bad input
with the same envelopes.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import InvalidRequest, NotFound
from ..identity import ExecUser, spawn_kwargs
from ..paths import Intent, ResolvedPath, Roots
from ..tracing import trace_env
from .contain import Cell
from .cwd import check_cwd, opened_cwd, then
from .pty import PtyPair, take_terminal
from .tree import MARKER_VAR


class UserConfig(Protocol):
    """The one setting a spawn reads from the daemon's configuration."""

    @property
    def exec_user(self) -> ExecUser | None: ...


class SpawnSite(Protocol):
    """What starting a command needs from the daemon: the roots and who runs it.

    :class:`~airlock.daemon.context.ToolContext` satisfies it; naming the needs here
    keeps ``procs`` below ``context`` (the context owns a process table, the table
    spawns), so the import graph has no circle.
    """

    @property
    def roots(self) -> Roots: ...

    @property
    def config(self) -> UserConfig: ...

    def resolve(
        self, raw: str, *, intent: Intent = ..., granted: Sequence[str] = ...
    ) -> ResolvedPath: ...


@dataclass(frozen=True)
class SpawnPlan:
    argv: list[str]
    cwd: Path
    env: dict[str, str]
    tree_id: str
    # The resolved cwd: the child enters it from a descriptor (airlock.daemon.procs.cwd).
    where: ResolvedPath


def check_env(env: Mapping[str, str]) -> None:
    """Refuse environment entries no ``execve`` can carry, naming the bad one."""
    for name, value in env.items():
        if not name or "=" in name or "\0" in name:
            raise InvalidRequest(
                f"environment variable name {name!r} is not valid: names must be non-empty "
                "and contain no '=' or NUL",
                {"name": name},
            )
        if "\0" in value:
            raise InvalidRequest(
                f"the value of environment variable {name!r} contains a NUL byte; remove it",
                {"name": name},
            )


def plan_spawn(
    ctx: SpawnSite,
    argv: Sequence[str],
    cwd: str,
    env: Mapping[str, str],
    granted: Sequence[str],
    tree_id: str,
) -> SpawnPlan:
    """Validate and resolve everything before anything starts."""
    if any("\0" in arg for arg in argv):
        raise InvalidRequest("argv contains a NUL byte; remove it", {})
    check_env(env)
    where = ctx.resolve(cwd, intent="read", granted=granted)
    check_cwd(ctx.roots, where)
    user = ctx.config.exec_user
    full_env = {**os.environ, **(user.env() if user is not None else {}), **trace_env(), **env}
    full_env[MARKER_VAR] = tree_id
    return SpawnPlan(argv=list(argv), cwd=where.real, env=full_env, tree_id=tree_id, where=where)


async def spawn(
    ctx: SpawnSite,
    plan: SpawnPlan,
    *,
    stdin: bool,
    cell: Cell | None = None,
    tty: PtyPair | None = None,
) -> asyncio.subprocess.Process:
    """Start the plan in its own session with piped output; map OS errors to envelopes.

    ``cell`` (:mod:`.contain`) adds the step that places the child in its cgroup, raises
    its OOM score and limits its processes before the program runs. With ``tty`` the
    slave end is stdin, stdout and stderr and becomes the controlling terminal of the
    new session (see :mod:`.pty`); that step runs after the cell's.
    """
    user_kwargs = spawn_kwargs(ctx.config.exec_user)
    if cell is not None:
        user_kwargs = cell.popen_kwargs(user_kwargs)
    if tty is not None:
        user_kwargs["preexec_fn"] = then(user_kwargs.get("preexec_fn"), take_terminal)
    stdin_: int = asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL
    stdout_: int = asyncio.subprocess.PIPE
    stderr_: int = asyncio.subprocess.PIPE
    if tty is not None:
        stdin_ = stdout_ = stderr_ = tty.slave
    try:
        # No cwd=: the child enters the directory the resolver opened, after the user
        # switch and the steps above, and checks where it landed (procs/cwd.py).
        with opened_cwd(ctx.roots, plan.where) as enter:
            return await asyncio.create_subprocess_exec(
                *plan.argv,
                env=plan.env,
                stdin=stdin_,
                stdout=stdout_,
                stderr=stderr_,
                start_new_session=True,
                **enter.popen_kwargs(user_kwargs),
            )
    except FileNotFoundError:
        raise NotFound(
            f"program {plan.argv[0]!r} was not found; give its full path or check that it is "
            "installed (exec runs argv directly, without a shell)",
            {"argv0": plan.argv[0]},
        ) from None
    except PermissionError as exc:
        if exc.filename is not None and Path(exc.filename) == plan.cwd:
            raise InvalidRequest(
                f"the command's user cannot enter the working directory {plan.cwd}; give it "
                "access (chmod) or choose another cwd",
                {"cwd": str(plan.cwd)},
            ) from None
        raise InvalidRequest(
            f"program {plan.argv[0]!r} is not executable (or its user may not run it)",
            {"argv0": plan.argv[0]},
        ) from None
    except subprocess.SubprocessError:
        # The only code run in the child before exec is EnterDir: fchdir as the command's
        # user, then the landing check.
        raise InvalidRequest(
            f"the command's user cannot enter the working directory {plan.where.display} (or "
            "it changed while the command started); give it access (chmod) or choose another "
            "cwd",
            {"cwd": plan.where.display},
        ) from None
    except (OSError, ValueError) as exc:
        raise InvalidRequest(
            f"program {plan.argv[0]!r} could not be started: {exc}", {"argv0": plan.argv[0]}
        ) from None
    finally:
        if cell is not None:
            cell.spawned()
