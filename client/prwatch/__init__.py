"""PR watch: pure primitives an orchestrator composes into its own workflow.

- :func:`snapshot` folds a PR's REST resources into a :class:`Snapshot`.
- :func:`initial_state` / :func:`advance` decide when to wake a model (once
  per meaningful change); :func:`frame_wake` says what changed and what to do.
- :func:`classify_status` / :func:`classify_error` decide retries.
- :func:`key`, :func:`register`, :func:`complete`, :func:`cancel`,
  :func:`delete` keep a JSON-serialisable registry of watches.
- :func:`watch` is a ready poll loop built on all of the above.

Only :mod:`~airlock.client.prwatch.reader` and :mod:`~airlock.client.prwatch.watch`
do I/O; everything else is a pure function of its arguments.
"""

from .frame import frame_wake
from .notify import (
    DEFAULT_STALL_POLLS,
    Wake,
    WakeKind,
    WatchState,
    advance,
    initial_state,
)
from .reader import GitHubReader, PRWatchError
from .registry import (
    active,
    cancel,
    complete,
    delete,
    get_state,
    key,
    parse_key,
    put_state,
    register,
    status,
)
from .retry import (
    RetryDecision,
    RetryPolicy,
    backoff,
    classify,
    classify_error,
    classify_status,
    server_delay,
)
from .snapshot import Check, Review, Snapshot, combine, snapshot
from .watch import watch

__all__ = [
    "DEFAULT_STALL_POLLS",
    "Check",
    "GitHubReader",
    "PRWatchError",
    "RetryDecision",
    "RetryPolicy",
    "Review",
    "Snapshot",
    "Wake",
    "WakeKind",
    "WatchState",
    "active",
    "advance",
    "backoff",
    "cancel",
    "classify",
    "classify_error",
    "classify_status",
    "combine",
    "complete",
    "delete",
    "frame_wake",
    "get_state",
    "initial_state",
    "key",
    "parse_key",
    "put_state",
    "register",
    "server_delay",
    "snapshot",
    "status",
    "watch",
]
