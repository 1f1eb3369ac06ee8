"""Calls every tool of every profile of `state-mcp` through the official MCP Python SDK.

The SDK checks each structured result against the tool's `outputSchema` (and raises when it
does not fit); each one is checked again here with `jsonschema`'s 2020-12 validator, so a
result with a null where the schema says "string" fails this script, as it fails an agent.
Calls include results with absent and null fields: missing keys, leases held by someone else,
runs nobody claimed.

Usage: python every_tool.py STATE_MCP_BINARY SCRATCH_DIR
Prints one line per profile and a last line `N tools called, N results checked`; exits 1 on
the first failure.
"""

import asyncio
import json
import sys
from pathlib import Path

import jsonschema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

BINARY = sys.argv[1]
SCRATCH = Path(sys.argv[2])


class Profile:
    def __init__(self, session, tools):
        self.session = session
        self.tools = {tool["name"]: tool for tool in tools}
        self.called = set()
        self.checked = 0

    async def call(self, name, arguments=None, error=False):
        """Calls `name`; returns its structured result, or its text parsed as JSON when it has one."""
        if name not in self.tools:
            raise AssertionError(f"{name} is not listed; listed: {sorted(self.tools)}")
        result = await self.session.call_tool(name, arguments or {})
        dumped = result.model_dump(by_alias=True, exclude_none=True)
        is_error = bool(dumped.get("isError"))
        text = "".join(block.get("text", "") for block in dumped.get("content", []))
        if is_error != error:
            raise AssertionError(f"{name}({json.dumps(arguments)}): isError={is_error}, expected {error}: {text}")
        self.called.add(name)
        schema = self.tools[name].get("outputSchema")
        structured = dumped.get("structuredContent")
        if schema is not None and not is_error:
            if structured is None:
                raise AssertionError(f"{name}: declares an outputSchema but returned no structuredContent")
            validator = jsonschema.Draft202012Validator(schema)
            problems = sorted(validator.iter_errors(structured), key=lambda e: list(e.path))
            if problems:
                raise AssertionError(f"{name}: result does not fit its outputSchema: {problems[0].message} in {structured}")
            self.checked += 1
        if structured is not None:
            return structured
        try:
            return json.loads(text)
        except ValueError:
            return text

    def uncalled(self):
        return sorted(set(self.tools) - self.called)


