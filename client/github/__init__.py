"""The GitHub shell tool: one gh/git command, one repository, one short lease.

``argv`` parses, ``policy`` approves and checks targets, ``shell`` runs,
``redact`` cleans the output, ``models`` holds the input/output shapes and the
description models read.
"""

from .argv import CommandParseError, parse_command
from .models import (
    DESCRIPTION,
    TOOL_NAME,
    GitHubPermission,
    GitHubShellInput,
    GitHubShellResult,
    input_schema,
)
from .policy import approve, check_targets
from .shell import GitHubShell, GitHubShellDenied, GitHubShellError

__all__ = [
    "DESCRIPTION",
    "TOOL_NAME",
    "CommandParseError",
    "GitHubPermission",
    "GitHubShell",
    "GitHubShellDenied",
    "GitHubShellError",
    "GitHubShellInput",
    "GitHubShellResult",
    "approve",
    "check_targets",
    "input_schema",
    "parse_command",
]
