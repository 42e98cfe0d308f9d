"""``--max-decoded-bytes`` and ``--max-decode-ratio``: parsed, defaulted, refused
when they make no sense (at start-up, naming the flag), and handed to the
decode budget of every streamed body (the budget itself: tests/proxy/addons/test_scrubber.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from airlock.proxy.cli import build_parser, config_from_args
from airlock.proxy.config import ConfigError, ProxyConfig
from airlock.proxy.decoders import ChainDecoder, DecodeBudget, DecodedTooLarge
from tests.fakes.proxy_harness import PROXY_BIN
from tests.fakes.reflector import bomb

MIB = 1 << 20


def _config(tmp_path: Path, *args: str) -> ProxyConfig:
    return config_from_args(build_parser().parse_args(["--state-dir", str(tmp_path), *args]))


def test_defaults_are_one_gib_and_a_ratio_of_100(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    assert (cfg.max_decoded_bytes, cfg.max_decode_ratio) == (1 << 30, 100)
    cfg = _config(tmp_path, "--max-decoded-bytes", "1048576", "--max-decode-ratio", "5000")
    assert (cfg.max_decoded_bytes, cfg.max_decode_ratio) == (MIB, 5000)


@pytest.mark.parametrize(
    "flag, value", [("--max-decoded-bytes", "0"), ("--max-decoded-bytes", "-5"),
                    ("--max-decode-ratio", "0"), ("--max-decode-ratio", "-1")],
)  # fmt: skip
def test_a_limit_that_is_not_positive_is_refused(tmp_path: Path, flag: str, value: str) -> None:
    with pytest.raises(ConfigError, match=f"{flag}: must be > 0, got {value}"):
        _config(tmp_path, flag, value)


@pytest.mark.parametrize("flag", ["--max-decoded-bytes", "--max-decode-ratio"])
def test_bad_values_stop_the_proxy_at_start_up_with_the_flag_named(
    tmp_path: Path, flag: str
) -> None:
    common = [
        str(PROXY_BIN), "--listen", "127.0.0.1:0", "--control", f"unix:{tmp_path}/c.sock",
        "--state-dir", str(tmp_path / "s"),
    ]  # fmt: skip
    for value, said in (("0", f"{flag}: must be > 0, got 0"), ("1g", "invalid int value")):
        result = subprocess.run([*common, flag, value], capture_output=True, text=True, timeout=60)
        assert result.returncode != 0
        assert said in result.stderr and flag in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
        assert not (tmp_path / "c.sock").exists()


def test_the_ratio_is_what_decides_for_a_body_of_zeros() -> None:
    """5 MiB of zeros (gzip, about 1000x): cut at the default ratio, relayed at 5000."""
    packed = bomb("gzip", 5)
    with pytest.raises(DecodedTooLarge, match="100x"):
        ChainDecoder(["gzip"]).decode(packed)
    budget = DecodeBudget(6 * MIB, 5000)
    assert ChainDecoder(["gzip"], budget).decode(packed) == b"\0" * (5 * MIB)
    with pytest.raises(DecodedTooLarge, match=f"passes {4 * MIB} bytes"):
        ChainDecoder(["gzip"], DecodeBudget(4 * MIB, 5000)).decode(packed)