async def native(p):
    missing = await p.call("state_get", {"key": "sdk/missing"})
    assert missing["status"] == "not_found", missing
    put = await p.call("state_set", {"key": "sdk/a", "value": {"n": 1}, "expected_version": 0})
    await p.call("state_set", {"key": "sdk/a", "value": 2, "expected_version": 99})  # conflict, not an error
    await p.call("state_get", {"key": "sdk/a", "version": put["version"]})
    await p.call("state_list", {"prefix": "sdk/", "include_values": True})
    await p.call("state_batch_get", {"keys": ["sdk/a", "sdk/missing"]})
    await p.call("state_txn", {
        "compare": [{"key": "sdk/a", "version": 0}],
        "success": [{"op": "put", "key": "sdk/b", "value": 1}],
        "failure": [{"op": "get", "key": "sdk/a"}, {"op": "delete", "key": "sdk/c"}],
    })
    await p.call("history_log", {"prefix": "sdk/", "include_values": True})
    await p.call("state_watch", {"prefix": "sdk/", "after_revision": 0, "timeout_seconds": 1})
    await p.call("state_delete", {"key": "sdk/a"})
    await p.call("state_delete", {"key": "sdk/never"})

    lease = await p.call("lease_acquire", {"resource_id": "sdk/gpu", "holder_id": "w1", "ttl_seconds": 30})
    await p.call("lease_acquire", {"resource_id": "sdk/gpu", "holder_id": "w2", "ttl_seconds": 30})  # held
    await p.call("lease_renew", {"resource_id": "sdk/gpu", "holder_id": "w1", "token": lease["token"], "ttl_seconds": 30})
    await p.call("lease_get", {"resource_id": "sdk/gpu"})
    await p.call("lease_get", {"resource_id": "sdk/free"})
    await p.call("lease_list", {"prefix": "sdk/"})
    await p.call("lease_release", {"resource_id": "sdk/gpu", "holder_id": "w1", "token": lease["token"]})

    permit = await p.call("semaphore_acquire", {"name": "sdk/slots", "holder_id": "w1", "capacity": 1, "ttl_seconds": 30})
    await p.call("semaphore_acquire", {"name": "sdk/slots", "holder_id": "w2", "capacity": 1, "ttl_seconds": 30})  # full
    await p.call("semaphore_acquire", {"name": "sdk/slots", "holder_id": "w3", "capacity": 2, "ttl_seconds": 30})  # mismatch
    await p.call("semaphore_renew", {"name": "sdk/slots", "holder_id": "w1", "token": permit["token"], "ttl_seconds": 30})
    await p.call("semaphore_get", {"name": "sdk/slots"})
    await p.call("semaphore_get", {"name": "sdk/none"})
    await p.call("semaphore_list", {"prefix": "sdk/"})
    await p.call("semaphore_release", {"name": "sdk/slots", "holder_id": "w1", "token": permit["token"]})
    await p.call("semaphore_release", {"name": "sdk/slots", "holder_id": "w1", "token": permit["token"]})  # lost

    mine = await p.call("paths_reserve", {"scope": "/sdk", "holder_id": "w1", "patterns": ["src/**"], "ttl_seconds": 30, "reason": "sdk"})
    await p.call("paths_reserve", {"scope": "/sdk", "holder_id": "w2", "patterns": ["src/lib.rs"], "ttl_seconds": 30})  # conflict
    await p.call("paths_renew", {"scope": "/sdk", "holder_id": "w1", "reservation_id": mine["reservation"]["reservation_id"], "ttl_seconds": 30})
    await p.call("paths_check", {"scope": "/sdk", "holder_id": "w2", "path": "src/lib.rs"})
    await p.call("paths_list", {"scope": "/sdk"})
    await p.call("paths_scopes", {"prefix": "/sdk"})
    await p.call("paths_release", {"scope": "/sdk", "holder_id": "w1"})

    await p.call("queue_send", {"queue": "sdk/inbox", "body": {"hi": 1}, "priority": 3, "dedupe_key": "d1", "sender": "w1"})
    await p.call("queue_send", {"queue": "sdk/inbox", "body": {"hi": 2}, "dedupe_key": "d1"})  # duplicate
    await p.call("queue_peek", {"queue": "sdk/inbox"})
    await p.call("queue_list", {"prefix": "sdk/", "limit": 10})
    got = await p.call("queue_receive", {"queue": "sdk/inbox", "consumer_id": "w2"})
    await p.call("queue_nack", {"queue": "sdk/inbox", "message_id": got["message"]["message_id"], "receipt": got["message"]["receipt"]})
    got = await p.call("queue_receive", {"queue": "sdk/inbox", "consumer_id": "w2"})
    await p.call("queue_ack", {"queue": "sdk/inbox", "message_id": got["message"]["message_id"], "receipt": got["message"]["receipt"]})
    await p.call("queue_receive", {"queue": "sdk/inbox", "consumer_id": "w2"})  # empty
    await p.call("queue_redrive", {"queue": "sdk/inbox", "limit": 10})  # no dead letters

    run = await p.call("workflow_create", {"name": "sdk-job", "tags": {"team": "a"}, "input": {"x": 1}})
    await p.call("workflow_status", {"run_id": run["run_id"]})  # nobody holds it yet
    await p.call("workflow_discover", {"name": "sdk-job"})
    claim = await p.call("workflow_claim", {"agent_id": "w1", "run_id": run["run_id"]})
    held = {"run_id": run["run_id"], "agent_id": "w1", "token": claim["token"]}
    await p.call("workflow_checkpoint", {**held, "step": 1, "output": {"done": True}})
    await p.call("workflow_heartbeat", held)
    await p.call("workflow_resume", {"run_id": run["run_id"]})
    await p.call("workflow_fail", {**held, "error": "flaky", "retryable": True})
    again = await p.call("workflow_claim", {"agent_id": "w2", "name": "sdk-job"})
    await p.call("workflow_complete", {"run_id": run["run_id"], "agent_id": "w2", "token": again["token"], "result": 7})
    await p.call("workflow_status", {"run_id": run["run_id"], "wait_seconds": 5})  # finished: answers at once, with its result
    gated = await p.call("workflow_create", {"name": "sdk-gated", "depends_on": [run["run_id"]], "priority": 5, "dedupe_key": "gated"})
    await p.call("workflow_create", {"name": "sdk-gated", "dedupe_key": "gated"})  # duplicate
    parked = await p.call("workflow_claim", {"agent_id": "w3", "run_id": gated["run_id"]})
    held = {"run_id": gated["run_id"], "agent_id": "w3", "token": parked["token"]}
    await p.call("workflow_await_signal", {**held, "name": "approved"})
    await p.call("workflow_signal", {"run_id": gated["run_id"], "name": "approved", "value": {"by": "sdk"}})
    await p.call("workflow_status", {"run_id": gated["run_id"]})
    other = await p.call("workflow_create", {"name": "sdk-other"})
    await p.call("workflow_cancel", {"run_id": other["run_id"], "reason": "not needed"})
    await p.call("workflow_list", {"name": "sdk-job"})

    await p.call("session_save", {"session_id": "sdk/s1", "context": {"step": 1}})
    await p.call("session_restore", {"session_id": "sdk/s1"})
    await p.call("session_list", {"prefix": "sdk/"})

    await p.call("checkpoint_save", {"description": "wired the SDK test", "workspace": "sdk", "highlights": ["every tool"]})
    await p.call("checkpoint_restore", {"workspace": "sdk"})
    await p.call("checkpoint_search", {"query": "SDK test"})
    await p.call("checkpoint_timeline", {"range": "24h"})
    await p.call("knowledge_save", {"id": "sdk/note", "content": "Results must fit their schemas.", "keywords": ["schema"]})
    await p.call("knowledge_recall", {"query": "schemas", "max_tokens": 200})
    await p.call("knowledge_list", {"prefix": "sdk/"})
    await p.call("knowledge_delete", {"id": "sdk/note"})

    dump = await p.call("store_export", {"limit": 5})
    await p.call("store_import", {"records": dump["records"], "dry_run": True})
    await p.call("store_usage", {"prefix": "sdk/"})
    await p.call("state_health")
    await p.call("state_reset", {"confirm": "DELETE EVERYTHING"})


