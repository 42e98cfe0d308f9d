"""The parser's fast paths answer what its general paths answer.

An LF patch is split with one C-level ``split`` and its body is searched once
for a stray end marker; a CRLF patch goes through the line-by-line route.
Both must give the same operations, or the same error, for any arrangement of
real patch syntax (markers with stray whitespace, an end marker inside the
body, bare and ranged ``@@`` headers, blank lines).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.daemon.apply_patch.parser import Operation, parse_invocation
from airlock.daemon.errors import PatchParseError

PIECES = [
    "*** Begin Patch",
    "*** End Patch",
    "*** End Patch  ",
    " *** End Patch",
    "*** Update File: a.txt",
    "*** Update File: b.txt",
    "*** Add File: c.txt",
    "*** Delete File: d.txt",
    "*** Move to: e.txt",
    "*** End of File",
    "@@",
    "@@ def f():",
    "@@ -3,2 +3,2 @@",
    "@@ -1 +1 @@ class A:",
    " context",
    "-old",
    "+new",
    "+",
    "",
    "  ",
    "garbage",
]


def outcome(patch: str) -> tuple[list[Operation], str | None] | tuple[str, str, object]:
    try:
        return parse_invocation(patch)
    except PatchParseError as exc:
        return ("error", exc.message, exc.details)


@settings(max_examples=400, deadline=None)
@given(
    middle=st.lists(st.sampled_from(PIECES), max_size=14),
    wrap=st.booleans(),
    final_newline=st.booleans(),
)
def test_lf_and_crlf_patches_parse_alike(
    middle: list[str], wrap: bool, final_newline: bool
) -> None:
    lines = ["*** Begin Patch", *middle, "*** End Patch"] if wrap else middle
    lf = "\n".join(lines) + ("\n" if final_newline else "")
    assert outcome(lf) == outcome(lf.replace("\n", "\r\n"))


def test_an_end_marker_inside_the_body_is_refused_with_its_line() -> None:
    patch = "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch \n+x\n*** End Patch\n"
    result = outcome(patch)
    assert result[0] == "error"
    assert result[2] == {"line": 3}
    assert "only blank lines may follow it" in str(result[1])
