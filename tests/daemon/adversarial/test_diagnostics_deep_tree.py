"""``diagnostics`` on any tree the workspace can hold answers with results or a typed error.

The agent (a real process, as the exec user, through ``exec``) builds trees
1,500 levels deep: one whose paths stay under PATH_MAX and one whose paths do
not. Asked about the top, a deep folder or the deepest file, in both scopes,
the daemon answers 200 with results (and says what it left out), or a typed
error; never ``internal`` (it was: ``os.fwalk`` recursed once per level).
"""

from __future__ import annotations

from typing import Any

from airlock.client.daemon import DaemonClient
from airlock.daemon.errors import AirlockError
from tests.daemon.adversarial.agent_rig import READ, WRITE, agent_daemon
from tests.daemon.adversarial.as_exec_user import needs_root

pytestmark = needs_root

DEPTH = 1500
LONG = "n" * 20  # 1,500 levels of it: a path of 31,500 bytes, far over PATH_MAX

# One process, no fork per level (a shell loop forks mkdir 3,000 times).
BUILD = f"""
import os
for name in ("d", "{LONG}"):
    top = os.open(".", os.O_RDONLY)
    for _ in range({DEPTH}):
        os.mkdir(name)
        os.chdir(name)
    with open("x.py", "w") as f:
        f.write("x = (\\n")
    with open("notes.txt", "w") as f:
        f.write("trailing  \\n")
    os.fchdir(top)
"""


async def _answer(client: DaemonClient, paths: list[str]) -> dict[str, Any]:
    try:
        return await client.call("diagnostics", {"paths": paths})
    except AirlockError as exc:
        assert str(exc.code) != "internal", f"{paths[0][:60]}...: {exc.message}"
        return {"error": str(exc.code)}


async def test_diagnostics_on_a_1500_level_tree_never_answers_internal() -> None:
    async with agent_daemon() as rig:
        async with rig.daemon.client(WRITE) as agent:
            built = await agent.exec(argv=["/usr/bin/python3", "-c", BUILD], timeout_s=120)
            assert built.exit_code == 0, built.stderr
            await agent.exec(argv=["git", "init", "-q", "."])
        deep_dir = "/".join(["d"] * DEPTH)
        long_dir = "/".join([LONG] * DEPTH)
        for token in (WRITE, READ):
            async with rig.daemon.client(token) as client:
                top = await _answer(client, ["."])
                assert "error" not in top, top
                reasons = " ".join(s["reason"] for s in top["skipped"])
                assert "levels below . were not entered" in reasons, top["skipped"]

                deepest = await _answer(client, [f"{deep_dir}/x.py"])
                assert "error" not in deepest, deepest
                found = {(d["check"], d["path"].rsplit("/", 1)[-1]) for d in deepest["diagnostics"]}
                assert ("syntax", "x.py") in found, deepest

                if token == READ:
                    continue  # the rest is the same walk and resolver in either scope
                middle = await _answer(client, ["/".join(["d"] * 700)])
                assert "error" not in middle, middle
                for paths in ([f"{long_dir}/x.py"], ["/".join([LONG] * 400)]):
                    far = await _answer(client, paths)
                    if "error" not in far:
                        reasons = " ".join(s["reason"] for s in far["skipped"])
                        assert "internal error" not in reasons, far["skipped"]
        # The daemon is still whole.
        async with rig.daemon.client(WRITE) as client:
            assert (await client.health()).status == "ok"
