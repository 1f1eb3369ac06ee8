"""Two worker processes, one thread: LangGraph issue #8796, and recovery from a killed worker.

    STATE_URL=http://127.0.0.1:7478 python clients/python/tests/two_writers.py

Scenario 1 (the saver's API, as the issue describes it). Worker A writes three checkpoints of a
thread and keeps it (`hold`, renewing a 1.5 s lease). Worker B reads the thread and tries to
append: it must get ThreadBusyError, not a second child of A's last checkpoint. A writes a
fourth checkpoint and is killed (SIGKILL: no release). B retries the append it prepared from
its old read: once A's lease expires B gets the lease, but the thread changed since B read it,
so it must get ThreadBusyError again (reason "changed") instead of forking. B reads again and
continues the chain from A's last checkpoint. The thread's history must be one chain.

Scenario 2 (a real graph). A StateGraph plan -> slow -> finish is compiled with StateSaver and
run with durability="sync" (every step stored before the next starts); worker 1 runs it and is
killed with SIGKILL while `slow` runs. Worker 2 starts at once on the
same thread_id, is refused while the dead worker's lease lives, then resumes from the last
checkpoint and finishes: `plan` ran once, the result is plan, slow, finish, and the history is
one chain.

Exits 0 with a summary, or 1 with what went wrong.
"""

from __future__ import annotations

import json
import operator
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Annotated, Any, TypedDict, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.state import StateSaver, ThreadBusyError
from langgraph.graph import END, START, StateGraph
from state_client import Client

STATE_URL = os.environ.get("STATE_URL", "http://127.0.0.1:7478")
LEASE_TTL = 1.5
WAIT = 30.0


class Failure(Exception):
    """The scenario did not go as it must."""


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def wait_for(command: str) -> None:
    line = sys.stdin.readline()
    if line.strip() != command:
        raise SystemExit(f"expected {command!r} on stdin, got {line!r}")


# ---- scenario 1: the saver's API ---------------------------------------------------------


