"""``linediff.regions`` on two versions of equal length (lines replaced in place).

The line-for-line comparison is one C-speed pass; it must give a valid
alignment (equal outside the regions, in order), the same regions the
general walk finds when the changes are scattered replacements, and step
aside for a shift (which differs everywhere between an insertion and a
deletion).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from airlock.daemon.diagnostics import linediff


def assert_alignment(old: list[str], new: list[str], found: list[linediff.Region]) -> None:
    """Outside the regions the two versions are equal line for line, in order."""
    i = j = 0
    for os_, oe, ns, ne in found:
        assert old[i:os_] == new[j:ns]
        assert os_ - i == ns - j
        i, j = oe, ne
    assert old[i:] == new[j:]


@settings(max_examples=300, deadline=None)
@given(
    old=st.lists(st.sampled_from(["a", "b", "c", "", "  x", "y\t"]), min_size=0, max_size=300),
    data=st.data(),
)
def test_equal_length_versions_align_line_for_line(old: list[str], data: st.DataObject) -> None:
    new = list(old)
    for _ in range(data.draw(st.integers(0, 12))):
        if not new:
            break
        at = data.draw(st.integers(0, len(new) - 1))
        new[at] = data.draw(st.sampled_from(["a", "b", "changed", "", " z "]))
    found = linediff.regions(old, new)
    assert_alignment(old, new, found)
    # Only differing lines are in a region: nothing equal is re-checked for nothing.
    changed = {k for k, (x, y) in enumerate(zip(old, new, strict=True)) if x != y}
    covered = {k for os_, oe, _, _ in found for k in range(os_, oe)}
    assert covered == changed


def test_a_shift_goes_the_general_way() -> None:
    old = [f"line {k}" for k in range(1000)]
    new = ["inserted", *old[:900], *old[901:]]  # same length: one in, one out, far apart
    assert linediff._replaced_lines(old, new) is None
    found = linediff.regions(old, new)
    assert_alignment(old, new, found)
    assert sum(oe - os_ for os_, oe, _, _ in found) <= 2  # not the 900 lines in between
