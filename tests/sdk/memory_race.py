"""The memory server's lost-update test, with the official MCP Python SDK: N processes of one
server command, on one store, each adding its own observations to one entity at once, one
call per observation. Prints what was acknowledged and what the graph kept.

    python3 memory_race.py PROCESSES PER_PROCESS -- COMMAND [ARGS...]

The command runs with the environment given (MEMORY_FILE_PATH for the original, --db for
state-mcp). The last line: `acknowledged A kept K lost L`.
"""

import asyncio
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PROCESSES = int(sys.argv[1])
PER_PROCESS = int(sys.argv[2])
COMMAND = sys.argv[sys.argv.index("--") + 1:]


def server():
    return StdioServerParameters(command=COMMAND[0], args=COMMAND[1:], env=dict(os.environ))


async def session_of(stack_ready, work):
    async with stdio_client(server()) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await work(session, stack_ready)


async def main():
    async def create(session, _):
        await session.call_tool("create_entities", {"entities": [{"name": "shared", "entityType": "race", "observations": []}]})

    await session_of(None, create)
    start, all_ready, ready = asyncio.Event(), asyncio.Event(), []

    async def writer(n):
        async def work(session, _):
            acknowledged = 0
            ready.append(n)
            if len(ready) == PROCESSES:
                all_ready.set()
            await start.wait()
            for i in range(PER_PROCESS):
                result = await session.call_tool(
                    "add_observations", {"observations": [{"entityName": "shared", "contents": [f"p{n}-{i}"]}]}
                )
                if not result.is_error:
                    acknowledged += 1
            return acknowledged

        return await session_of(None, work)

    tasks = [asyncio.create_task(writer(n)) for n in range(PROCESSES)]
    await asyncio.wait_for(all_ready.wait(), timeout=60)  # every process started and initialized
    start.set()
    acknowledged = sum(await asyncio.gather(*tasks))

    async def read(session, _):
        result = await session.call_tool("open_nodes", {"names": ["shared"]})
        return result.structured_content["entities"][0]["observations"]

    kept = len(await session_of(None, read))
    print(f"acknowledged {acknowledged} kept {kept} lost {acknowledged - kept}")


asyncio.run(main())
