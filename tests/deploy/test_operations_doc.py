"""docs/operations.md documents every option of both daemons' real parsers and every
variable the images' scripts read, so the manual cannot silently fall behind."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from airlock.daemon.cli import build_parser as airlockd_parser
from airlock.proxy.cli import build_parser as proxy_parser

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "operations.md").read_text()


def options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(
        opt
        for action in parser._actions
        for opt in action.option_strings
        if opt.startswith("--") and opt != "--help"
    )


@pytest.mark.parametrize(
    ("name", "parser"), [("airlockd", airlockd_parser()), ("airlock-proxy", proxy_parser())]
)
def test_every_cli_option_is_documented(name: str, parser: argparse.ArgumentParser) -> None:
    opts = options(parser)
    assert len(opts) >= 8, f"{name}: parser lost its options?"
    missing = [opt for opt in opts if f"`{opt}" not in DOC]
    assert missing == [], f"{name} options missing from docs/operations.md: {missing}"


@pytest.mark.parametrize(
    "script", ["deploy/docker/sandbox-entrypoint.sh", "deploy/docker/control-get.py"]
)
def test_every_variable_the_scripts_read_is_documented(script: str) -> None:
    names = set(re.findall(r"\bAIRLOCK_[A-Z_]+\b", (REPO / script).read_text()))
    assert names
    missing = sorted(n for n in names if f"`{n}`" not in DOC)
    assert missing == [], f"{script}: undocumented variables {missing}"


def test_the_ca_variables_and_fail_closed_table_are_there() -> None:
    for var in ("SSL_CERT_FILE", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE"):
        assert f"`{var}`" in DOC
    for heading in ("Rotating the proxy CA", "Scaling the proxy", "audit log", "fails closed"):
        assert heading in DOC
