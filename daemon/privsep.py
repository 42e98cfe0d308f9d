"""Start-up checks that make the ``--exec-user`` split real, and refuse layouts that defeat it.

What the agent runs (as the exec user) must not be able to read the token
file, nor write the state dir (apply_patch journals, which recovery acts on at
the next start) or the artifacts dir (exec spills the daemon hands back). So
airlockd creates those directories itself, owned by its own user (state 0700,
artifacts 0755), and refuses to start, with one line naming the path and the
fix, when an existing one is owned by someone else, is writable by the exec
user, or sits under any ancestor directory through which the exec user could
replace it (one they may write without sticky protection, or one they own);
the token file gets the same ancestor check. The
state dir may never lie inside a root (the workspace or an extra root): the
file tools themselves could then plant a journal.

Every refusal is a :class:`StartupRefused`; the CLI prints it and exits 2.
"""

from __future__ import annotations

import itertools
import logging
import os
import stat
from pathlib import Path

from .identity import ExecUser

log = logging.getLogger("airlockd")

STATE_MODE = 0o700
ARTIFACTS_MODE = 0o755
_CAP_SETGID = 6
_CAP_SETUID = 7


class StartupRefused(Exception):
    """A layout or identity airlockd will not run with; the message is one line."""


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def check_state_dir_outside_roots(state: Path, roots: list[Path]) -> None:
    real = state.resolve()
    for root in roots:
        real_root = root.resolve()
        if _inside(real, real_root):
            raise StartupRefused(
                f"--state-dir {state} is inside the root {root}: the file tools (and the agent) "
                "could plant patch journals there; put the state dir outside the workspace and "
                "every --extra-root"
            )


def _permits(st: os.stat_result, user: ExecUser, bits: tuple[int, int, int]) -> bool:
    """The owner, group or other bit of ``bits`` that applies to ``user`` (root: always)."""
    if user.uid == 0:
        return True
    owner, group, other = bits
    if st.st_uid == user.uid:
        return bool(st.st_mode & owner)
    if st.st_gid == user.gid or st.st_gid in user.groups:
        return bool(st.st_mode & group)
    return bool(st.st_mode & other)


def writable_by(st: os.stat_result, user: ExecUser) -> bool:
    """Whether ``user`` may write (create, rename, delete entries in) what ``st`` describes."""
    return _permits(st, user, (stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH))


def readable_by(st: os.stat_result, user: ExecUser) -> bool:
    return _permits(st, user, (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH))


def can_switch_user() -> bool:
    """Root, or the capabilities ``setuid``/``setgid``/``setgroups`` need (CAP_SETUID, CAP_SETGID)."""
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    caps = int(line.split()[1], 16)
                    return bool(caps >> _CAP_SETUID & 1 and caps >> _CAP_SETGID & 1)
    except (OSError, ValueError):
        pass
    return False


def check_exec_user(user: ExecUser) -> None:
    if user.uid == 0:
        raise StartupRefused(
            f"--exec-user {user.name} is root; agent commands must run as an unprivileged user"
        )
    if user.uid == os.geteuid():
        raise StartupRefused(
            f"--exec-user {user.name} is airlockd's own user, so nothing would be separated; "
            "name another user, or drop the flag"
        )
    if not can_switch_user():
        raise StartupRefused(
            f"--exec-user {user.name} needs airlockd to run as root (or with CAP_SETUID and "
            "CAP_SETGID) to start commands as that user"
        )


def _chain(path: Path) -> list[Path]:
    """``/``, then every prefix of ``path``, ending with ``path`` itself."""
    return [*reversed(path.parents), path]


