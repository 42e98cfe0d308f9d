"""git smart HTTP against a lease's ``git`` scope: which repository, fetch or push, which refs.

Paths: ``/{owner}/{repo}[.git]/info/refs?service=git-upload-pack|git-receive-pack``,
``/{owner}/{repo}[.git]/git-upload-pack`` and ``.../git-receive-pack``. Anything
else on a git host (dumb HTTP, LFS, archive URLs) is not a smart HTTP request
and is refused by the caller.

A push's request body starts with its command list (pkt-lines, then a flush):
``[shallow <oid>]* <old> <new> <ref>\\0<capabilities>`` and more
``<old> <new> <ref>`` lines. :class:`CommandList` reads that list from the
first bytes of the body, within a bound (64 KiB): push certificates
(``push-cert``) and push options (the ``push-options`` capability) are refused,
and each command is judged against ``push_refs`` and ``allow_delete`` before a
single byte goes upstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs

from .paths import glob_match

__all__ = [
    "COMMAND_LIST_BOUND",
    "CommandList",
    "GitRefused",
    "GitRequest",
    "RefUpdate",
    "classify",
    "judge_updates",
    "repo_allowed",
]

COMMAND_LIST_BOUND = 64 * 1024
_SERVICES = ("git-upload-pack", "git-receive-pack")


class GitRefused(ValueError):
    """Outside the scope, or not judgeable; the text says which."""


@dataclass(frozen=True)
class GitRequest:
    repo: str  # "owner/repo", as sent (".git" stripped)
    service: str  # git-upload-pack | git-receive-pack
    discovery: bool  # GET info/refs

    @property
    def push(self) -> bool:
        return self.service == "git-receive-pack"


def classify(method: str, path: str, query: str) -> GitRequest:
    """The smart HTTP request ``path`` (normalised) makes, or :class:`GitRefused`."""
    parts = path.split("/")[1:]
    method = method.upper()
    if len(parts) == 4 and parts[2:] == ["info", "refs"]:
        services = parse_qs(query, keep_blank_values=True).get("service", [])
        if method not in ("GET", "HEAD") or len(services) != 1 or services[0] not in _SERVICES:
            raise GitRefused(f"{method} {path} is not a smart HTTP ref discovery")
        return GitRequest(_repo(parts), services[0], True)
    if len(parts) == 3 and parts[2] in _SERVICES:
        if method != "POST":
            raise GitRefused(f"{method} {path} is not a smart HTTP request")
        return GitRequest(_repo(parts), parts[2], False)
    raise GitRefused(f"{method} {path} is not a git smart HTTP request")


def _repo(parts: list[str]) -> str:
    owner, name = parts[0], parts[1].removesuffix(".git")
    if not owner or not name:
        raise GitRefused("the git path names no repository")
    return f"{owner}/{name}"


def repo_allowed(repo: str, repos: Sequence[str]) -> bool:
    """Repositories compare case-insensitively (GitHub's are), ``.git`` ignored."""
    wanted = repo.lower()
    return any(r.lower().removesuffix(".git") == wanted for r in repos)


@dataclass(frozen=True)
class RefUpdate:
    old: str
    new: str
    ref: str

    @property
    def delete(self) -> bool:
        return set(self.new) == {"0"}


class CommandList:
    """Incremental reader of a push's command list (feed body bytes, then ask).

    :meth:`feed` returns the updates once the flush that ends the list has
    arrived, None while more bytes are needed, and raises :class:`GitRefused`
    for a malformed list, a push certificate, push options, or a list that
    does not end within ``bound`` bytes.
    """

    def __init__(self, bound: int = COMMAND_LIST_BOUND) -> None:
        self._buf = bytearray()
        self._bound = bound
        self._pos = 0
        self._updates: list[RefUpdate] = []
        self._first = True

    def feed(self, data: bytes, end: bool = False) -> list[RefUpdate] | None:
        self._buf += data
        while True:
            if len(self._buf) - self._pos < 4:
                break
            head = bytes(self._buf[self._pos : self._pos + 4])
            try:
                size = int(head, 16)
            except ValueError:
                raise GitRefused("the push body is not a pkt-line command list") from None
            if size == 0:  # flush: the list is complete
                return self._updates
            if size < 4:
                raise GitRefused("the push command list has an unexpected special packet")
            if self._pos + size > self._bound:
                raise GitRefused(f"the push command list does not end within {self._bound} bytes")
            if len(self._buf) - self._pos < size:
                break
            line = bytes(self._buf[self._pos + 4 : self._pos + size])
            self._pos += size
            self._line(line)
        if len(self._buf) >= self._bound:
            raise GitRefused(f"the push command list does not end within {self._bound} bytes")
        if end:
            raise GitRefused("the push body ended before its command list did")
        return None

    def _line(self, line: bytes) -> None:
        line = line.removesuffix(b"\n")
        if self._first and line.startswith(b"push-cert"):
            raise GitRefused("signed pushes (push certificates) are not allowed")
        if line.startswith(b"shallow "):
            return
        command, nul, caps = line.partition(b"\0")
        if self._first:
            self._first = False
            if nul and b"push-options" in caps.split(b" "):
                raise GitRefused("push options are not allowed")
        fields = command.split(b" ")
        if len(fields) != 3:
            raise GitRefused("the push command list has a malformed command")
        try:
            old, new, ref = (f.decode("ascii") for f in fields)
        except UnicodeDecodeError:
            raise GitRefused("the push command list names a non-ASCII ref") from None
        if not ref.startswith("refs/"):
            raise GitRefused(f"the push updates {ref!r}, which is not under refs/")
        self._updates.append(RefUpdate(old, new, ref))


def judge_updates(
    updates: Sequence[RefUpdate], push_refs: Sequence[str] | None, allow_delete: bool
) -> None:
    """Raise :class:`GitRefused` unless every update is allowed."""
    for update in updates:
        if update.delete and not allow_delete:
            raise GitRefused(f"deleting {update.ref} is not allowed")
        if push_refs is None:
            raise GitRefused(f"updating {update.ref} is not allowed (fetch only)")
        if not any(glob_match(pattern, update.ref) for pattern in push_refs):
            raise GitRefused(
                f"updating {update.ref} is not allowed (allowed: {', '.join(push_refs)})"
            )
