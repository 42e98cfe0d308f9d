"""The swap race: a directory swapped for a symlink, atomically and in a loop.

An attacker process exchanges ``ws/sub`` (a real directory) with ``ws/link`` (a
symlink to a canary tree outside the workspace) with ``renameat2(RENAME_EXCHANGE)``
as fast as it can, while clients hammer every reading and writing tool through
``sub/`` at the same time for one 15 s window. Whatever the timing, no tool may
read or write one byte outside: the canary tree must be byte-identical afterwards
(no new files either), and no response may carry its content or its names.
Run once with openat2 and once with the forced component walk.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from airlock.client.daemon import DaemonClient
from tests.daemon.adversarial.conftest import attacker, daemon_for, outcome, tree_digest

WINDOW_S = 15.0
# Only the outside tree holds this token (content and a file name); the tools'
# arguments never contain it, so any response that does leaked it from outside.
# Not hex: a random incident id in an error message must never look like a leak.
TOKEN = "zqx7731"
CANARY = f"zq-canary-{TOKEN}"
INSIDE = {
    "a.txt": "inside a\n",
    "b.txt": "inside b\n",
    "p.txt": "v0\n",
    "m1.txt": "m0\n",
    "m2.txt": "m0\n",
    "ap.txt": "ap0\n",
    "w.txt": "w\n",
    # A syntax error's message quotes the text around it: checked outside, it would
    # carry the canary (the outside copy is written below).
    "bad.js": "let inside = (1\n",
}


def build(tmp: Path) -> tuple[Path, Path]:
    ws, outside = tmp / "ws", tmp / "outside"
    (ws / "sub").mkdir(parents=True)
    (outside / "sub" / "deeper").mkdir(parents=True)
    for name, text in INSIDE.items():
        (ws / "sub" / name).write_text(text)
        # Same names outside, holding every string the edits below look for, so an
        # edit that escaped would match and change the canary tree.
        (outside / "sub" / name).write_text(f"{CANARY}\ninside a\nv0\nv1\nm0\nm1\nap0\nap1\nw\n")
    (outside / "sub" / "bad.js").write_text(f"x = ({CANARY} {TOKEN}\n")
    (outside / "sub" / f"only-outside-{TOKEN}.txt").write_text(f"{CANARY}\n")
    (outside / "sub" / "deeper" / "x.txt").write_text(f"{CANARY}\n")
    (outside / "secret.txt").write_text(f"{CANARY}\n")
    (ws / "link").symlink_to(outside / "sub")
    return ws, outside


Step = Callable[[DaemonClient, int], Awaitable[Any]]


def _toggle(a: str, b: str, i: int) -> tuple[str, str]:
    return (a, b) if i % 2 == 0 else (b, a)


def steps() -> dict[str, Step]:
    """One call per tool; the edits toggle between two states so they can repeat."""

    async def read(c: DaemonClient, i: int) -> Any:
        return await c.call("file_read", {"path": "sub/a.txt"})

    async def multi_read(c: DaemonClient, i: int) -> Any:
        return await c.call("file_multi_read", {"paths": ["sub/a.txt", "sub/b.txt", "sub"]})

    async def listing(c: DaemonClient, i: int) -> Any:
        return await c.call("file_list", {"path": "sub" if i % 2 else ".", "depth": 3})

    async def search(c: DaemonClient, i: int) -> Any:
        mode = ("content", "files_with_matches", "count")[i % 3]
        return await c.call(
            "file_search",
            {
                "pattern": "zq-canary" if i % 2 else "inside",
                "path": "sub" if i % 4 < 2 else ".",
                "output_mode": mode,
                "include_ignored": True,
            },
        )

    async def write(c: DaemonClient, i: int) -> Any:
        if i % 2:
            return await c.call("file_write", {"path": f"sub/w-{i}.txt", "content": "new\n"})
        return await c.call("file_write", {"path": "sub/w.txt", "content": f"w {i}\n"})

    async def patch(c: DaemonClient, i: int) -> Any:
        old, new = _toggle("v0", "v1", i)
        return await c.call(
            "file_patch", {"path": "sub/p.txt", "old_string": old, "new_string": new}
        )

    async def multi_patch(c: DaemonClient, i: int) -> Any:
        old, new = _toggle("m0", "m1", i)
        edits = [
            {"path": "sub/m1.txt", "old_string": old, "new_string": new},
            {"path": "sub/m2.txt", "old_string": old, "new_string": new},
        ]
        return await c.call("file_multi_patch", {"edits": edits})

    async def apply(c: DaemonClient, i: int) -> Any:
        old, new = _toggle("ap0", "ap1", i)
        body = "\n".join(
            [
                "*** Begin Patch",
                f"*** Add File: sub/add-{i}.txt",
                "+added",
                "*** Update File: sub/ap.txt",
                "@@",
                f"-{old}",
                f"+{new}",
                "*** End Patch",
            ]
        )
        return await c.call("apply_patch", {"patch": body + "\n"})

    async def diagnostics(c: DaemonClient, i: int) -> Any:
        # A file, and a folder (expanded by a walk of its own), in turn.
        paths = ["sub/bad.js"] if i % 2 else ["sub"]
        return await c.call("diagnostics", {"paths": paths, "checks": ["syntax", "whitespace"]})

    async def preview(c: DaemonClient, i: int) -> Any:
        edits = [{"path": "sub/a.txt", "old_string": "inside a", "new_string": "outside?"}]
        return await c.call("file_diff_preview", {"edits": edits})

    return {
        "file_read": read,
        "file_multi_read": multi_read,
        "file_list": listing,
        "file_search": search,
        "file_write": write,
        "file_patch": patch,
        "file_multi_patch": multi_patch,
        "apply_patch": apply,
        "file_diff_preview": preview,
        "diagnostics": diagnostics,
    }


async def _hammer(
    socket: str, name: str, step: Step, deadline: float, results: Counter[str], leaks: list[str]
) -> None:
    loop = asyncio.get_running_loop()
    async with DaemonClient(socket=socket) as client:
        for i in itertools.count():
            if loop.time() >= deadline:
                return
            code, text = await outcome(functools.partial(step, client, i))
            results[f"{name}:{code}"] += 1
            results[name] += 1
            if TOKEN in text:
                leaks.append(f"{name} #{i} ({code}): {text[:300]}")


async def test_swap_race_never_leaves_the_workspace(tmp_path: Path, resolver: str) -> None:
    ws, outside = build(tmp_path)
    canary_before = tree_digest(outside)
    results: Counter[str] = Counter()
    leaks: list[str] = []
    async with daemon_for(ws, resolver) as daemon, attacker(ws / "sub", ws / "link") as proc:
        deadline = asyncio.get_running_loop().time() + WINDOW_S
        await asyncio.gather(
            *(
                _hammer(str(daemon.socket), name, step, deadline, results, leaks)
                for name, step in steps().items()
            )
        )
        assert proc.returncode is None, "the attacker stopped early"
    assert leaks == [], f"{len(leaks)} responses carried outside content: {leaks[:5]}"
    assert tree_digest(outside) == canary_before, "the canary tree outside was changed"
    # A path swapped under a call is the caller's race: a typed error (conflict,
    # path_escape, not_found...) that says to retry, never "internal".
    internal = {k: v for k, v in results.items() if k.endswith(":internal")}
    assert internal == {}, f"calls answered internal under the race: {internal}"
    for name in steps():
        assert results[name] > 0, f"{name} never ran: {dict(results)}"
    # The race is real: with the attacker on, some calls land inside and succeed.
    assert results["file_read:ok"] > 0, dict(results)
    print(f"[{resolver}] calls: {dict(sorted(results.items()))}")
