"""Long-lived credential delivery to a sandbox: ``authenticate_github`` / ``authenticate_vercel``.

The GitHub shell tool leases a token for one command. Some workflows want a
sandbox that is simply "logged in" for a while (a build that runs ``vercel
deploy``, a long agent session using ``gh`` directly). Two deliveries:

- ``firewall`` (default): the real token goes to the proxy as a lease; the
  sandbox gets a placeholder in the same places a real login would put a token
  (an env file with ``GH_TOKEN`` / ``VERCEL_TOKEN``, a git include file with an
  ``http.https://github.com/.extraheader``). The real value never enters the
  sandbox; revoke by deleting the lease (or let ``ttl_s`` expire it).
- ``command``: for sandboxes without the proxy. The same files hold the REAL
  token (mode 0600). This is said plainly in the returned ``warning`` and in the
  log: anything running in the sandbox can then read and send the token anywhere.

Placeholders are shaped like the credential (see :mod:`airlock.client.leases`):
the ``vercel`` CLI refuses a ``--token`` containing ``-``, and other clients
check a GitHub token's prefix.

Files are written through the sandbox with the secret on stdin (never in argv),
under ``umask 077``; the git include is registered with ``git config --global
--add include.path`` so an existing ``~/.gitconfig`` is kept.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from airlock.proxy.protocol import LeaseRule

from .github.redact import basic_credential
from .leases import github_placeholder, github_rules, vercel_placeholder, vercel_rules
from .providers.base import IssuedToken
from .proxy import ProxyClient
from .sandboxes import Sandbox

log = logging.getLogger(__name__)

Mode = Literal["firewall", "command"]

DEFAULT_ENV_FILE = "$HOME/.airlock/credentials.env"
DEFAULT_GIT_INCLUDE = "$HOME/.airlock/git-credentials.gitconfig"

COMMAND_WARNING = (
    "command delivery: the REAL {service} token now lives in the sandbox ({where}); any "
    "process there can read it and use it from anywhere until it expires or is revoked "
    "at {service}. Use firewall delivery (the proxy) to keep it out of the sandbox."
)

# Replaces one KEY=... line of an env file (or adds it), from stdin, with mode 0600.
_ENV_SCRIPT = r"""
umask 077
case $1 in '$HOME/'*) f="$HOME/${1#\$HOME/}" ;; *) f=$1 ;; esac
mkdir -p "$(dirname "$f")"
touch "$f"
tmp="$f.tmp.$$"
grep -v "^$2=" "$f" > "$tmp" || true
cat >> "$tmp"
chmod 600 "$tmp"
mv -f "$tmp" "$f"
"""

# Writes a git config include file from stdin (0600) and registers it once.
_GIT_SCRIPT = r"""
umask 077
case $1 in '$HOME/'*) f="$HOME/${1#\$HOME/}" ;; *) f=$1 ;; esac
mkdir -p "$(dirname "$f")"
cat > "$f.tmp.$$"
chmod 600 "$f.tmp.$$"
mv -f "$f.tmp.$$" "$f"
git config --global --get-all include.path | grep -qxF "$f" ||
  git config --global --add include.path "$f"
