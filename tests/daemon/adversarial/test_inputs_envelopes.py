"""Every malformed input a hostile caller sends is answered with the JSON envelope.

A real airlockd subprocess; JSON-level inputs go through an ordinary HTTP
client where one can send them, HTTP-level ones as raw bytes on the Unix
socket. Each answer must be JSON with the envelope's shape, the status its
code implies, and never ``internal`` (these are all the client's mistakes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.daemon.adversarial.raw_http import post, send_raw
from tests.fakes.daemon_harness import running_daemon

MAX_BODY = 64 * 1024

# (name, route, raw JSON body, expected status, expected code)
JSON_CASES = [
    ("deep nesting", "/v1/tools/file_read", b"[" * 5000 + b"]" * 5000, 400, "invalid_request"),
    (
        "deep object nesting",
        "/v1/tools/file_read",
        b'{"a":' * 3000 + b"1" + b"}" * 3000,
        400,
        "invalid_request",
    ),
    (
        "5,000-digit integer",
        "/v1/tools/file_read",
        b'{"path": "a.txt", "limit": ' + b"7" * 5000 + b"}",
        400,
        "invalid_request",
    ),
    (
        "100 levels (under json's own limit)",
        "/v1/tools/file_read",
        b'{"path": "a.txt", "x": ' + b"[" * 100 + b"]" * 100 + b"}",
        400,
        "invalid_request",
    ),
    ("NaN", "/v1/tools/file_read", b'{"path": "a.txt", "limit": NaN}', 400, "invalid_request"),
    (
        "lone surrogate in a path",
        "/v1/tools/file_read",
        b'{"path": "a\\ud800.txt"}',
        400,
        "invalid_request",
    ),
    (
        "lone surrogate in written content",
        "/v1/tools/file_write",
        b'{"path": "s.txt", "content": "x\\udfff"}',
        400,
        "invalid_request",
    ),
    (
        "lone surrogate in a key",
        "/v1/tools/exec",
        b'{"argv": ["true"], "env": {"\\ud834": "v"}}',
        400,
        "invalid_request",
    ),
    (
        "NUL in an env name",
        "/v1/tools/exec",
        b'{"argv": ["true"], "env": {"A\\u0000B": "v"}}',
        400,
        "invalid_request",
    ),
    (
        "= in an env name",
        "/v1/tools/exec",
        b'{"argv": ["true"], "env": {"A=B": "v"}}',
        400,
        "invalid_request",
    ),
    (
        "empty env name",
        "/v1/tools/exec",
        b'{"argv": ["true"], "env": {"": "v"}}',
        400,
        "invalid_request",
    ),
    (
        "over-long env name",
        "/v1/tools/exec",
        json.dumps({"argv": ["true"], "env": {"N" * 5000: "v"}}).encode(),
        400,
        "invalid_request",
    ),
    (
        "NUL in an env value",
        "/v1/tools/exec",
        b'{"argv": ["true"], "env": {"A": "x\\u0000y"}}',
        400,
        "invalid_request",
    ),
    ("NUL in argv", "/v1/tools/exec", b'{"argv": ["echo", "a\\u0000b"]}', 400, "invalid_request"),
    ("invalid UTF-8", "/v1/tools/file_read", b'{"path": "\xff\xfe"}', 400, "invalid_request"),
    ("not JSON", "/v1/tools/file_read", b"{path: a.txt", 400, "invalid_request"),
    ("an array body", "/v1/tools/file_read", b"[1, 2]", 400, "invalid_request"),
    ("unknown tool", "/v1/tools/no_such_tool", b"{}", 404, "unknown_tool"),
    (
        "tool name built to inject metric labels",
        "/v1/tools/x%22,outcome%3D%22ok",
        b"{}",
        404,
        "unknown_tool",
    ),
    ("tool name with braces", "/v1/tools/x%22%7D%0A", b"{}", 404, "not_found"),
]


@pytest.fixture
async def daemon(workspace_dir: Path):  # type: ignore[no-untyped-def]
    (workspace_dir / "a.txt").write_text("a\n")
    async with running_daemon(workspace_dir, extra_args=["--max-body-bytes", str(MAX_BODY)]) as d:
        yield d


async def test_json_level_inputs_get_envelopes(daemon, workspace_dir: Path) -> None:  # type: ignore[no-untyped-def]
    for name, route, body, status, code in JSON_CASES:
        resp = await send_raw(daemon.socket, post(route, body))
        err = resp.envelope()
        assert (resp.status, err["code"]) == (status, code), (name, resp.status, err)
        assert "Traceback" not in err["message"], name
    # An over-long file name (over NAME_MAX) is the caller's mistake too.
    long_name = json.dumps({"path": "n" * 300 + ".txt"}).encode()
    for tool in ("file_read", "file_write"):
        body = (
            long_name
            if tool == "file_read"
            else json.dumps({"path": "n" * 300 + ".txt", "content": "x"}).encode()
        )
        resp = await send_raw(daemon.socket, post(f"/v1/tools/{tool}", body))
        err = resp.envelope()
        assert 400 <= resp.status < 500 and err["code"] != "internal", (tool, err)
    assert not (workspace_dir / "s.txt").exists()
    assert sorted(p.name for p in workspace_dir.iterdir()) == ["a.txt"]
    # The daemon is still healthy and nothing was counted as internal.
    metrics = await send_raw(
        daemon.socket, b"GET /metrics HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n"
    )
    text = metrics.body.decode()
    assert 'outcome="internal"' not in text
    assert "%22" not in text and 'x"' not in text
    assert 'airlockd_tool_calls_total{tool="unknown",outcome="unknown_tool"} 2' in text


HTTP_CASES = [
    ("bad method", b"G\x01T /v1/health HTTP/1.1\r\nHost: d\r\n\r\n", 400, "invalid_request"),
    ("bad version", b"GET /v1/health HTTP/9.x\r\nHost: d\r\n\r\n", 400, "invalid_request"),
    (
        "invalid header name",
        b"GET /v1/health HTTP/1.1\r\nHost: d\r\nBad Header: x\r\n\r\n",
        400,
        "invalid_request",
    ),
    (
        "NUL in a header value",
        b"GET /v1/health HTTP/1.1\r\nHost: d\r\nX-A: a\x00b\r\n\r\n",
        400,
        "invalid_request",
    ),
    (
        "control character in the URL",
        b"GET /v1/hea\x7flth HTTP/1.1\r\nHost: d\r\n\r\n",
        400,
        "invalid_request",
    ),
    ("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\r\n\r\n", 400, "invalid_request"),
    (
        "over-long header line",
        b"GET /v1/health HTTP/1.1\r\nHost: d\r\nX-Long: " + b"a" * 20000 + b"\r\n\r\n",
        413,
        "too_large",
    ),
    (
        "over-long URL",
        b"GET /v1/" + b"a" * 20000 + b" HTTP/1.1\r\nHost: d\r\n\r\n",
        413,
        "too_large",
    ),
    (
        "two Content-Length headers",
        b"POST /v1/tools/file_read HTTP/1.1\r\nHost: d\r\nContent-Length: 2\r\n"
        b"Content-Length: 3\r\n\r\n{}",
        400,
        "invalid_request",
    ),
    (
        "bad chunked encoding",
        b"POST /v1/tools/file_read HTTP/1.1\r\nHost: d\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\n{}\r\n0\r\n\r\n",
        400,
        "invalid_request",
    ),
    (
        "body over the limit (declared)",
        post(
            "/v1/tools/file_write", b'{"path": "big", "content": "' + b"x" * (2 * MAX_BODY) + b'"}'
        ),
        413,
        "too_large",
    ),
    (
        "multipart body",
        post(
            "/v1/tools/file_read",
            b"--b\r\n\r\n--b--",
            content_type="multipart/form-data; boundary=b",
        ),
        400,
        "invalid_request",
    ),
    (
        "XML body",
        post("/v1/tools/file_read", b"<path>a.txt</path>", content_type="text/xml"),
        400,
        "invalid_request",
    ),
    ("unknown route", b"GET /v2/nothing HTTP/1.1\r\nHost: d\r\n\r\n", 404, "not_found"),
    (
        "wrong method",
        b"GET /v1/tools/file_read HTTP/1.1\r\nHost: d\r\n\r\n",
        405,
        "invalid_request",
    ),
    ("DELETE on health", b"DELETE /v1/health HTTP/1.1\r\nHost: d\r\n\r\n", 405, "invalid_request"),
]


async def test_http_level_inputs_get_envelopes(daemon) -> None:  # type: ignore[no-untyped-def]
    for name, raw, status, code in HTTP_CASES:
        resp = await send_raw(daemon.socket, raw)
        assert resp.headers.get("content-type", "").startswith("application/json"), (name, resp)
        err = resp.envelope()
        assert (resp.status, err["code"]) == (status, code), (name, resp.status, err)
    # A chunked body over the limit (no Content-Length to refuse it up front).
    chunk = b"x" * 16384
    body = b"".join(
        b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(2 * MAX_BODY // len(chunk))
    )
    raw = (
        b"POST /v1/tools/file_write HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body + b"0\r\n\r\n"
    )
    resp = await send_raw(daemon.socket, raw)
    assert (resp.status, resp.envelope()["code"]) == (413, "too_large")
    # After all that, the daemon still answers.
    resp = await send_raw(
        daemon.socket, b"GET /v1/health HTTP/1.1\r\nHost: d\r\nConnection: close\r\n\r\n"
    )
    assert resp.status == 200 and json.loads(resp.body)["status"] == "ok"
    log = daemon.log()
    assert "Traceback" not in log, log[-3000:]
