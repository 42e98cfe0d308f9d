"""The engine launcher's own loop: runs as the exec user, starts programs on request.

Stdlib only, and never imported by the daemon: :mod:`daemon.procs.launcher`
reads this file (with the daemon's rights) and starts it as
``python -I -S -c <this source>`` under the exec user, so it needs nothing the
exec user cannot read but the interpreter itself. Fd 0 is its end of a
``SOCK_SEQPACKET`` socketpair with the daemon; nothing else can reach it (no
path), and the launcher makes itself non-dumpable so a process of the same
user can neither ptrace it nor open its descriptors through ``/proc``.

One request, one record: a JSON header and, as ``SCM_RIGHTS``, the child's
stdout, stderr and then the descriptors it must find at the numbers the
header names (``pass``). The child is started by ``subprocess`` (``vfork`` in
a process this small costs a fraction of a millisecond), changes to ``cwd``
itself, as the exec user, and leads its own process group (or session). The
answer is ``{"id", "pid"}`` (or ``{"id", "error"}``), and later
``{"exit": pid, "status": code}`` once the child is reaped. The launcher ends
when the daemon's end closes, and on the daemon's death (``PR_SET_PDEATHSIG``).
"""

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
HIGH_FD = 1000
MAX_FDS = 253  # SCM_MAX_FD


def harden() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the daemon died before the death signal was armed
        sys.exit(0)


def place(received: list[int], targets: list[int]) -> None:
    """Move ``received[i]`` to fd ``targets[i]`` without clobbering one another."""
    high = [fcntl_dup(fd) for fd in received]
    for fd in received:
        os.close(fd)
    for fd, target in zip(high, targets, strict=True):
        os.dup2(fd, target, inheritable=False)
        os.close(fd)


def fcntl_dup(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD)


def serve(conn: socket.socket) -> None:
    lock = threading.Lock()

    def send(message: dict[str, object]) -> None:
        data = json.dumps(message).encode()
        with lock, contextlib.suppress(OSError):
            conn.send(data)

    def reap(child: subprocess.Popen[bytes]) -> None:
        send({"exit": child.pid, "status": child.wait()})

    send({"ready": os.getpid()})
    while True:
        try:
            data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, MAX_FDS)
        except OSError:
            return
        if not data:
            return
        targets: list[int] = []
        req: object = None
        try:
            req = json.loads(data)
            assert isinstance(req, dict)
            targets = [int(n) for n in req.get("pass", [])]
            extra = 3 if req.get("cwd_fd") else 2
            if len(fds) != extra + len(targets) or any(n < 3 or n >= HIGH_FD for n in targets):
                raise ValueError("descriptors do not match the request")
            place(fds[extra:], targets)
            fds = fds[:extra]
            cwd = req.get("cwd")
            if extra == 3:  # a directory the daemon opened: the child enters it by descriptor
                cwd = f"/proc/self/fd/{fds[2]}"
            out, err = fds[0], fds[1]
            env = req.get("env")
            group = {"start_new_session": True} if req.get("session") else {"process_group": 0}
            child = subprocess.Popen(
                req["argv"],
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                pass_fds=targets,
                **group,
            )
        except Exception as exc:  # every failure is an answer, never the launcher's end
            send({"id": req.get("id") if isinstance(req, dict) else None, "error": str(exc)})
        else:
            send({"id": req["id"], "pid": child.pid})
            threading.Thread(target=reap, args=(child,), daemon=True).start()
        finally:
            for fd in [*fds, *targets]:
                with contextlib.suppress(OSError):
                    os.close(fd)


def main() -> None:
    harden()
    conn = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.close(devnull)
    serve(conn)


if __name__ == "__main__":
    main()
