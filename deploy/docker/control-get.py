#!/usr/bin/env python3
"""GET one path from an airlock endpoint (airlock-proxy's control API or airlockd).

Installed in the images as ``airlock-control-get``. Container health checks and
the compose file's CA export use it, because neither image ships curl and both
APIs listen on Unix sockets by default. Standard library only, so it runs under
the base image's Python without the project's virtualenv.

    airlock-control-get [--endpoint unix:/path|tcp://host:port] [--token-file F]
                        [-o FILE] PATH

The endpoint defaults to ``$AIRLOCK_CONTROL`` and the token file to
``$AIRLOCK_CONTROL_TOKEN_FILE``. Exit status: 0 on a 2xx answer (body on stdout,
or written atomically to FILE), 1 on any other status, 2 when the endpoint cannot
be reached, 64 on bad usage. With ``--any-status`` any HTTP answer exits 0 (a
liveness probe: the process serves, even if it reports itself degraded).
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import sys
import tempfile

TIMEOUT_S = 5.0


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP/1.1 over a Unix stream socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def connection(endpoint: str) -> http.client.HTTPConnection:
    """A connection for ``unix:/path``, a bare absolute path, or ``tcp://host:port``."""
    if endpoint.startswith("unix:"):
        return UnixHTTPConnection(endpoint[len("unix:") :], TIMEOUT_S)
    if endpoint.startswith("/"):
        return UnixHTTPConnection(endpoint, TIMEOUT_S)
    if endpoint.startswith("tcp://"):
        hostport = endpoint[len("tcp://") :].rstrip("/")
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad tcp endpoint {endpoint!r}: expected tcp://HOST:PORT")
        return http.client.HTTPConnection(host.strip("[]"), int(port), timeout=TIMEOUT_S)
    raise ValueError(f"bad endpoint {endpoint!r}: expected unix:/path or tcp://host:port")


def write_atomically(path: str, data: bytes) -> None:
    """Readers (a sandbox waiting for its CA) never see a half-written file."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".airlock-get-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_token(path: str) -> str | None:
    """First word of the first line that is not blank or a comment.

    That reads both a proxy control token file (one token) and an airlockd token
    file (``TOKEN SCOPE`` lines).
    """
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            words = line.split("#", 1)[0].split()
            if words:
                return words[0]
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="airlock-control-get", description=__doc__.split("\n")[1])
    parser.add_argument("--endpoint", default=os.environ.get("AIRLOCK_CONTROL"))
    parser.add_argument("--token-file", default=os.environ.get("AIRLOCK_CONTROL_TOKEN_FILE"))
    parser.add_argument("-o", "--output", help="write the body here instead of stdout")
    parser.add_argument(
        "--any-status",
        action="store_true",
        help="exit 0 on any HTTP answer (a liveness check: the API is up, whatever it says)",
    )
    parser.add_argument("path", help="e.g. /v1/health or /v1/ca.pem")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 64
    if not args.endpoint:
        print(
            "airlock-control-get: no endpoint (use --endpoint or AIRLOCK_CONTROL)", file=sys.stderr
        )
        return 64
    if not args.path.startswith("/"):
        print("airlock-control-get: PATH must start with /", file=sys.stderr)
        return 64
    headers = {"Accept": "*/*"}
    if args.token_file:
        token = read_token(args.token_file)
        if token is None:
            print(f"airlock-control-get: no token in {args.token_file}", file=sys.stderr)
            return 64
        headers["Authorization"] = f"Bearer {token}"
    try:
        conn = connection(args.endpoint)
    except ValueError as exc:
        print(f"airlock-control-get: {exc}", file=sys.stderr)
        return 64
    try:
        conn.request("GET", args.path, headers=headers)
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        print(f"airlock-control-get: {args.endpoint} unreachable: {exc}", file=sys.stderr)
        return 2
    finally:
        conn.close()
    if args.any_status:
        return 0
    if not 200 <= resp.status < 300:
        print(f"airlock-control-get: GET {args.path} -> HTTP {resp.status}", file=sys.stderr)
        return 1
    if args.output:
        write_atomically(args.output, body)
    else:
        sys.stdout.buffer.write(body)
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
