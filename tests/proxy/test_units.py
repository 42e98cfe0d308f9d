"""Pure units of the proxy: the stream scrubber, candidate parsing, the chain."""

from __future__ import annotations

import asyncio

from mitmproxy import http

from airlock.proxy.addons.chain import Chain
from airlock.proxy.addons.scrub import StreamScrubber
from airlock.proxy.addons.swap import candidates


def test_stream_scrubber_catches_tokens_split_across_chunks() -> None:
    pairs = {b"REALTOKEN-123456": b"ph-1", b"OTHER": b"x"}
    body = b"".join(b"%d REALTOKEN-123456 OTHER " % i for i in range(500))
    expected = body.replace(b"REALTOKEN-123456", b"ph-1").replace(b"OTHER", b"x")
    for size in (1, 2, 3, 7, 15, 16, 17, 64, 1000, len(body)):
        scrub = StreamScrubber(pairs)
        out = b"".join(scrub(body[i : i + size]) for i in range(0, len(body), size))
        out += scrub(b"")
        assert out == expected, size


def test_candidates_extract_only_whole_credential_forms() -> None:
    headers = http.Headers(
        [
            (b"Authorization", b"token ph-aaaaaaaa"),
            (b"X-Other", b"Bearer ph-bbbbbbbb"),
            (b"X-Basic", b"Basic eC1hY2Nlc3MtdG9rZW46cGgtY2NjY2NjY2M="),
            (b"X-Not", b"Bearer a b"),
            (b"X-Bad-B64", b"Basic !!!"),
            (b"X-No-Colon", b"Basic cGgtY2NjY2NjY2M="),
        ]
    )
    found = {(c.header, c.scheme, c.placeholder) for c in candidates(headers)}
    assert found == {
        ("authorization", "token", "ph-aaaaaaaa"),
        ("x-other", "bearer", "ph-bbbbbbbb"),
        ("x-basic", "basic", "ph-cccccccc"),
    }


def test_chain_calls_concerns_in_order_sync_and_async() -> None:
    calls: list[str] = []

    class A:
        def requestheaders(self, flow: object) -> None:
            calls.append("a")

    class B:
        async def requestheaders(self, flow: object) -> None:
            await asyncio.sleep(0)
            calls.append("b")

        def response(self, flow: object) -> None:
            calls.append("b-response")

    chain = Chain([A(), B()])
    asyncio.run(chain.requestheaders(None))  # type: ignore[attr-defined]
    chain.response(None)  # type: ignore[attr-defined]
    assert calls == ["a", "b", "b-response"]
    assert not hasattr(chain, "http_connect")
