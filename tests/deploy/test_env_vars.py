"""Every AIRLOCK_* environment variable the project reads is in docs/operations.md.

The list is taken from the source, not from a list kept here: string literals
in the Python packages and deploy scripts (``os.environ.get("AIRLOCK_X")``,
``envvars.X = "AIRLOCK_X"``), and every ``AIRLOCK_*`` name in the shell scripts,
the Dockerfile, the compose file and the Kubernetes manifests. The naming
scheme is checked too: a ``_FILE`` name is documented as a file, and every
deprecated alias the CLI honours is in the deprecation table.
"""

from __future__ import annotations

import re
from pathlib import Path

from airlock.client import envvars

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
PY_LITERAL = re.compile(r"""["'](AIRLOCK_[A-Z0-9_]+)["']""")
ANY_NAME = re.compile(r"\bAIRLOCK_[A-Z0-9_]*[A-Z0-9]\b")


def _python_sources() -> list[Path]:
    out: list[Path] = []
    for top in ("daemon", "proxy", "client", "deploy", "scripts"):
        out += sorted((REPO / top).rglob("*.py"))
    return out


def _config_sources() -> list[Path]:
    out = [REPO / "Dockerfile", REPO / "deploy" / "compose.yaml"]
    out += sorted((REPO / "deploy" / "docker").glob("*.sh"))
    out += sorted((REPO / "scripts").glob("*.sh"))
    out += sorted((REPO / "deploy" / "k8s").glob("*.yaml"))
    return out


def names_in_code() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in _python_sources():
        for name in PY_LITERAL.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    for path in _config_sources():
        for name in ANY_NAME.findall(path.read_text(encoding="utf-8")):
            found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def test_the_scan_finds_the_known_readers() -> None:
    found = names_in_code()
    # A scan that silently found nothing would pass every check below.
    for name in ("AIRLOCK_DAEMON_SOCKET", "AIRLOCK_SEARCH_ENGINE", "AIRLOCK_PROXY_CA"):
        assert name in found, name
    assert len(found) >= 30


def test_every_variable_is_documented() -> None:
    missing = {n: sorted(where) for n, where in names_in_code().items() if f"`{n}`" not in DOC}
    assert missing == {}, f"add these to docs/operations.md section 9: {missing}"


def test_every_deprecated_alias_is_in_the_deprecation_table() -> None:
    for canonical, aliases in envvars.DEPRECATED.items():
        for old in aliases:
            assert f"| `{old}` | `{canonical}`" in DOC, old


def test_file_variables_name_files() -> None:
    rows = [line for line in DOC.splitlines() if line.startswith("| `AIRLOCK_")]
    for row in rows:
        cells = row.split("|")
        first = cells[1]
        if len(cells) < 5 or first.count("`") != 2:  # the deprecation table has 2 columns
            continue
        if first.strip().strip("`").endswith("_FILE"):
            assert "file" in cells[3].lower(), row


def test_the_k8s_manifests_mention_only_variables_something_reads() -> None:
    """A variable in a manifest must be read by code, or be Kubernetes' own service env."""
    readers = {
        n
        for n, where in names_in_code().items()
        if any(not w.startswith("deploy/k8s") for w in where)
    }
    for path in sorted((REPO / "deploy" / "k8s").glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        for name in set(ANY_NAME.findall(text)):
            k8s_injected = name.endswith("_SERVICE_HOST") and f"$({name})" in text
            assert name in readers or k8s_injected, (
                f"{path.name} mentions {name}, which nothing reads"
            )


def test_deprecated_alias_still_works_and_warns(caplog: object) -> None:
    import logging

    import pytest

    assert isinstance(caplog, pytest.LogCaptureFixture)
    envvars._warned.discard("AIRLOCK_SOCKET")
    with caplog.at_level(logging.WARNING, logger="airlock.client.env"):
        value = envvars.get("AIRLOCK_DAEMON_SOCKET", env={"AIRLOCK_SOCKET": "/run/x.sock"})
    assert value == "/run/x.sock"
    assert "AIRLOCK_SOCKET is deprecated; set AIRLOCK_DAEMON_SOCKET" in caplog.text
    # The canonical name wins over the alias when both are set.
    both = {"AIRLOCK_SOCKET": "/old", "AIRLOCK_DAEMON_SOCKET": "/new"}
    assert envvars.get("AIRLOCK_DAEMON_SOCKET", env=both) == "/new"


def test_file_form_of_a_secret_wins_and_an_empty_file_is_an_error(tmp_path: Path) -> None:
    import pytest

    token = tmp_path / "tok"
    token.write_text("from-file\n")
    env = {"AIRLOCK_DAEMON_TOKEN": "from-env", "AIRLOCK_DAEMON_TOKEN_FILE": str(token)}
    assert envvars.secret("AIRLOCK_DAEMON_TOKEN", "AIRLOCK_DAEMON_TOKEN_FILE", env) == "from-file"
    token.write_text("")
    with pytest.raises(ValueError, match="AIRLOCK_DAEMON_TOKEN_FILE"):
        envvars.secret("AIRLOCK_DAEMON_TOKEN", "AIRLOCK_DAEMON_TOKEN_FILE", env)
