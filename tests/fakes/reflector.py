"""A hostile upstream: reflects the swapped header everywhere a client can read.

It plays a leased host (the proxy reaches it through ``--resolve``) over TLS
on 127.0.0.1, speaking HTTP/1.1 or HTTP/2 as ALPN decides, written on raw
sockets (HTTP/1) and the ``h2`` state machine (HTTP/2) so that framing, chunk
boundaries, reason phrases, trailers and broken responses are exactly what a
test asks for. The reflected value is the request's ``Authorization`` header
(what the proxy swapped in). Routes, by path (query parameters in brackets):

- ``/body`` [``size``, ``framing=cl|chunked|close``, ``enc=identity|gzip``,
  ``chunk``]: a body of ``size`` bytes carrying the value every ~1 KiB, at the
  middle, and across every chunk boundary (each chunk is sent on its own);
- ``/corrupt``: a gzip body that turns into the value in clear halfway;
- ``/header``: the value in a header value and in a header name;
- ``/reason``: the value in the HTTP/1 reason phrase;
- ``/trailers`` [``size``]: a chunked (HTTP/1) or HTTP/2 body with the value
  in a trailer;
- ``/malformed`` and ``/malformed-status``: a response head mitmproxy cannot
  parse, quoting the value (HTTP/2: an invalid header name carrying it);
- ``/upgrade``: ``101`` to a non-WebSocket protocol, then raw bytes with the value;
- ``/ws``: a WebSocket that sends the value in a text message, split across
  the fragments of a binary message, in a ping, in a pong, and as close reason;
- ``/early``: ``103 Early Hints`` (the value in a Link header), then a ``200``;
- ``/te`` [``te=gzip,chunked|gzip``] (HTTP/1.1): the value, gzipped as a
  *transfer* coding (chunked on top, or close-delimited);
- ``/wrapped`` [``cols``, ``nl=crlf|lf``]: base64 of text carrying the value at
  each of the three byte alignments, wrapped at ``cols`` columns;
- ``/bomb`` [``enc=gzip|br|zstd``, ``mib``]: ``mib`` MiB of zeros, compressed
  (a compression bomb; see :func:`bomb`);
- ``/huge`` [``size``]: ``size`` bytes of filler, streamed as fast as the
  proxy takes them (:attr:`Reflector.sent` counts what went out);
- ``/nobody`` [``status``, ``size``] (HTTP/2): a ``204`` or ``304`` head, then
  DATA frames carrying the value anyway.

Every request is recorded in :attr:`Reflector.requests`; it runs in its own
thread and event loop so blocking clients can be used from tests.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import gzip
import random
import ssl
import threading
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import brotli  # type: ignore[import-untyped]
import h2.config
import h2.connection
import h2.events
import wsproto
import wsproto.events
import zstandard

from tests.fakes.loop_thread import ThreadedServer
from tests.fakes.tls import TestCA

FILLER = b"." * 1013


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: list[tuple[str, str]]
    http2: bool

    def all(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k.lower() == name.lower()]

    @property
    def auth(self) -> str:
        values = self.all("authorization")
        return values[0] if values else ""

    @property
    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}

    @property
    def route(self) -> str:
        return urlsplit(self.path).path


def body_chunks(value: bytes, size: int, chunk: int) -> list[bytes]:
    """``size`` (random) bytes carrying whole copies of ``value`` every ~1 KiB, at the
    middle and across (nearly) every ``chunk`` boundary, cut into ``chunk``-byte
    pieces. Copies never overlap, so every copy is the complete value."""
    n = len(value)
    wanted = set(range(len(FILLER), size - n, len(FILLER) + n)) | {size // 2}
    if n > 1:
        for i, boundary in enumerate(range(chunk, size - n, chunk)):
            wanted.add(boundary - 1 - (i % (n - 1)))
    # Incompressible filler: a gzip body is as large as the plain one.
    body = bytearray(random.Random(size).randbytes(size))
    end = 0
    for start in sorted(wanted):
        if start >= end and start + n <= size:
            body[start : start + n] = value
            end = start + n
    data = bytes(body)
    return [data[i : i + chunk] for i in range(0, len(data), chunk)]


@functools.cache
def bomb(enc: str, mib: int) -> bytes:
    """``mib`` MiB of zeros in ``enc``, compressed a MiB at a time (never held whole)."""
    block = b"\0" * (1 << 20)
    if enc == "gzip":
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(z.compress(block) for _ in range(mib)) + z.flush()
    if enc == "br":
        c = brotli.Compressor(quality=5)
        packed: bytes = b"".join(c.process(block) for _ in range(mib)) + c.finish()
        return packed
    if enc == "zstd":
        zc = zstandard.ZstdCompressor(level=3).compressobj()
        return b"".join(zc.compress(block) for _ in range(mib)) + zc.flush()
    raise ValueError(enc)


def wrapped_b64(value: bytes, cols: int, nl: bytes) -> bytes:
    """Base64 of text with ``value`` at each byte alignment, wrapped at ``cols``."""
    text = b"".join(b"-" * k + b" " + value + b" " for k in range(3)) * 2
    encoded = base64.b64encode(text)
    return nl.join(encoded[i : i + cols] for i in range(0, len(encoded), cols)) + nl


HUGE_BLOCK = random.Random(7).randbytes(1 << 20)


@dataclass
class Reflector(ThreadedServer):
    server_name = "reflector"

    ssl_context: ssl.SSLContext
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    # route -> body bytes handed to the transport so far (``/huge``)
    sent: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: asyncio.Server | None = None

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def last(self, route: str | None = None) -> Request:
        with self._lock:
            found = [r for r in self.requests if route is None or r.route == route]
            return found[-1]

    def seen(self, route: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.route == route]

    # --- HTTP/1.1 ------------------------------------------------------------

    async def _h1(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = [
                (k.strip(), v.strip()) for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)
            ]
            request = Request(method, path, headers, http2=False)
            length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
            if length:
                await reader.readexactly(length)
            self.record(request)
            keep = await self._h1_respond(request, reader, writer)
            await writer.drain()
            if not keep:
                writer.close()
                return

    async def _h1_respond(
        self, req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        value = req.auth.encode()
        q = req.query
        route = req.route
        if route == "/body":
            size = int(q.get("size", "100000"))
            chunk = int(q.get("chunk", "4096"))
            framing = q.get("framing", "chunked")
            chunks = body_chunks(value, size, chunk)
            head = [b"HTTP/1.1 200 OK", b"Content-Type: application/octet-stream"]
            if q.get("enc") == "gzip":
                packed = gzip.compress(b"".join(chunks), compresslevel=1)
                chunks = [packed[i : i + chunk] for i in range(0, len(packed), chunk)]
                head.append(b"Content-Encoding: gzip")
            if framing == "cl":
                head.append(b"Content-Length: %d" % sum(map(len, chunks)))
            elif framing == "chunked":
                head.append(b"Transfer-Encoding: chunked")
            else:
                head.append(b"Connection: close")
            writer.write(b"\r\n".join(head) + b"\r\n\r\n")
            for piece in chunks:
                writer.write(
                    b"%x\r\n%s\r\n" % (len(piece), piece) if framing == "chunked" else piece
                )
                await writer.drain()
            if framing == "chunked":
                writer.write(b"0\r\n\r\n")
            return framing != "close"
        if route == "/te":
            te = q.get("te", "gzip, chunked")
            packed = gzip.compress(b"te " + value * 50)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: %s\r\n\r\n" % te.encode())
            if "chunked" in te:
                half = len(packed) // 2
                for piece in (packed[:half], packed[half:]):
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                writer.write(b"0\r\n\r\n")
                return True
            writer.write(packed)
            return False
        if route == "/wrapped":
            nl = b"\r\n" if q.get("nl", "crlf") == "crlf" else b"\n"
            body = wrapped_b64(value, int(q.get("cols", "76")), nl)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            return True
        if route == "/bomb":
            enc = q.get("enc", "gzip")
            body = bomb(enc, int(q.get("mib", "512")))
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n"
                % (enc.encode(), len(body))
            )
            for i in range(0, len(body), 65536):
                writer.write(body[i : i + 65536])
                await writer.drain()
            return True
        if route == "/huge":
            size = int(q.get("size", str(1 << 20)))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size)
            left = size
            while left:
                piece = HUGE_BLOCK[: min(left, len(HUGE_BLOCK))]
                writer.write(piece)
                left -= len(piece)
                self.sent[route] = size - left
                await writer.drain()
            return True
        if route == "/corrupt":
            # A gzip body that turns into raw bytes (the value in clear) halfway.
            packed = gzip.compress(b"start " + value + b" " + FILLER * 200, compresslevel=1)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            for piece in (packed[: len(packed) // 2], b"\x00garbage " + value * 50):
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            return True
        if route == "/header":
            token = value.split()[-1] if value else b"none"
            body = b"ok"
            writer.write(
                b"HTTP/1.1 200 OK\r\nX-Reflect: %s\r\nX-Echo-%s: 1\r\nContent-Length: %d\r\n\r\n%s"
                % (value, token, len(body), body)
            )
            return True
        if route == "/reason":
            writer.write(b"HTTP/1.1 200 OK %s\r\nContent-Length: 2\r\n\r\nok" % value)
            return True
        if route == "/trailers":
            size = int(q.get("size", "1000"))
            writer.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Reflect\r\n\r\n"
            )
            for piece in body_chunks(b"-", size, 65536):
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
            writer.write(b"0\r\nX-Reflect: %s\r\n\r\n" % value)
            return True
        if route == "/malformed":
            writer.write(b"HTTP/1.1 200 OK\r\nX-Reflect: %s\r\nbroken %s\r\n\r\n" % (value, value))
            return False
        if route == "/malformed-status":
            writer.write(b"HTTP/1.1 2x0 %s\r\nContent-Length: 0\r\n\r\n" % value)
            return False
        if route == "/upgrade":
            writer.write(
                b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: reflect\r\nConnection: Upgrade\r\n\r\n"
            )
            for _ in range(20):
                writer.write(b"raw " + value + b"\n")
                await writer.drain()
                await asyncio.sleep(0.01)
            return False
        if route == "/ws":
            await self._ws(req, reader, writer)
            return False
        if route == "/early":
            body = b"final " + value
            writer.write(
                b'HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload; x="%s"\r\n\r\n' % value
            )
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            return True
        writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        return True

    async def _ws(
        self, req: Request, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        value = req.auth
        ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
        raw_head = f"{req.method} {req.path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in req.headers
        )
        ws.receive_data((raw_head + "\r\n").encode("latin-1"))
        for event in ws.events():
            if isinstance(event, wsproto.events.Request):
                writer.write(ws.send(wsproto.events.AcceptConnection()))
        out: list[wsproto.events.Event] = [
            wsproto.events.TextMessage(data=f"text {value}"),
            wsproto.events.BytesMessage(data=b"bin " + value[:10].encode(), message_finished=False),
            wsproto.events.BytesMessage(data=value[10:].encode() + b" end", message_finished=True),
            wsproto.events.Ping(payload=value.encode()[:125]),
            wsproto.events.Pong(payload=value.encode()[:125]),
        ]
        for event in out:
            writer.write(ws.send(event))
        await writer.drain()
        # Wait for the client's go-ahead (any text message), then close with the value.
        while True:
            data = await reader.read(65536)
            if not data:
                return
            ws.receive_data(data)
            for event in ws.events():
                if isinstance(event, wsproto.events.TextMessage):
                    writer.write(
                        ws.send(wsproto.events.CloseConnection(code=4000, reason=value[:123]))
                    )
                    await writer.drain()
                    await asyncio.sleep(0.1)
                    return
                if isinstance(event, wsproto.events.Ping):
                    writer.write(ws.send(event.response()))
                if isinstance(event, wsproto.events.CloseConnection):
                    return

    # --- HTTP/2 --------------------------------------------------------------

    async def _h2(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(
                client_side=False, header_encoding="latin-1", validate_outbound_headers=False
            )
        )
        conn.initiate_connection()
        writer.write(conn.data_to_send())
        window = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()
        while True:
            data = await reader.read(65536)
            if not data:
                break
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.RequestReceived):
                    headers = [(str(k), str(v)) for k, v in event.headers]
                    pseudo = dict(headers)
                    req = Request(
                        pseudo[":method"],
                        pseudo[":path"],
                        [(k, v) for k, v in headers if not k.startswith(":")]
                        + [(":authority", pseudo.get(":authority", ""))],
                        http2=True,
                    )
                    self.record(req)
                    t = asyncio.ensure_future(
                        self._h2_respond(conn, writer, event.stream_id, req, window)
                    )
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
                    window.set()
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            writer.write(conn.data_to_send())
            await writer.drain()
        for t in tasks:
            t.cancel()

    async def _h2_send(
        self,
        conn: h2.connection.H2Connection,
        writer: asyncio.StreamWriter,
        sid: int,
        data: bytes,
        window: asyncio.Event,
    ) -> None:
        while data:
            room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
            if room <= 0:
                window.clear()
                await window.wait()
                continue
            conn.send_data(sid, data[:room])
            data = data[room:]
            writer.write(conn.data_to_send())
            await writer.drain()

    async def _h2_respond(
        self,
        conn: h2.connection.H2Connection,
        writer: asyncio.StreamWriter,
        sid: int,
        req: Request,
        window: asyncio.Event,
    ) -> None:
        value = req.auth.encode()
        q = req.query
        route = req.route
        headers: list[tuple[bytes, bytes]] = [(b":status", b"200")]
        chunks: list[bytes] = [b"ok"]
        trailers: list[tuple[bytes, bytes]] | None = None
        if route == "/body":
            size = int(q.get("size", "100000"))
            chunk = int(q.get("chunk", "4096"))
            chunks = body_chunks(value, size, chunk)
            if q.get("enc") == "gzip":
                packed = gzip.compress(b"".join(chunks), compresslevel=1)
                chunks = [packed[i : i + chunk] for i in range(0, len(packed), chunk)]
                headers.append((b"content-encoding", b"gzip"))
            if q.get("framing") == "cl":
                headers.append((b"content-length", b"%d" % sum(map(len, chunks))))
        elif route == "/header":
            token = value.split()[-1] if value else b"none"
            headers += [(b"x-reflect", value), (b"x-echo-" + token.lower(), b"1")]
        elif route == "/trailers":
            size = int(q.get("size", "1000"))
            chunks = body_chunks(b"-", size, 65536)
            headers.append((b"trailer", b"x-reflect"))
            trailers = [(b"x-reflect", value)]
        elif route == "/malformed":
            token = value.split()[-1] if value else b"none"
            headers.append((b"x-bad " + token, value))  # a space: not a header name
        elif route == "/wrapped":
            nl = b"\r\n" if q.get("nl", "crlf") == "crlf" else b"\n"
            chunks = [wrapped_b64(value, int(q.get("cols", "76")), nl)]
        elif route == "/bomb":
            enc = q.get("enc", "gzip")
            packed = bomb(enc, int(q.get("mib", "512")))
            headers.append((b"content-encoding", enc.encode()))
            chunks = [packed[i : i + 16384] for i in range(0, len(packed), 16384)]
        elif route == "/nobody":
            headers = [(b":status", q.get("status", "204").encode())]
            size = int(q.get("size", "1000"))
            chunks = body_chunks(value, size, 16384)
        elif route == "/huge":
            size = int(q.get("size", str(1 << 20)))
            conn.send_headers(sid, [(b":status", b"200"), (b"content-length", b"%d" % size)])
            writer.write(conn.data_to_send())
            left = size
            while left:
                piece = HUGE_BLOCK[: min(left, 65536)]
                await self._h2_send(conn, writer, sid, piece, window)
                left -= len(piece)
                self.sent[route] = size - left
            conn.end_stream(sid)
            writer.write(conn.data_to_send())
            await writer.drain()
            return
        elif route == "/early":
            conn.send_headers(sid, [(b":status", b"103"), (b"link", b"</s.css>; x=" + value)])
            writer.write(conn.data_to_send())
            chunks = [b"final " + value]
        else:
            headers = [(b":status", b"404")]
            chunks = []
        conn.send_headers(sid, headers)
        writer.write(conn.data_to_send())
        for piece in chunks:
            await self._h2_send(conn, writer, sid, piece, window)
        if trailers is not None:
            conn.send_headers(sid, trailers, end_stream=True)
        else:
            conn.end_stream(sid)
        writer.write(conn.data_to_send())
        await writer.drain()

    # --- plumbing ------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        try:
            if ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2":
                await self._h2(reader, writer)
            else:
                await self._h1(reader, writer)
        except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _open(self) -> None:
        self._server = await asyncio.start_server(
            self._handle, "127.0.0.1", 0, ssl=self.ssl_context, limit=1 << 20
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()


@contextmanager
def reflector(
    ca: TestCA, *names: str, alpn: tuple[str, ...] = ("h2", "http/1.1")
) -> Iterator[Reflector]:
    """A reflecting TLS upstream with a leaf for ``names`` from ``ca``, speaking ``alpn``."""
    ctx = ca.issue(*names).server_context()
    ctx.set_alpn_protocols(list(alpn))
    server = Reflector(ctx).start()
    try:
        yield server
    finally:
        server.stop()
