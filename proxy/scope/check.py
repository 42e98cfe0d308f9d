"""A rule's ``allow`` against one request: decided on the head, or by a body gate.

:func:`check_head` answers :data:`ALLOWED`, a :class:`Refusal` (the message
names what was refused), or a :class:`BodyGate` when the decision needs the
first bytes of the body (a GraphQL request, a git push's command list). The
caller holds the body back, feeds the gate, and only sends anything upstream
once the gate says yes; nothing is swapped before either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..protocol import Allow, GitAllow, GraphQLAllow
from . import git as gitscope
from .graphql import MAX_BODY, GraphQLRefused, check_body
from .paths import AmbiguousPath, glob_match, normalize_path

__all__ = [
    "ALLOWED",
    "BodyGate",
    "GitPushGate",
    "GraphQLGate",
    "Refusal",
    "check_head",
    "is_graphql_path",
]

GRAPHQL_PATHS = frozenset({"/graphql", "/api/graphql"})


@dataclass(frozen=True)
class Refusal:
    message: str


class _Allowed:
    def __repr__(self) -> str:
        return "ALLOWED"


ALLOWED: Final = _Allowed()


class BodyGate:
    """Decides on the first ``bound`` bytes of a body: fed until it decides.

    :meth:`feed` returns None while it needs more, :data:`ALLOWED` or a
    :class:`Refusal`. ``end`` marks the end of the body.
    """

    bound: int = 0

    def feed(self, data: bytes, end: bool) -> _Allowed | Refusal | None:
        raise NotImplementedError


class GraphQLGate(BodyGate):
    bound = MAX_BODY

    def __init__(self, host: str, allow: GraphQLAllow) -> None:
        self._host = host
        self._allow = allow
        self._buf = bytearray()

    def feed(self, data: bytes, end: bool) -> _Allowed | Refusal | None:
        self._buf += data
        if len(self._buf) > MAX_BODY:
            return Refusal(f"{self._host}: the GraphQL body is over {MAX_BODY} bytes")
        if not end:
            return None
        try:
            check_body(bytes(self._buf), self._allow.operations, self._allow.names)
        except GraphQLRefused as exc:
            return Refusal(f"{self._host}: {exc}")
        return ALLOWED


class GitPushGate(BodyGate):
    bound = gitscope.COMMAND_LIST_BOUND

    def __init__(self, host: str, repo: str, allow: GitAllow) -> None:
        self._host = host
        self._repo = repo
        self._allow = allow
        self._list = gitscope.CommandList(self.bound)

    def feed(self, data: bytes, end: bool) -> _Allowed | Refusal | None:
        try:
            updates = self._list.feed(data, end)
            if updates is None:
                return None
            gitscope.judge_updates(updates, self._allow.push_refs, self._allow.allow_delete)
        except gitscope.GitRefused as exc:
            return Refusal(f"{self._host}: push to {self._repo}: {exc}")
        return ALLOWED


def is_graphql_path(path: str) -> bool:
    return path in GRAPHQL_PATHS


def check_head(
    allow: Allow, host: str, method: str, target: str, *, content_encoding: str = ""
) -> _Allowed | Refusal | BodyGate:
    """Judge a request head (``target`` as sent: path and query) against ``allow``."""
    method = method.upper()
    try:
        path = normalize_path(target)
    except AmbiguousPath as exc:
        return Refusal(f"{host}: {method} refused: {exc}")
    query = target.split("?", 1)[1] if "?" in target else ""
    where = f"{host}: {method} {path}"
    if allow.git is not None:
        try:
            request = gitscope.classify(method, path, query)
        except gitscope.GitRefused as exc:
            return Refusal(f"{host}: {exc}")
        if not gitscope.repo_allowed(request.repo, allow.git.repos):
            return Refusal(f"{host}: git access to {request.repo} is not allowed")
        if request.push and allow.git.push_refs is None:
            return Refusal(f"{host}: pushing to {request.repo} is not allowed (fetch only)")
    elif allow.graphql is not None and is_graphql_path(path):
        if method != "POST":
            return Refusal(f"{where}: GraphQL requests must be POST")
        if content_encoding.lower() not in ("", "identity"):
            return Refusal(f"{where}: a GraphQL body must not be content-encoded")
        return GraphQLGate(host, allow.graphql)
    if allow.methods is not None and method not in allow.methods:
        return Refusal(f"{where}: method {method} is not allowed")
    if allow.paths is not None and not any(glob_match(p, path) for p in allow.paths):
        return Refusal(f"{where}: path is not allowed")
    if allow.git is not None and request.push and not request.discovery:
        if content_encoding.lower() not in ("", "identity"):
            return Refusal(f"{host}: a push body must not be content-encoded")
        return GitPushGate(host, request.repo, allow.git)
    return ALLOWED
