"""parse_command: argv syntax only, and every shell construct refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from airlock.client.github.argv import CommandParseError, parse_command


@pytest.mark.parametrize(
    "command",
    [
        "gh pr view 1 | cat",
        "gh pr view $(printenv)",
        "gh pr view 1 > out",
        "gh pr view 1; env",
        "gh pr view 1 && env",
        "gh pr view 1 &",
        "gh pr view < in",
        "gh pr view `id`",
        "gh pr view $HOME",
        "(gh pr view 1)",
        "{ gh pr view 1; }",
        'gh pr view "$(id)"',
        'gh pr view "`id`"',
        'gh pr view "${HOME}"',
        "gh pr view 1\nenv",
        "gh pr view 'unterminated",
        'gh pr view "unterminated',
        "gh pr view trailing\\",
        "",
        "   ",
    ],
)
def test_shell_syntax_is_a_parse_error(command: str) -> None:
    with pytest.raises(CommandParseError):
        parse_command(command)


def test_comment_with_apostrophe_in_double_quotes() -> None:
    assert parse_command('gh pr comment 1 --body "it\'s ready"') == [
        "gh",
        "pr",
        "comment",
        "1",
        "--body",
        "it's ready",
    ]


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("gh pr view 1", ["gh", "pr", "view", "1"]),
        ("  gh\tpr   view  ", ["gh", "pr", "view"]),
        ("gh api -f 'q=$x | y; z'", ["gh", "api", "-f", "q=$x | y; z"]),
        (
            'gh pr create --title "a \\"quoted\\" title"',
            ["gh", "pr", "create", "--title", 'a "quoted" title'],
        ),
        ('gh x "a\\nb"', ["gh", "x", "a\\nb"]),  # POSIX: backslash kept before n
        ('gh x "cost \\$5"', ["gh", "x", "cost $5"]),
        ("gh x a\\ b", ["gh", "x", "a b"]),
        ("gh x \\|", ["gh", "x", "|"]),
        ("gh x ''", ["gh", "x", ""]),
        ("gh x a'b'\"c\"", ["gh", "x", "abc"]),
        ("git push origin HEAD:refs/heads/x", ["git", "push", "origin", "HEAD:refs/heads/x"]),
        ("gh x a\\\nb", ["gh", "x", "ab"]),
    ],
)
def test_accepted_quoting(command: str, argv: list[str]) -> None:
    assert parse_command(command) == argv


_word = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=0,
    max_size=20,
)


@given(st.lists(_word, min_size=1, max_size=6))
def test_single_quoted_words_round_trip(words: list[str]) -> None:
    # Any word without a single quote survives single quoting unchanged.
    words = [w.replace("'", "") for w in words]
    command = " ".join("'" + w + "'" for w in words)
    assert parse_command(command) == words


_SAFE_ALPHABET = "ab1 -=/.,:!#*?~\t'\"\\"


@given(st.text(alphabet=_SAFE_ALPHABET, max_size=40))
def test_agrees_with_posix_shlex_on_plain_text(command: str) -> None:
    """Without expansions or operators, the split is exactly POSIX sh's (shlex, posix mode)."""
    import shlex

    try:
        expected = shlex.split(command)
    except ValueError:
        expected = None
    if not expected:
        with pytest.raises(CommandParseError):
            parse_command(command)
    else:
        assert parse_command(command) == expected
