"""``parse_command``: a command string to argv, with shell *syntax* only.

The GitHub shell tool never runs a shell. Models write commands the way they
would type them, so we accept the quoting people use and refuse everything that
would mean something more in a shell (pipes, redirections, substitutions,
command lists, subshells, brace groups) instead of silently passing it as a
literal argument the model did not intend.

Rules:
- Whitespace (space, tab) separates words; an unquoted newline is a command
  separator, so it is refused like ``;``.
- ``'...'`` is literal.
- ``"..."``: backslash escapes ``\\ " $ `` and backtick (and joins lines on a
  newline), otherwise the backslash is kept, as in POSIX sh. An unescaped ``$``
  or backtick inside double quotes is refused: in a shell it would expand.
- Outside quotes a backslash makes the next character literal.
- Any unquoted ``; & | < > $ ` ( ) { }`` is refused; an unfinished quote or a
  trailing backslash is refused.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

FORBIDDEN = frozenset(";&|<>$`(){}")
_DQ_ESCAPABLE = frozenset('\\"$`\n')


class CommandParseError(ValueError):
    """The command is not plain argv syntax; the message says what to change."""


def parse_command(command: str) -> list[str]:
    """Split ``command`` into argv or raise :class:`CommandParseError`."""
    if "\x00" in command:
        raise CommandParseError("the command contains a NUL character")
    argv: list[str] = []
    word: list[str] = []
    in_word = False
    i = 0
    n = len(command)
    while i < n:
        c = command[i]
        if c in " \t\r":
            if in_word:
                argv.append("".join(word))
                word, in_word = [], False
            i += 1
        elif c == "\n":
            raise CommandParseError(
                "the command spans several lines: run one command per call "
                "(a newline separates commands in a shell)"
            )
        elif c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                raise CommandParseError("unfinished single quote: close it with '")
            word.append(command[i + 1 : end])
            in_word = True
            i = end + 1
        elif c == '"':
            i = _double_quoted(command, i + 1, word)
            in_word = True
        elif c == "\\":
            if i + 1 >= n:
                raise CommandParseError("the command ends with a backslash")
            nxt = command[i + 1]
            if nxt != "\n":  # backslash-newline joins lines
                word.append(nxt)
                in_word = True
            i += 2
        elif c in FORBIDDEN:
            raise CommandParseError(
                f"unquoted {c!r} at position {i}: pipes, redirections, substitutions, "
                "command lists and grouping are not supported; run one plain command "
                "(quote the character if it is part of an argument)"
            )
        else:
            word.append(c)
            in_word = True
            i += 1
    if in_word:
        argv.append("".join(word))
    if not argv:
        raise CommandParseError("the command is empty")
    return argv


def _double_quoted(command: str, i: int, word: list[str]) -> int:
    """Consume a double-quoted span starting after the opening quote; return the index after it."""
    n = len(command)
    while i < n:
        c = command[i]
        if c == '"':
            return i + 1
        if c == "\\" and i + 1 < n and command[i + 1] in _DQ_ESCAPABLE:
            if command[i + 1] != "\n":
                word.append(command[i + 1])
            i += 2
            continue
        if c in "$`":
            raise CommandParseError(
                f"{c!r} inside double quotes at position {i} would expand in a shell; "
                "use single quotes for a literal, or escape it with a backslash"
            )
        word.append(c)
        i += 1
    raise CommandParseError('unfinished double quote: close it with "')


def git_positionals(argv: Sequence[str], value_opts: Collection[str]) -> Iterator[tuple[int, str]]:
    """(index, argument) of each positional of ``git SUBCOMMAND ...`` (from ``argv[2]`` on).

    Options are skipped, and so is the value after an option in
    ``value_opts`` (``-o VALUE``); everything after ``--`` is positional.
    """
    args = enumerate(argv)
    for _ in range(2):
        next(args, None)
    options = True
    for i, arg in args:
        if options and arg == "--":
            options = False
        elif options and arg.startswith("-"):
            if arg in value_opts:
                next(args, None)
        else:
            yield i, arg