async def agentcheckpoint(p):
    await p.call("get_state", {"key": "missing"})
    await p.call("set_state", {"key": "job", "value": json.dumps({"step": 1}), "expected_version": 0})
    await p.call("set_state", {"key": "job", "value": "2", "expected_version": 5})  # conflict status
    await p.call("force_set_state", {"key": "job", "value": "3"})
    await p.call("get_state", {"key": "job"})
    await p.call("list_state", {"pattern": "j%"})
    await p.call("delete_state", {"key": "job"})


async def sidecar(p):
    await p.call("state_get", {"key": "missing"})  # value null
    await p.call("state_set", {"key": "k", "value": {"a": 1}})  # no agent_id: null in history
    await p.call("state_set", {"key": "k", "value": 2, "ttl_seconds": 60, "agent_id": "a1"})
    await p.call("state_get", {"key": "k"})
    await p.call("state_list", {})
    await p.call("state_list", {"prefix": "k"})
    await p.call("history_log", {"n": 10})
    await p.call("history_log", {"key": "k", "n": 1})
    await p.call("state_delete", {"key": "k"})
    await p.call("state_delete", {"key": "k"})

    created = await p.call("workflow_create", {"name": "job", "tags": {"team": "a"}})
    untagged = await p.call("workflow_create", {"name": "plain"})
    await p.call("workflow_list")  # agent_id null on unclaimed runs
    await p.call("workflow_discover", {"tags": {"team": "a"}})
    await p.call("workflow_discover", {"status": "created"})
    await p.call("workflow_status", {"run_id": created["run_id"]})  # agent_id null
    await p.call("workflow_status", {"run_id": "no-such-run"}, error=True)
    await p.call("workflow_claim", {"run_id": created["run_id"], "agent_id": "a1"})
    await p.call("workflow_claim", {"run_id": created["run_id"], "agent_id": "a2"})  # lost: reason set
    await p.call("workflow_checkpoint", {"run_id": created["run_id"], "step": 1, "output": {"x": 1}})
    await p.call("workflow_resume", {"run_id": created["run_id"]})
    await p.call("workflow_resume", {"run_id": untagged["run_id"]})

    await p.call("lease_acquire", {"resource_id": "gpu", "holder_id": "a1", "ttl_seconds": 30})  # holder set
    await p.call("lease_acquire", {"resource_id": "gpu", "holder_id": "a2", "ttl_seconds": 30})  # refused
    await p.call("lease_renew", {"resource_id": "gpu", "holder_id": "a1", "ttl_seconds": 30})
    await p.call("lease_renew", {"resource_id": "gpu", "holder_id": "a2", "ttl_seconds": 30})  # not held
    await p.call("lease_release", {"resource_id": "gpu", "holder_id": "a1"})
    await p.call("lease_release", {"resource_id": "gpu", "holder_id": "a1"})

    await p.call("session_restore", {"session_id": "none"})  # context null
    await p.call("session_save", {"session_id": "s", "context": {"turn": 3}})
    await p.call("session_restore", {"session_id": "s"})
    await p.call("sidecar_health")
    await p.call("sidecar_reset")