def replaceable_through(path: Path, user: ExecUser) -> tuple[Path, str] | None:
    """An ancestor through which ``user`` could replace ``path``, and how; None if none.

    Both the path as given (a symlink on the way is itself an entry its parent
    holds) and its real path are walked. An ancestor lets the user replace the
    entry below it when the user may write it (unless it is sticky and neither
    it nor that entry is theirs, like ``/tmp``), or when the user owns it (an
    owner can always ``chmod`` it writable first).
    """
    chains = [_chain(Path(os.path.abspath(path)))]
    real = path.resolve()
    if real != chains[0][-1]:
        chains.append(_chain(real))
    for chain in chains:
        for parent, child in itertools.pairwise(chain):
            try:
                pst = os.stat(parent)
            except OSError:
                break  # nothing exists below a missing directory
            try:
                child_uid: int | None = os.lstat(child).st_uid
            except OSError:
                child_uid = None
            sticky = bool(pst.st_mode & stat.S_ISVTX)
            if writable_by(pst, user) and (
                not sticky or pst.st_uid == user.uid or child_uid == user.uid
            ):
                return parent, "is writable by"
            if pst.st_uid == user.uid:
                return parent, "is owned by"
    return None


def refuse_replaceable(path: Path, flag: str, user: ExecUser) -> None:
    found = replaceable_through(path, user)
    if found is not None:
        parent, how = found
        raise StartupRefused(
            f"{flag} {path}: its parent {parent} {how} --exec-user {user.name}, who could "
            "swap it for their own; use a path whose every parent only airlockd's user can "
            "write (root-owned, not writable by others, or sticky like /tmp)"
        )


def ensure_private_dir(path: Path, mode: int, flag: str, user: ExecUser | None) -> None:
    """Create ``path`` (owned by us, ``mode``) if missing; with an exec user, verify it is ours.

    Verified: a directory, owned by airlockd's user, not writable by the exec
    user, and no ancestor through which the exec user could replace it
    (:func:`replaceable_through`); the ancestors are checked before anything is
    created under them.
    """
    if user is not None:
        refuse_replaceable(path, flag, user)
    if not path.exists():
        path.mkdir(parents=True, mode=mode)
        os.chmod(path, mode)
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise StartupRefused(f"{flag} {path} is not a directory; point it at a directory")
    if user is None:
        return
    if st.st_uid != os.geteuid():
        raise StartupRefused(
            f"{flag} {path} is owned by uid {st.st_uid}, not airlockd's user (uid "
            f"{os.geteuid()}); chown it to airlockd's user or let airlockd create it"
        )
    if writable_by(st, user):
        raise StartupRefused(
            f"{flag} {path} is writable by --exec-user {user.name}; make it "
            f"chmod {mode:o} (owned by airlockd's user)"
        )
    refuse_replaceable(path, flag, user)


def check_token_file(token_file: Path, user: ExecUser) -> None:
    st = os.stat(token_file)
    if readable_by(st, user) or st.st_uid == user.uid:
        raise StartupRefused(
            f"--token-file {token_file} is readable by --exec-user {user.name}; make it "
            "chmod 600 and owned by airlockd's user"
        )
    refuse_replaceable(token_file, "--token-file", user)


def prepare(
    *,
    state: Path,
    artifacts: Path,
    roots: list[Path],
    token_file: Path | None,
    user: ExecUser | None,
) -> None:
    """Every start-up check, in the order that gives the most useful first refusal."""
    if user is not None:
        check_exec_user(user)
    check_state_dir_outside_roots(state, roots)
    ensure_private_dir(state, STATE_MODE, "--state-dir", user)
    ensure_private_dir(artifacts, ARTIFACTS_MODE, "--artifacts-dir", user)
    if user is not None and token_file is not None:
        check_token_file(token_file, user)
    if user is None:
        log.info(
            "no --exec-user: exec and every program it starts run as airlockd's own user "
            "(uid %d), which can read the token file and write the state dir",
            os.geteuid(),
        )
    else:
        log.info(
            "agent commands run as %s (uid %d, gid %d, groups %s)",
            user.name,
            user.uid,
            user.gid,
            ",".join(str(g) for g in user.groups),
        )
