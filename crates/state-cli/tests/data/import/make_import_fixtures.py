"""Writes the fixture databases of `statectl import --from`, through the real servers.

Each server is started over stdio with the official MCP client and written to with its own
tools (never by SQL), then stopped; its SQLite file is then checkpointed into one
self-contained file, and every row of every table is dumped to expected_<server>.json for
the Rust tests to compare an import against.

The two servers need different majors of the `mcp` library (agentcheckpoint 1.0.0 uses the
low-level server API that mcp 2 removed; the sidecar's fastmcp 4 needs mcp 2), so each gets
its own virtualenv; the client runs in agentcheckpoint's:

    python3 -m venv /tmp/fx-venv && /tmp/fx-venv/bin/pip install agentcheckpoint==1.0.0 "mcp<2"
    python3 -m venv /tmp/fx-sidecar && /tmp/fx-sidecar/bin/pip install mcp-state-sidecar==0.1.0
    SIDECAR=/tmp/fx-sidecar/bin/mcp-state-sidecar /tmp/fx-venv/bin/python make_import_fixtures.py

Made on 2026-11-23 with mcp 1.30.0 (client, agentcheckpoint) and mcp 2.3.0 + fastmcp 4.1.2
(sidecar). The sidecar's expired key needs a 2 s pause, so a run takes a few seconds.
"""

import asyncio
import json
import os
import shutil
import sqlite3
import sys
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent



async def call(client: ClientSession, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    if result.isError:
        raise RuntimeError(f"{tool} {arguments}: {result.content}")
    return result


async def with_server(command: str, env: dict, work):
    # The sidecar prints "[Sidecar] ..." banners on stdout, the protocol's stream, which
    # breaks any MCP client: drop those lines and pass the rest through as they come.
    filtered = f"exec {command} | grep --line-buffered -v '^\\[Sidecar\\]'"
    params = StdioServerParameters(command="sh", args=["-c", filtered], env={**os.environ, **env})
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            await work(client)


async def agentcheckpoint(client: ClientSession):
    async def put(key, value):
        await call(client, "force_set_state", key=key, value=json.dumps(value, ensure_ascii=False))

    for step in range(1, 6):
        await put("pipeline/progress", {"step": step, "done": step == 5})
    await put("config", {"retries": 3, "backoff": [1, 2, 4], "nested": {"deep": {"ok": True}}})
    await put("config", {"retries": 5, "backoff": [1, 2, 4], "nested": {"deep": {"ok": False}}})
    await put("counter", 41)
    await put("counter", 42)
    await put("counter", 43)
    await put("greeting", "héllo 🙂 世界")
    await put("flag", True)
    await put("nothing", None)
    await put("list", [1, "two", 3.5, None, {"k": "v"}])
    await put("agents:alpha/state.v1", {"phase": "review"})
    await put("with space key", "spaces are fine")
    await put("big", {"text": "lorem ipsum " * 340})
    await put("doomed", {"soon": "gone"})
    await call(client, "delete_state", key="doomed")
    await call(client, "set_state", key="guarded", value=json.dumps({"v": 1}), expected_version=0)
    await call(client, "set_state", key="guarded", value=json.dumps({"v": 2}), expected_version=1)


async def sidecar(client: ClientSession):
    await call(client, "state_set", key="task:1", value={"status": "queued"}, agent_id="planner")
    await call(client, "state_set", key="task:1", value={"status": "running"}, agent_id="worker-1")
    await call(client, "state_set", key="task:1", value={"status": "done", "result": [1, 2]}, agent_id="worker-1")
    await call(client, "state_set", key="shared:facts:capital", value="Paris")
    await call(client, "state_set", key="shared:facts:capital", value="Paris, France", agent_id="editor")
    await call(client, "state_set", key="unicode", value={"emoji": "🚀", "cjk": "漢字"}, agent_id="planner")
    await call(client, "state_set", key="numbers", value=[3.14, -1, 0])
    await call(client, "state_set", key="long-lived", value={"keep": True}, ttl_seconds=315360000)
    await call(client, "state_set", key="short-lived", value={"keep": False}, ttl_seconds=1)
    await call(client, "state_set", key="deleted", value=1)
    await call(client, "state_delete", key="deleted")

    await call(client, "workflow_create", name="ingest", tags={"team": "data"})
    claimed = await call(client, "workflow_create", name="report", tags={})
    run = claimed.structuredContent["run_id"]
    await call(client, "workflow_claim", run_id=run, agent_id="worker-1")
    stepped = await call(client, "workflow_create", name="train", tags={"gpu": "a100"})
    run = stepped.structuredContent["run_id"]
    await call(client, "workflow_claim", run_id=run, agent_id="worker-2")
    await call(client, "workflow_checkpoint", run_id=run, step=1, output={"loss": 0.9})
    await call(client, "workflow_checkpoint", run_id=run, step=2, output={"loss": 0.4, "notes": "warm"})

    await call(client, "lease_acquire", resource_id="gpu-0", holder_id="worker-2", ttl_seconds=315360000)
    await call(client, "lease_acquire", resource_id="printer", holder_id="worker-1", ttl_seconds=60)
    await call(client, "lease_release", resource_id="printer", holder_id="worker-1")

    await call(client, "session_save", session_id="chat-1", context={"turn": 1, "topic": "billing"})
    await call(client, "session_save", session_id="chat-1", context={"turn": 2, "topic": "billing"})
    await call(client, "session_save", session_id="handoff", context={"from": "a", "to": "b", "notes": ["x"]})
    # The short-lived key's TTL runs out before the database is copied.
    time.sleep(2)


def settle(db: Path, expected: Path):
    """One self-contained file, and every row of every table as JSON."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.row_factory = sqlite3.Row
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    rows = {t: [dict(r) for r in conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2")] for t in tables}
    conn.execute("VACUUM")
    conn.close()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    expected.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")


async def main():
    work = HERE / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        ac = work / "agentcheckpoint.db"
        await with_server(os.environ.get("AGENTCHECKPOINT", str(BIN / "agentcheckpoint")), {"CHECKPOINT_DB_PATH": str(ac)}, agentcheckpoint)
        settle(ac, HERE / "expected_agentcheckpoint.json")
        shutil.move(ac, HERE / "agentcheckpoint.db")

        sc = work / "sidecar.db"
        await with_server(os.environ.get("SIDECAR", str(BIN / "mcp-state-sidecar")), {"STATE_BACKEND": "sqlite", "DB_PATH": str(sc)}, sidecar)
        settle(sc, HERE / "expected_sidecar.json")
        shutil.move(sc, HERE / "sidecar.db")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