async def caxton(p):
    await p.call("retrieve", {"key": "missing"})
    await p.call("store", {"key": "k", "value": {"a": 1}})
    await p.call("exists", {"key": "k"})
    await p.call("list", {"prefix": ""})
    await p.call("batch_store", {"items": [["a", 1], ["b", None]]})
    await p.call("batch_retrieve", {"keys": ["a", "missing"]})
    await p.call("retrieve", {"key": "k"})
    await p.call("delete", {"key": "k"})


async def sage(p):
    await p.call("list_checkpoints")
    saved = await p.call("save_checkpoint", {"core_question": "Does it fit?", "thesis": "It fits.", "confidence": 0.8})
    await p.call("list_checkpoints", {"limit": 5})
    checkpoint_id = saved.get("checkpoint_id") or saved.get("id")
    await p.call("load_checkpoint", {"checkpoint_id": checkpoint_id})
    await p.call("save_knowledge", {"id": "fit", "content": "Schemas bind results.", "keywords": ["schema"]})
    await p.call("recall_knowledge", {"query": "schema"})
    await p.call("recall_knowledge", {"query": "nothing like it"})


async def goldfish(p):
    await p.call("checkpoint", {"description": "first save", "highlights": ["sdk"]})
    await p.call("checkpoint", {})
    await p.call("checkpoint", {"query": "save"})
    await p.call("checkpoint", {"range": "1h"})


