"""schemathesis hooks (loaded through ``SCHEMATHESIS_HOOKS``): bodies it cannot build itself.

A tar upload is bytes on the wire; schemathesis ships no serializer for
``application/x-tar``, so the generated binary value is sent as it is (the
daemon must refuse a body that is not a tar with a 400, never a 5xx).
"""

from __future__ import annotations

from typing import Any

import schemathesis


@schemathesis.serializer("application/x-tar")
def tar_bytes(ctx: schemathesis.SerializationContext, value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", "surrogateescape")
