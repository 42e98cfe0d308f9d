"""Who agent programs run as: the ``--exec-user`` split.

airlockd holds things the agent must not touch (the token file, the journals
in the state dir, the artifacts dir). Everything the agent makes run (``exec``,
background processes, the programs diagnostics starts in write scope) runs as
a separate, unprivileged user so it cannot read or forge them. One object
describes that user; every spawner asks it for the ``subprocess`` keyword
arguments, so no spawner can forget the groups or pick the daemon's own.
"""

from __future__ import annotations

import grp
import os
import pwd
from dataclasses import dataclass
from typing import Any


class ExecUserError(ValueError):
    """``--exec-user`` names a user or group this machine does not have."""


@dataclass(frozen=True)
class ExecUser:
    """A resolved user (and primary group, and supplementary groups) to run agent programs as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    @classmethod
    def parse(cls, spec: str) -> ExecUser:
        """``USER[:GROUP]``, by name or number; the groups are USER's own, never the daemon's."""
        user_part, _, group_part = spec.partition(":")
        if not user_part:
            raise ExecUserError(f"--exec-user {spec!r}: give USER or USER:GROUP")
        try:
            entry = pwd.getpwuid(int(user_part)) if user_part.isdigit() else pwd.getpwnam(user_part)
        except (KeyError, OverflowError):
            raise ExecUserError(
                f"--exec-user {spec!r}: no user {user_part!r} on this machine; create it "
                "(useradd) or name an existing one"
            ) from None
        gid = entry.pw_gid
        if group_part:
            try:
                gid = (
                    grp.getgrgid(int(group_part)).gr_gid
                    if group_part.isdigit()
                    else grp.getgrnam(group_part).gr_gid
                )
            except (KeyError, OverflowError):
                raise ExecUserError(
                    f"--exec-user {spec!r}: no group {group_part!r} on this machine"
                ) from None
        groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, gid))))
        return cls(name=entry.pw_name, uid=entry.pw_uid, gid=gid, groups=groups, home=entry.pw_dir)

    @property
    def is_current(self) -> bool:
        """True when the daemon already runs as this user (nothing to switch)."""
        return os.geteuid() == self.uid and os.getegid() == self.gid

    def spawn_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``subprocess.Popen``/``asyncio.create_subprocess_exec``.

        Empty when the daemon already is this user; otherwise user, group and
        the user's supplementary groups (``extra_groups``), so the child never
        keeps the daemon's groups.
        """
        if self.is_current:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def env(self) -> dict[str, str]:
        """The identity variables a login would set, so tools see the right HOME."""
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}


def spawn_kwargs(user: ExecUser | None) -> dict[str, Any]:
    """``user.spawn_kwargs()``, or nothing when there is no exec user (commands run as the daemon)."""
    return {} if user is None else user.spawn_kwargs()
