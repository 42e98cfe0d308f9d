"""airlock: tooling for AI-agent sandboxes.

The subpackages live in the repository's top-level ``daemon/``, ``proxy/`` and
``client/`` folders; this directory links them under the ``airlock`` name so the
source tree imports exactly as the installed distribution does.
"""

from importlib import metadata as _metadata

try:
    # The one version: the installed distribution's (pyproject.toml), never a constant.
    __version__ = _metadata.version("airlock")
except _metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
