"""What every GitHub App API call of airlock shares, whoever makes it.

The client's :class:`~airlock.client.providers.github_app.GitHubAppProvider`
and the proxy's provider-backed leases (``airlock.proxy.credentials``) both
mint installation tokens from GitHub's REST API: they authenticate as the App
the same way and read GitHub's answers the same way, so both live here.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from cryptography.hazmat.primitives.asymmetric import rsa

from .jwt import app_jwt


def app_headers(app_id: int | str, key: rsa.RSAPrivateKey, user_agent: str) -> dict[str, str]:
    """Headers of one call made as the App itself: a fresh App JWT (it lives
    minutes, so it is signed per call), the pinned REST API version and who calls."""
    return {
        "Authorization": f"Bearer {app_jwt(app_id, key)}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": user_agent,
    }


async def json_object(resp: aiohttp.ClientResponse) -> dict[str, Any]:
    """The answer's body as a JSON object; ``{}`` when it is not one (an HTML
    error page from a proxy, an empty 204, a JSON list): callers judge by status
    and read fields with ``.get``."""
    try:
        data = await resp.json(content_type=None)
    except ValueError:
        data = None
    return data if isinstance(data, dict) else {}