"""


class DeliveryError(Exception):
    """Writing credentials into the sandbox or installing the lease failed."""


@dataclass
class SandboxSession:
    """What delivery needs to know about one sandbox.

    ``proxy`` and ``session_id`` are required for firewall delivery only.
    """

    sandbox: Sandbox
    workspace: str = "/"
    proxy: ProxyClient | None = None
    session_id: str | None = None
    env_file: str = DEFAULT_ENV_FILE
    git_include: str = DEFAULT_GIT_INCLUDE


@dataclass
class Delivery:
    """The outcome; ``placeholder`` is None for command delivery (the sandbox has the real token)."""

    service: Literal["github", "vercel"]
    mode: Mode
    env_var: str
    env_file: str
    git_include: str | None
    placeholder: str | None
    lease_id: str | None
    hosts: list[str] = field(default_factory=list)
    warning: str | None = None
    _session: SandboxSession | None = field(default=None, repr=False)

    async def revoke(self) -> None:
        """Delete the lease (firewall). Command delivery cannot be revoked from here."""
        s = self._session
        if self.lease_id and s is not None and s.proxy is not None and s.session_id:
            await s.proxy.delete_lease(s.session_id, self.lease_id)


def _token_value(token: str | IssuedToken) -> str:
    value = token.token if isinstance(token, IssuedToken) else token
    value = value.strip()
    if not value or any(c in value for c in "\r\n"):
        raise ValueError("the token is empty or contains a line break")
    return value


async def _write(session: SandboxSession, script: str, args: list[str], content: str) -> None:
    result = await session.sandbox.run(
        ["sh", "-c", script, "airlock-delivery", *args],
        session.workspace,
        {},
        30,
        stdin=content,
    )
    if result.exit_code != 0:
        raise DeliveryError(
            f"writing credentials in the sandbox failed (exit {result.exit_code}): "
            f"{result.stderr.strip()[-300:]}"
        )


async def _install_lease(
    session: SandboxSession, rules: list[LeaseRule], ttl_s: int, service: str
) -> str:
    if session.proxy is None or not session.session_id:
        raise DeliveryError(
            f"firewall delivery of the {service} token needs the proxy client and session id; "
            'use delivery="command" for a sandbox without the proxy'
        )
    lease_id = f"{service}-{uuid.uuid4().hex[:16]}"
    await session.proxy.put_lease(session.session_id, lease_id, rules, ttl_s)
    return lease_id


async def _deliver(
    session: SandboxSession,
    token: str | IssuedToken,
    delivery: Mode,
    ttl_s: int,
    service: str,
    placeholder: str | None,
    new_placeholder: Callable[[], str],
    rules_for: Callable[[str, str], list[LeaseRule]],
    write: Callable[[str], Awaitable[None]],
) -> tuple[str, str | None]:
    """Install the lease (firewall mode) and ``write`` what the sandbox sees.

    Returns (the value written: a placeholder or the real token, the lease id).
    A lease whose files could not be written is removed again, so a failure
    leaves nothing behind.
    """
    real = _token_value(token)
    lease_id: str | None = None
    if delivery == "firewall":
        value = placeholder or new_placeholder()
        lease_id = await _install_lease(session, rules_for(real, value), ttl_s, service)
    elif delivery == "command":
        value = real
    else:
        raise ValueError(f"unknown delivery {delivery!r}")
    try:
        await write(value)
    except BaseException:
        if lease_id and session.proxy is not None and session.session_id:
            await session.proxy.delete_lease(session.session_id, lease_id)
        raise
    return value, lease_id


def _command_warning(delivery: Mode, service: str, where: str) -> str | None:
    """The warning (also logged) that a real token now sits in the sandbox's files."""
    if delivery != "command":
        return None
    warning = COMMAND_WARNING.format(service=service, where=where)
    log.warning("%s", warning)
    return warning


async def authenticate_github(
    session: SandboxSession,
    token: str | IssuedToken,
    *,
    delivery: Mode = "firewall",
    ttl_s: int = 3600,
    api_host: str = "api.github.com",
    git_host: str = "github.com",
    placeholder: str | None = None,
) -> Delivery:
    """Make ``gh`` and ``git`` in the sandbox authenticated for GitHub."""

    async def write(value: str) -> None:
        await _write(session, _ENV_SCRIPT, [session.env_file, "GH_TOKEN"], f"GH_TOKEN={value}\n")
        include = (
            f'[http "https://{git_host}/"]\n'
            f"\textraheader = AUTHORIZATION: basic {basic_credential(value)}\n"
        )
        await _write(session, _GIT_SCRIPT, [session.git_include], include)

    value, lease_id = await _deliver(
        session, token, delivery, ttl_s, "github", placeholder, github_placeholder,
        lambda real, ph: github_rules(real, ph, api_host=api_host, git_host=git_host), write,
    )  # fmt: skip
    warning = _command_warning(delivery, "GitHub", f"{session.env_file} and {session.git_include}")
    return Delivery(
        service="github",
        mode=delivery,
        env_var="GH_TOKEN",
        env_file=session.env_file,
        git_include=session.git_include,
        placeholder=value if delivery == "firewall" else None,
        lease_id=lease_id,
        hosts=[api_host, git_host] if delivery == "firewall" else [],
        warning=warning,
        _session=session,
    )


async def authenticate_vercel(
    session: SandboxSession,
    token: str | IssuedToken,
    *,
    delivery: Mode = "firewall",
    ttl_s: int = 3600,
    hosts: tuple[str, ...] = ("api.vercel.com", "vercel.com"),
    placeholder: str | None = None,
) -> Delivery:
    """Make the ``vercel`` CLI (``VERCEL_TOKEN``) in the sandbox authenticated."""

    async def write(value: str) -> None:
        await _write(
            session, _ENV_SCRIPT, [session.env_file, "VERCEL_TOKEN"], f"VERCEL_TOKEN={value}\n"
        )

    value, lease_id = await _deliver(
        session, token, delivery, ttl_s, "vercel", placeholder, vercel_placeholder,
        lambda real, ph: vercel_rules(real, ph, hosts=hosts), write,
    )  # fmt: skip
    warning = _command_warning(delivery, "Vercel", session.env_file)
    return Delivery(
        service="vercel",
        mode=delivery,
        env_var="VERCEL_TOKEN",
        env_file=session.env_file,
        git_include=None,
        placeholder=value if delivery == "firewall" else None,
        lease_id=lease_id,
        hosts=list(hosts) if delivery == "firewall" else [],
        warning=warning,
        _session=session,
    )
