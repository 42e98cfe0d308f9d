"""The decode limits are the operator's: a real airlock-proxy started with
``--max-decoded-bytes 6 MiB --max-decode-ratio 5000`` cuts a compressed body
past 6 MiB (audited ``decoded_too_large``, 502) and relays, whole and
scrubbed, a 5 MiB body of zeros that the default ratio (100) would cut.

This module's ``proxy`` replaces the shared one, so the ``lease`` fixture
(conftest) is a session on the proxy started with those flags.
"""

from __future__ import annotations

import pytest

from tests.fakes.proxy_harness import ProxyProcess
from tests.proxy.adversarial.conftest import (
    H1Response,
    Lease,
    h1_get,
    h2_get,
    leaks,
    parse_h1,
    reflector_proxy_fixture,
)

pytestmark = pytest.mark.timeout(120)

MIB = 1 << 20


proxy = reflector_proxy_fixture(
    "decode-limits", ["--max-decoded-bytes", str(6 * MIB), "--max-decode-ratio", "5000"]
)


def _get(lease: Lease, via: str, path: str) -> H1Response:
    """``via`` names the upstream's protocol; the sandbox side is HTTP/1.1 either way."""
    return h1_get(lease, path) if via == "h1" else parse_h1(h2_get(lease, path).raw)


def _refusals(proxy: ProxyProcess) -> list[dict[str, object]]:
    return [
        e
        for e in proxy.audit_events()
        if e["event"] == "refusal" and e.get("reason") == "decoded_too_large"
    ]


@pytest.mark.parametrize("via", ["h1", "h2"])
def test_a_body_decoding_past_max_decoded_bytes_is_cut(lease: Lease, via: str) -> None:
    before = len(_refusals(lease.proxy))
    small = _get(lease, via, "/body?size=1000000&framing=chunked&enc=gzip")
    assert small.status == 200 and len(small.body) >= 1000000  # under the limit: whole
    assert f"Bearer {lease.placeholder}".encode() in small.body
    big = _get(lease, via, "/body?size=8000000&framing=chunked&enc=gzip")
    assert big.status == 200  # the head went out before the body passed the limit
    # Cut: never more than the limit decoded (the placeholder is longer than the token).
    grown = big.body.count(lease.placeholder.encode()) * (len(lease.placeholder) - len(lease.real))
    assert 0 < len(big.body) - grown <= 6 * MIB, len(big.body)
    assert not big.complete  # no last chunk: the sandbox sees a truncated body
    lease.proxy.wait_audit(
        lambda e: (
            e["event"] == "refusal"
            and e.get("reason") == "decoded_too_large"
            and e.get("status") == 502
        ),
        what="a decoded_too_large refusal (502) in the audit log",
    )
    assert len(_refusals(lease.proxy)) == before + 1
    assert leaks(small.everything + big.everything, lease.real) == []


def test_a_ratio_the_default_would_refuse_is_relayed_under_a_higher_one(lease: Lease) -> None:
    before = len(_refusals(lease.proxy))
    resp = h1_get(lease, "/bomb?enc=gzip&mib=5")
    assert resp.status == 200 and resp.complete, resp.head
    assert resp.body == b"\0" * (5 * MIB)
    assert resp.header("content-encoding") is None  # decoded on the way
    assert len(_refusals(lease.proxy)) == before
