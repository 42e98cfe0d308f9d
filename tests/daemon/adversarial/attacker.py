"""A hostile process inside the sandbox: swaps a directory for a symlink, in a loop.

Run as its own process (``python -m tests.daemon.adversarial.attacker swap A B``):
it calls ``renameat2(A, B, RENAME_EXCHANGE)`` as fast as it can, so ``A`` is a
real directory one moment and (when ``B`` is a symlink to somewhere outside)
a symlink the next, atomically, exactly what an agent would do to race a
check-then-open. It stops on SIGTERM and prints how many swaps it made.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import sys

RENAME_EXCHANGE = 2
AT_FDCWD = -100
_SYSCALL_RENAMEAT2 = {"x86_64": 316, "aarch64": 276}

_libc = ctypes.CDLL(None, use_errno=True)


def renameat2_exchange(a: bytes, b: bytes) -> None:
    """``renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)`` through the raw syscall."""
    number = _SYSCALL_RENAMEAT2[platform.machine()]
    res = _libc.syscall(
        ctypes.c_long(number),
        ctypes.c_int(AT_FDCWD),
        ctypes.c_char_p(a),
        ctypes.c_int(AT_FDCWD),
        ctypes.c_char_p(b),
        ctypes.c_uint(RENAME_EXCHANGE),
    )
    if res != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def swap_forever(a: str, b: str) -> int:
    stop = False

    def _stop(_signum: int, _frame: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _stop)
    ra, rb = os.fsencode(a), os.fsencode(b)
    swaps = 0
    while not stop:
        renameat2_exchange(ra, rb)
        swaps += 1
    # Leave the tree as it started (an even number of exchanges).
    if swaps % 2:
        renameat2_exchange(ra, rb)
        swaps += 1
    return swaps


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] != "swap":
        print("usage: attacker swap A B", file=sys.stderr)
        return 2
    print("ready", flush=True)
    swaps = swap_forever(argv[1], argv[2])
    print(f"swaps={swaps}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
