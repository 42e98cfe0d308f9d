"""One compiled pass over a body for every form of a token (Hyperscan).

The scrubber's matcher (:class:`airlock.proxy.scrubber.Forms`) looks for the
*minimal* forms of the swapped tokens with line breaks allowed anywhere
inside (wrapped base64). In CPython that costs a copy of the buffer without
its line breaks plus one substring search per form, about 0.7 ms of CPU per
MiB, and every streamed byte is searched twice (the stream scrubber, then the
guard below the hooks): the largest single cost of a download through the
proxy (``bench_proxy --download-only``, profiled in ``docs/performance.md``).

Hyperscan (Intel's SIMD regex engine, built for intrusion detection: hostile
input is its normal case) compiles every minimal form into one database, each
as ``b0 [\\r\\n]* b1 [\\r\\n]* ... bn``, exactly "occurs once line breaks are
taken out", and scans a buffer once, in place, at about 0.3 ms per MiB.

- **Same answers.** :class:`Scanner` only replaces the search; spans are
  still worked out by the Python code, on windows around the ends Hyperscan
  reports. A property test holds both paths to the same answers, line
  breaks and boundaries included.
- **Never on the event loop.** Compiling takes about 7 ms per form, so a new
  token set compiles on one worker thread (Hyperscan releases the GIL) and
  the Python path answers until it is ready: :func:`scanner_for` never waits.
  Databases are cached per form set (least recently used, bounded).
- **Optional.** Where the ``hyperscan`` wheel cannot load (another CPU), the
  proxy logs it once and the Python path answers everything.
"""

from __future__ import annotations

import collections
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

log = logging.getLogger("airlock.proxy.form_scan")

_hs: Any
try:
    import hyperscan as _hs
except ImportError as exc:  # the wheel is a dependency; another CPU may lack one
    _hs = None
    log.warning("hyperscan unavailable (%s): token forms are matched in Python", exc)

# Form sets kept compiled: about 136 KiB each with its scratch space, so at most ~35 MiB.
CACHE_SIZE = 256

Needles = tuple[bytes, ...]


def _pattern(needle: bytes) -> bytes:
    # Every byte as \xNN (nothing in a token can be a regex metacharacter then),
    # any run of CR and LF allowed between two of them: what ``_flat`` removes.
    return b"[\\r\\n]*".join(b"\\x%02x" % byte for byte in needle)


class Scanner:
    """A compiled form set: whether, and where, its forms occur in a buffer.

    Hyperscan's scratch space may serve one scan at a time, so each thread
    that scans gets its own (the proxy scans on its event loop only).
    """

    def __init__(self, needles: Needles) -> None:
        assert _hs is not None
        self.needles = needles
        patterns = [_pattern(n) for n in needles]
        self._db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
        self._db.compile(
            expressions=patterns, ids=list(range(len(patterns))), elements=len(patterns)
        )
        self._local = threading.local()

    def _scratch(self) -> Any:
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            assert _hs is not None
            scratch = self._local.scratch = _hs.Scratch(self._db)
        return scratch

    def found(self, data: bytes) -> bool:
        """Whether any form occurs in ``data`` (line breaks inside allowed)."""
        scratch = self._scratch()
        assert _hs is not None
        try:
            self._db.scan(data, match_event_handler=_stop, scratch=scratch)
        except _hs.ScanTerminated:
            return True
        return False

    def ends(self, data: bytes) -> list[int]:
        """Where occurrences of the forms end (offsets past their last byte, in order)."""
        scratch = self._scratch()
        ends: list[int] = []

        def on_match(_id: int, _start: int, end: int, _flags: int, _context: Any) -> None:
            ends.append(end)

        self._db.scan(data, match_event_handler=on_match, scratch=scratch)
        ends.sort()  # several forms' matches need not come in order
        return ends


def _stop(*_match: Any) -> bool:
    return True  # the first match answers: stop the scan


class _Compiler:
    """Compiled scanners per form set, made on one worker thread, least recently used out."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        # The worker adds, the event loop reads; reentrant, as a future that is already done
        # runs its callback inside add_done_callback.
        self._lock = threading.RLock()
        self._settled = threading.Condition(self._lock)  # a compile's outcome was recorded
        self._pending: dict[Needles, Future[Scanner]] = {}
        self._ready: collections.OrderedDict[Needles, Scanner] = collections.OrderedDict()
        self._pool: ThreadPoolExecutor | None = None
        self._failed: set[Needles] = set()  # never compiled again: matched in Python

    def get(self, needles: Needles) -> Scanner | None:
        """The scanner for ``needles`` if compiled; otherwise start compiling it, None now."""
        with self._lock:
            scanner = self._ready.get(needles)
            if scanner is not None:
                self._ready.move_to_end(needles)
                return scanner
            if needles not in self._pending and needles not in self._failed:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(1, thread_name_prefix="airlock-forms")
                future = self._pool.submit(Scanner, needles)
                self._pending[needles] = future
                future.add_done_callback(lambda done: self._done(needles, done))
        return None

    def _done(self, needles: Needles, future: Future[Scanner]) -> None:
        error = future.exception()
        if error is not None:
            # Never fatal: the Python path keeps answering for this set.
            log.warning("compiling a token form set failed (%s); matching it in Python", error)
        with self._lock:
            if error is None:
                self._keep(needles, future.result())
            elif len(self._failed) < self._size:
                self._failed.add(needles)
            # Last: a set leaves the pending ones only once its outcome is in place.
            self._pending.pop(needles, None)
            self._settled.notify_all()

    def _keep(self, needles: Needles, scanner: Scanner) -> None:
        self._ready[needles] = scanner
        while len(self._ready) > self._size:
            self._ready.popitem(last=False)

    def now(self, needles: Needles) -> Scanner:
        """The scanner for ``needles``, compiled in this thread if it is not yet (tests)."""
        with self._lock:
            scanner = self._ready.get(needles)
            if scanner is None:
                scanner = Scanner(needles)
                self._keep(needles, scanner)
            return scanner

    def counts(self) -> tuple[int, int]:
        """Form sets held compiled, and form sets that failed to compile."""
        with self._lock:
            return len(self._ready), len(self._failed)

    def wait(self) -> None:
        """Block until every compile started so far has finished and its outcome is
        recorded (tests). A future is done before its callback has run, so wait for
        the callbacks, not the futures."""
        with self._settled:
            self._settled.wait_for(lambda: not self._pending)


_compiler = _Compiler()


def scanner_for(needles: Needles) -> Scanner | None:
    """A compiled scanner for ``needles``, or None while it compiles (or without Hyperscan)."""
    if _hs is None or not needles:
        return None
    return _compiler.get(needles)


def scanner_now(needles: Needles) -> Scanner:
    """The scanner for ``needles``, compiled at once if need be (tests hold the compiled
    path to the Python one with it)."""
    return _compiler.now(needles)


def wait_for_compiles() -> None:
    """Wait for the compiles in flight (tests)."""
    _compiler.wait()


def compiled_sets() -> int:
    """Form sets held compiled now (``/metrics``: ``airlock_proxy_token_form_sets``)."""
    return _compiler.counts()[0]


def failed_sets() -> int:
    """Form sets that failed to compile and are matched in Python."""
    return _compiler.counts()[1]