def append(saver: StateSaver, thread_id: str, parent: str | None, step: int, writer: str) -> str:
    """Write one checkpoint as a child of `parent`; its id."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=step))
    version = saver.get_next_version(None, None)
    checkpoint["channel_values"] = {"n": step}
    checkpoint["channel_versions"] = {"n": version}
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if parent is not None:
        configurable["checkpoint_id"] = parent
    stored = saver.put(
        {"configurable": configurable},
        checkpoint,
        cast(CheckpointMetadata, {"source": "loop", "step": step, "parents": {}, "writer": writer}),
        {"n": version},
    )
    return stored["configurable"]["checkpoint_id"]


def worker_a(prefix: str, thread_id: str) -> None:
    saver = StateSaver(Client(STATE_URL), prefix=prefix, lease_ttl=LEASE_TTL, holder_id=f"worker-A/pid-{os.getpid()}")
    with saver.hold(thread_id):
        ids: list[str] = []
        for step in range(3):
            ids.append(append(saver, thread_id, ids[-1] if ids else None, step, "A"))
        emit("ready", ids=ids)
        wait_for("more")
        ids.append(append(saver, thread_id, ids[-1], 3, "A"))
        emit("wrote", id=ids[-1])
        wait_for("never")  # killed here, holding the thread


def worker_b(prefix: str, thread_id: str) -> None:
    saver = StateSaver(Client(STATE_URL), prefix=prefix, lease_ttl=LEASE_TTL, holder_id=f"worker-B/pid-{os.getpid()}")
    latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    if latest is None:
        raise SystemExit("worker B found no checkpoint to continue")
    read = latest.config["configurable"]["checkpoint_id"]
    try:
        forked = append(saver, thread_id, read, 3, "B")
        emit("wrote", id=forked)
    except ThreadBusyError as busy:
        emit("busy", reason=busy.reason, holder=busy.holder, expires_at=busy.expires_at, message=str(busy))
    wait_for("retry")
    # The append prepared from the old read, retried until the dead worker's lease is gone.
    deadline = time.monotonic() + WAIT
    while True:
        try:
            forked = append(saver, thread_id, read, 4, "B")
            emit("wrote", id=forked)
            return
        except ThreadBusyError as busy:
            if busy.reason == "changed":
                emit("changed", holder=busy.holder, message=str(busy))
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    latest = saver.get_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    assert latest is not None
    parent = latest.config["configurable"]["checkpoint_id"]
    ids = [append(saver, thread_id, parent, 4, "B")]
    ids.append(append(saver, thread_id, ids[-1], 5, "B"))
    emit("continued", read=parent, ids=ids)
    saver.close()


# ---- scenario 2: a graph whose worker is killed --------------------------------------------


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


def _ran(node: str) -> None:
    with open(os.environ["TWO_WRITERS_LOG"], "a") as log:
        log.write(f"{node} {os.getpid()}\n")


def plan(state: State) -> dict[str, Any]:
    _ran("plan")
    return {"steps": ["plan"]}


def slow(state: State) -> dict[str, Any]:
    _ran("slow")
    Path(os.environ["TWO_WRITERS_STARTED"]).touch()
    release = Path(os.environ["TWO_WRITERS_RELEASE"])
    while not release.exists():  # worker 1 is killed while it waits here
        time.sleep(0.05)
    return {"steps": ["slow"]}


def finish(state: State) -> dict[str, Any]:
    _ran("finish")
    return {"steps": ["finish"]}


def build_graph() -> StateGraph:
    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("slow", slow)
    builder.add_node("finish", finish)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "slow")
    builder.add_edge("slow", "finish")
    builder.add_edge("finish", END)
    return builder


def graph_worker(prefix: str, thread_id: str, name: str) -> None:
    saver = StateSaver(Client(STATE_URL), prefix=prefix, lease_ttl=LEASE_TTL, holder_id=f"{name}/pid-{os.getpid()}")
    graph = build_graph().compile(checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    refusals = 0
    deadline = time.monotonic() + WAIT
    while True:
        try:
            # Claim the thread before any node runs; the lease is renewed while nodes work.
            with saver.hold(thread_id):
                snapshot = graph.get_state(config)
                resumed = bool(snapshot.values)
                emit("running", resumed=resumed, next=list(snapshot.next))
                # durability="sync": each step's checkpoint is stored before the next step
                # starts, so a kill loses at most the step that was running.
                result = graph.invoke(None if resumed else {"steps": []}, config, durability="sync")
            break
        except ThreadBusyError as busy:
            refusals += 1
            if refusals == 1:
                emit("busy", reason=busy.reason, holder=busy.holder, expires_at=busy.expires_at, message=str(busy))
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    emit("done", steps=result["steps"], refusals=refusals)
    saver.close()


# ---- the parent ----------------------------------------------------------------------------


class Worker:
    """A child `python` process speaking JSON lines."""

    def __init__(self, *args: str, env: dict[str, str] | None = None):
        self.name = args[0]
        self.process = subprocess.Popen(
            [sys.executable, __file__, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_errors, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)

    def expect(self, event: str, timeout: float = WAIT) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise Failure(f"{self.name}: no {event!r} within {timeout} s") from None
            if line is None:
                self.process.wait(timeout=5)
                raise Failure(
                    f"{self.name} exited ({self.process.returncode}) before {event!r}:\n" + "".join(self.errors[-30:])
                )
            message = json.loads(line)
            if message["event"] == event:
                return message
            raise Failure(f"{self.name}: expected {event!r}, got {message}")

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def finish(self) -> None:
        try:
            self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure(f"{self.name} did not exit") from None
        if self.process.returncode != 0:
            raise Failure(f"{self.name} exited {self.process.returncode}:\n" + "".join(self.errors[-30:]))


def history(prefix: str, thread_id: str) -> list[CheckpointTuple]:
    with Client(STATE_URL) as client:
        saver = StateSaver(client, prefix=prefix)
        return list(saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}))


def check_one_chain(tuples: list[CheckpointTuple]) -> list[str]:
    """The ids oldest first, if the checkpoints form one chain; Failure otherwise."""
    parent_of = {
        t.config["configurable"]["checkpoint_id"]: (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        for t in tuples
    }
    roots = [cid for cid, parent in parent_of.items() if parent is None]
    children: dict[str, list[str]] = {}
    for cid, parent in parent_of.items():
        if parent is not None:
            children.setdefault(parent, []).append(cid)
    forks = {parent: kids for parent, kids in children.items() if len(kids) > 1}
    if forks:
        raise Failure(f"the thread forked: {forks}")
    if len(roots) != 1:
        raise Failure(f"expected one root checkpoint, found {roots}")
    chain = [roots[0]]
    while chain[-1] in children:
        chain.append(children[chain[-1]][0])
    if len(chain) != len(parent_of):
        raise Failure(f"checkpoints outside the chain: {set(parent_of) - set(chain)}")
    return chain


def scenario_api(prefix: str) -> list[str]:
    thread_id = f"issue-8796/{uuid.uuid4().hex[:6]}"
    a = Worker("worker-a", prefix, thread_id)
    b: Worker | None = None
    try:
        ready = a.expect("ready")
        b = Worker("worker-b", prefix, thread_id)
        busy = b.expect("busy")
        if busy["reason"] != "held" or not str(busy["holder"]).startswith("worker-A"):
            raise Failure(f"worker B was refused for the wrong reason: {busy}")
        a.send("more")
        fourth = a.expect("wrote")["id"]
        a.kill()
        killed_at = time.monotonic()
        b.send("retry")
        changed = b.expect("changed", timeout=LEASE_TTL + WAIT)
        took_over_after = time.monotonic() - killed_at
        continued = b.expect("continued")
        b.finish()
    finally:
        for worker in (a, b):
            if worker is not None and worker.process.poll() is None:
                worker.kill()
    if continued["read"] != fourth:
        raise Failure(f"worker B continued from {continued['read']}, not from A's last checkpoint {fourth}")
    chain = check_one_chain(history(prefix, thread_id))
    expected = [*ready["ids"], fourth, *continued["ids"]]
    if chain != expected:
        raise Failure(f"the chain is {chain}, expected {expected}")
    return [
        f"worker B, while A held the thread: ThreadBusyError(held): {busy['message']}",
        f"worker B's stale append after A was killed: ThreadBusyError(changed) {took_over_after:.1f} s later: "
        f"{changed['message']}",
        f"worker B reloaded and continued from A's last checkpoint; history: one chain of {len(chain)} "
        f"(A wrote 4, B wrote 2), no fork",
    ]


def scenario_graph(prefix: str, workdir: Path) -> list[str]:
    thread_id = f"graph/{uuid.uuid4().hex[:6]}"
    env = {
        "TWO_WRITERS_LOG": str(workdir / "ran.log"),
        "TWO_WRITERS_STARTED": str(workdir / "slow.started"),
        "TWO_WRITERS_RELEASE": str(workdir / "slow.release"),
    }
    first = Worker("graph-worker", prefix, thread_id, "worker-1", env=env)
    second: Worker | None = None
    try:
        started = first.expect("running")
        if started["resumed"]:
            raise Failure(f"worker 1 found the new thread already started: {started}")
        deadline = time.monotonic() + WAIT
        while not Path(env["TWO_WRITERS_STARTED"]).exists():
            if time.monotonic() > deadline or first.process.poll() is not None:
                raise Failure("worker 1 never reached the slow node:\n" + "".join(first.errors[-30:]))
            time.sleep(0.02)
        first.kill()
        Path(env["TWO_WRITERS_RELEASE"]).touch()
        second = Worker("graph-worker", prefix, thread_id, "worker-2", env=env)
        first_answer = second.lines.get(timeout=WAIT)
        if first_answer is None:
            raise Failure("worker 2 exited at once:\n" + "".join(second.errors[-30:]))
        message = json.loads(first_answer)
        busy = message if message["event"] == "busy" else None
        running = second.expect("running") if busy else message
        if running["event"] != "running" or not running["resumed"] or running["next"] != ["slow"]:
            raise Failure(f"worker 2 should resume at the slow node: {running}")
        done = second.expect("done")
        second.finish()
    finally:
        for worker in (first, second):
            if worker is not None and worker.process.poll() is None:
                worker.kill()
    if done["steps"] != ["plan", "slow", "finish"]:
        raise Failure(f"the run's result is {done['steps']}, expected ['plan', 'slow', 'finish']")
    ran = [line.split()[0] for line in Path(env["TWO_WRITERS_LOG"]).read_text().splitlines()]
    if ran.count("plan") != 1 or ran.count("finish") != 1 or ran.count("slow") != 2:
        raise Failure(f"nodes ran {ran}: plan and finish once each, slow twice (killed, then resumed)")
    chain = check_one_chain(history(prefix, thread_id))
    lines = []
    if busy:
        lines.append(
            f"worker 2, while the killed worker's lease lived: ThreadBusyError(held), "
            f"waited ({done['refusals']} refusals)"
        )
    lines.append(
        f"worker 2 resumed at 'slow' and finished: {done['steps']}; nodes ran {ran}; history: one chain of {len(chain)}"
    )
    return lines


def main() -> int:
    with Client(STATE_URL) as probe:
        if not probe.healthz():
            print(f"no state server answers at {STATE_URL} (set STATE_URL)", file=sys.stderr)
            return 2
    prefix = f"two-writers/{uuid.uuid4().hex[:8]}/"
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"two-writers-{uuid.uuid4().hex[:8]}"
    workdir.mkdir(parents=True)
    try:
        summary = ["scenario 1, the saver API (LangGraph #8796):", *("  " + s for s in scenario_api(prefix))]
        summary += [
            "scenario 2, a StateGraph whose worker is SIGKILLed mid-node:",
            *("  " + s for s in scenario_graph(prefix, workdir)),
        ]
    except Failure as failure:
        print(f"FAILED: {failure}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"two_writers against {STATE_URL}, lease_ttl {LEASE_TTL} s, key prefix {prefix}")
    print("\n".join(summary))
    print("PASSED")
    return 0


if __name__ == "__main__":
    role = sys.argv[1] if len(sys.argv) > 1 else "main"
    if role == "worker-a":
        worker_a(sys.argv[2], sys.argv[3])
    elif role == "worker-b":
        worker_b(sys.argv[2], sys.argv[3])
    elif role == "graph-worker":
        graph_worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