async def memory(p):
    """The memory server's nine tools, with its shapes, as its users call them."""
    people = [{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]},
              {"name": "Engine", "entityType": "machine", "observations": []}]
    created = await p.call("create_entities", {"entities": people})
    assert [e["name"] for e in created["entities"]] == ["Ada", "Engine"], created
    again = await p.call("create_entities", {"entities": people[:1]})
    assert again["entities"] == [], again
    relations = await p.call("create_relations", {"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]})
    assert len(relations["relations"]) == 1, relations
    added = await p.call("add_observations", {"observations": [{"entityName": "Ada", "contents": ["born 1815", "wrote notes"]}]})
    assert added["results"] == [{"entityName": "Ada", "addedObservations": ["born 1815"]}], added
    await p.call("add_observations", {"observations": [{"entityName": "Nobody", "contents": ["x"]}]}, error=True)
    found = await p.call("search_nodes", {"query": "BORN"})
    assert [e["name"] for e in found["entities"]] == ["Ada"] and len(found["relations"]) == 1, found
    opened = await p.call("open_nodes", {"names": ["Engine"]})
    assert opened["entities"][0]["entityType"] == "machine" and len(opened["relations"]) == 1, opened
    await p.call("delete_observations", {"deletions": [{"entityName": "Ada", "observations": ["born 1815"]}]})
    await p.call("delete_relations", {"relations": [{"from": "Ada", "to": "Engine", "relationType": "programmed"}]})
    done = await p.call("delete_entities", {"entityNames": ["Engine"]})
    assert done == {"success": True, "message": "Entities deleted successfully"}, done
    graph = await p.call("read_graph")
    assert graph == {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote notes"]}], "relations": []}, graph


async def discovery(p):
    """The default list: the core tools and state_tools/state_call reach every group."""
    assert set(p.tools) >= {"state_get", "state_set", "state_tools", "state_call"}, sorted(p.tools)
    assert "lease_acquire" not in p.tools
    answer = await p.call("state_tools", {"enable": ["lease"]})
    names = [tool["name"] for tool in answer["tools"]]
    assert "lease_acquire" in names, answer
    await p.call("state_call", {"tool": "lease_acquire", "arguments": {"resource_id": "r", "holder_id": "h", "ttl_seconds": 5}})
    await p.call("state_call", {"tool": "no_such_tool"}, error=True)
    await p.call("state_get", {"key": "k"})
    await p.call("state_set", {"key": "k", "value": 1})
    await p.call("state_delete", {"key": "k"})
    await p.call("state_list", {})
    await p.call("state_txn", {"success": [{"op": "get", "key": "k"}]})
    await p.call("state_watch", {"key": "k", "after_revision": 0, "timeout_seconds": 0})


PROFILES = [
    ("native", ["--tools", "all"], native),
    ("default", [], discovery),
    ("agentcheckpoint", ["--compat", "agentcheckpoint"], agentcheckpoint),
    ("sidecar", ["--compat", "sidecar"], sidecar),
    ("caxton", ["--compat", "caxton"], caxton),
    ("sage", ["--compat", "sage"], sage),
    ("goldfish", ["--compat", "goldfish"], goldfish),
    ("memory", ["--compat", "memory"], memory),
]


async def run(name, args, script):
    db = SCRATCH / f"{name}.redb"
    server = StdioServerParameters(command=BINARY, args=["--db", str(db), "--standalone", "--log", "warn", *args])
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            tools = [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]
            profile = Profile(session, tools)
            await script(profile)
            if profile.uncalled():
                raise AssertionError(f"{name}: no call of {profile.uncalled()}")
            print(f"{name}: {len(profile.called)} tools called, {profile.checked} results checked against their outputSchema")
            return len(profile.called), profile.checked


async def main():
    SCRATCH.mkdir(parents=True, exist_ok=True)
    called = checked = 0
    for name, args, script in PROFILES:
        c, k = await run(name, args, script)
        called += c
        checked += k
    print(f"{called} tools called, {checked} results checked")


def first_failure(error):
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except BaseException as error:  # noqa: BLE001 - the SDK wraps failures in task groups
        failure = first_failure(error)
        print(f"FAILED: {type(failure).__name__}: {failure}")
        sys.exit(1)
