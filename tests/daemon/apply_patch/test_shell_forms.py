"""The shell forms Codex-trained models send in apply_patch's ``patch``, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from airlock.daemon.errors import PatchParseError, PathEscape
from tests.daemon.apply_patch.conftest import Apply

BODY = """*** Begin Patch
*** Add File: hello.txt
+hi
*** End Patch"""


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "opener, closer",
    [
        ("apply_patch <<'EOF'", "EOF"),
        ('apply_patch <<"EOF"', "EOF"),
        ("apply_patch <<EOF", "EOF"),
        ("applypatch <<'EOF'", "EOF"),
        ("applypatch <<PATCH", "PATCH"),
        ("apply_patch<<'END_OF_PATCH'", "END_OF_PATCH"),
        ("apply_patch <<- 'EOF'", "EOF"),
        ("<<'EOF'", "EOF"),
    ],
)
async def test_heredoc_forms(apply: Apply, ws: Path, opener: str, closer: str) -> None:
    result = await apply(f"{opener}\n{BODY}\n{closer}\n")
    assert result["files"] == [{"operation": "add", "path": "hello.txt", "previous_path": None}]
    assert (ws / "hello.txt").read_text() == "hi\n"


@pytest.mark.parametrize(
    "cd, directory",
    [
        ("cd sub", "sub"),
        ("cd 'my dir'", "my dir"),
        ('cd "my dir"', "my dir"),
        ('cd "dir \\"q\\""', 'dir "q"'),
        ("cd 'a b/c d'", "a b/c d"),
        ("cd sub/inner", "sub/inner"),
        ("cd ./sub", "sub"),
    ],
)
@pytest.mark.parametrize("command", ["apply_patch", "applypatch"])
async def test_cd_prefix_resolves_like_root(
    apply: Apply, ws: Path, cd: str, directory: str, command: str
) -> None:
    (ws / directory).mkdir(parents=True)
    await apply(f"{cd} && {command} <<'EOF'\n{BODY}\nEOF")
    assert (ws / directory / "hello.txt").read_text() == "hi\n"
    assert not (ws / "hello.txt").exists()


async def test_cd_is_relative_to_root_and_confined(apply: Apply, ws: Path) -> None:
    (ws / "pkg" / "src").mkdir(parents=True)
    await apply(f"cd src && apply_patch <<'EOF'\n{BODY}\nEOF", root="pkg")
    assert (ws / "pkg" / "src" / "hello.txt").exists()
    outside = ws.parent / "outside"
    outside.mkdir()
    with pytest.raises(PathEscape):
        await apply(f"cd ../outside && apply_patch <<'EOF'\n{BODY}\nEOF")
    with pytest.raises(PathEscape):
        await apply(f"cd '{outside}' && apply_patch <<'EOF'\n{BODY}\nEOF")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    "patch",
    [
        f"cd sub; apply_patch <<'EOF'\n{BODY}\nEOF",
        f"cd sub && cd x && apply_patch <<'EOF'\n{BODY}\nEOF",
        f"cd sub || apply_patch <<'EOF'\n{BODY}\nEOF",
        f"cd $HOME && apply_patch <<'EOF'\n{BODY}\nEOF",
        f"cd \"$HOME\" && apply_patch <<'EOF'\n{BODY}\nEOF",
        f"cd `pwd` && apply_patch <<'EOF'\n{BODY}\nEOF",
        f"cd ~ && apply_patch <<'EOF'\n{BODY}\nEOF",
        f"cd sub && <<'EOF'\n{BODY}\nEOF",
        f"apply_patch <<'EOF' > out.txt\n{BODY}\nEOF",
        f"cat <<'EOF' | apply_patch\n{BODY}\nEOF",
        f"bash -c 'apply_patch' <<'EOF'\n{BODY}\nEOF",
        f"patch -p1 <<'EOF'\n{BODY}\nEOF",
        f"apply_patch <<'EOF'\n{BODY}\nEOF\necho done",
        f"apply_patch <<'EOF'\n{BODY}\nEND",
        f"echo hi && apply_patch <<'EOF'\n{BODY}\nEOF",
        f"apply_patch '{BODY}'",
        f"sudo apply_patch <<'EOF'\n{BODY}\nEOF",
        f"rm -rf / && apply_patch <<'EOF'\n{BODY}\nEOF",
    ],
)
async def test_other_shell_syntax_is_refused_with_nothing_written(
    apply: Apply, ws: Path, patch: str
) -> None:
    (ws / "sub").mkdir()
    before = tree(ws)
    with pytest.raises(PatchParseError) as info:
        await apply(patch)
    assert "nothing was written" in info.value.message
    assert tree(ws) == before
    assert not (ws / "out.txt").exists()
