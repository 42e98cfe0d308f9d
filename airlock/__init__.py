"""airlock: tooling for AI-agent sandboxes.

The subpackages live in the repository's top-level ``daemon/``, ``proxy/`` and
``client/`` folders; this directory links them under the ``airlock`` name so the
source tree imports exactly as the installed distribution does.
"""
