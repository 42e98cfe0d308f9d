"""CLI command groups; each module exposes register(subparsers)."""
