"""RS256 JSON Web Tokens for GitHub App authentication, with ``cryptography`` only.

GitHub wants ``iat`` slightly in the past (clock drift between us and GitHub)
and ``exp`` at most ten minutes after ``iat``... measured on GitHub's clock, so
we stay under that with a margin.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

IAT_BACKDATE_S = 60
EXP_AHEAD_S = 540  # 9 minutes: stays within GitHub's 10-minute limit despite drift


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_private_key(pem: str | bytes) -> rsa.RSAPrivateKey:
    data = pem.encode() if isinstance(pem, str) else pem
    key = serialization.load_pem_private_key(data, password=None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("GitHub App private keys are RSA keys")
    return key


def app_jwt(
    app_id: int | str, key: rsa.RSAPrivateKey, *, clock: Callable[[], float] = time.time
) -> str:
    """Sign a GitHub App JWT: ``iss`` = app id, ``iat`` 60 s back, ``exp`` 9 min ahead."""
    now = int(clock())
    header = {"alg": "RS256", "typ": "JWT"}
    payload: dict[str, Any] = {
        "iat": now - IAT_BACKDATE_S,
        "exp": now + EXP_AHEAD_S,
        "iss": str(app_id),
    }
    signing_input = (
        b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + b64url(json.dumps(payload, separators=(",", ":")).encode())
    )
    signature = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return signing_input + "." + b64url(signature)
