"""`StateSaver`: LangGraph checkpoints in a state server, written by one worker per thread."""

from __future__ import annotations

import asyncio
import base64
import builtins
import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from state_client import AsyncClient, Client, ConflictError, FencedError, NotFoundError

from ._errors import ThreadBusyError
from ._keys import ascending, checked, descending, escape, unescape
from ._plan import AsyncRunner, Emit, Plan, SyncRunner, call, gather, make_call

try:
    from langgraph.checkpoint.base import writes_sort_key
except ImportError:  # langgraph-checkpoint before writes_sort_key: the same order, spelled out

    def writes_sort_key(task_path: str, task_id: str = "", idx: int = 0) -> tuple[str, str, int]:
        return (task_path, task_id, idx)


logger = logging.getLogger(__name__)

DEFAULT_PREFIX = "langgraph/"
DEFAULT_LEASE_TTL = 30.0

# A transaction holds at most 128 compares and 128 operations per branch (the server's
# MAX_TXN_OPS); one of each is kept for the thread's owner record.
_TXN_OPS = 127
_BATCH_KEYS = 1000
_PAGE = 1000
# Observations of threads this saver read but does not hold, kept for the continuity check.
_KNOWN_THREADS = 10_000


@dataclass
class _Hold:
    """This saver's lease on one thread, as far as it knows."""

    token: int
    deadline: float  # time.monotonic() until which the lease is surely still ours
    expires_at: str
    claimed: bool = False  # the owner record carries this token


@dataclass
class _Stored:
    """One checkpoint record read from the server, its chunks joined."""

    thread_id: str
    key: str
    value: dict[str, Any]
    metadata: CheckpointMetadata | None = None


class _Layout:
    """Where everything lives under the saver's prefix (see `_keys` for the escaping):

        {p}threads/{thread}/owner                                  who last wrote, for continuity
        {p}threads/{thread}/checkpoints/{ns}/{desc id}             a checkpoint, newest first
        {p}threads/{thread}/writes/{ns}/{desc id}/{task}/{idx}     a pending write
        {p}threads/{thread}/blobs/{ns}/{channel}/{version}         a channel value
        {p}runs/{run}/{thread}/{ns}/{desc id}                      run index for delete_for_runs
        lease {p}lease/{thread}                                    one writer per thread

    A value too large for one key continues in `{key}/1`, `{key}/2`, ... (chunks)."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def threads(self) -> str:
        return f"{self.prefix}threads/"

    def thread(self, tid: str) -> str:
        return f"{self.prefix}threads/{escape(tid)}/"

    def owner(self, tid: str) -> str:
        return checked(self.thread(tid) + "owner", f"thread {tid!r}")

    def checkpoints(self, tid: str, ns: str | None = None) -> str:
        base = self.thread(tid) + "checkpoints/"
        return base if ns is None else base + escape(ns) + "/"

    def checkpoint(self, tid: str, ns: str, cid: str) -> str:
        return checked(self.checkpoints(tid, ns) + descending(cid), f"checkpoint {cid!r} of thread {tid!r}")

    def writes(self, tid: str, ns: str | None = None, cid: str | None = None) -> str:
        base = self.thread(tid) + "writes/"
        if ns is None:
            return base
        base += escape(ns) + "/"
        return base if cid is None else base + descending(cid) + "/"

    def write(self, tid: str, ns: str, cid: str, task_id: str, idx: int) -> str:
        return checked(self.writes(tid, ns, cid) + f"{escape(task_id)}/{idx}", f"a write of task {task_id!r}")

    def blobs(self, tid: str, ns: str | None = None) -> str:
        base = self.thread(tid) + "blobs/"
        return base if ns is None else base + escape(ns) + "/"

    def blob(self, tid: str, ns: str, channel: str, version: Any) -> str:
        return checked(
            self.blobs(tid, ns) + f"{escape(channel)}/{escape(_version_text(version))}", f"channel {channel!r}"
        )

    def runs(self, run_id: str) -> str:
        return f"{self.prefix}runs/{escape(run_id)}/"

    def run_entry(self, run_id: str, tid: str, ns: str, cid: str) -> str:
        return checked(f"{self.runs(run_id)}{escape(tid)}/{escape(ns)}/{descending(cid)}", f"run {run_id!r}")

    def lease(self, tid: str) -> str:
        return checked(f"{self.prefix}lease/{escape(tid)}", f"the lease of thread {tid!r}")

    def split(self, key: str) -> tuple[str, str, list[str]] | None:
        """(thread id, kind, remaining raw segments) of a key under `threads/`."""
        root = self.threads()
        if not key.startswith(root):
            return None
        parts = key[len(root) :].split("/")
        if len(parts) < 2:
            return None
        return unescape(parts[0]), parts[1], parts[2:]


def _version_text(version: Any) -> str:
    # Versions are str, int or float; LangGraph compares 1 and 1.0 as equal, so they share a key.
    if isinstance(version, float) and version.is_integer():
        return str(int(version))
    return str(version)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _typed(value: dict[str, Any]) -> tuple[str, bytes]:
    return value["t"], base64.b64decode(value.get("d") or "")


def _put(key: str, value: Any) -> dict[str, Any]:
    return {"op": "put", "key": key, "value": value}


def _delete(key: str) -> dict[str, Any]:
    return {"op": "delete", "key": key}


def _size(op: dict[str, Any]) -> int:
    return len(json.dumps(op, separators=(",", ":"), ensure_ascii=False).encode("utf-8")) + 1


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _default_holder() -> str:
    host = socket.gethostname()[:64] or "host"
    return f"{host}/pid-{os.getpid()}/{uuid.uuid4().hex[:12]}"


class StateSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps threads in a `state` server, one writer per thread.

    Checkpoints, pending writes and channel values are keys under `prefix` (default
    `langgraph/`); a checkpoint and its bookkeeping are written in one transaction, so a reader
    never sees half of one. Values go through `self.serde` (LangGraph's serializer) and are
    stored base64-encoded in JSON.

    **One writer per thread.** Before writing a thread (put, put_writes, delete_thread, the
    target of copy_thread, prune, delete_for_runs) the saver takes the lease
    `{prefix}lease/{thread}` for `lease_ttl` seconds, renews it on a write once less than half
    remains, and sends every write of the thread fenced by that lease's token. A thread another
    saver holds raises `ThreadBusyError` instead of writing, and so does a write whose lease
    lapsed and went to someone else, or a write to a thread that another worker wrote after
    this saver last read it: the thread's history never forks. A worker that dies without
    releasing keeps its threads until their leases expire (at most `lease_ttl` seconds after
    its last write or heartbeat); then the next worker gets them and continues from the last
    checkpoint. `close()` (or leaving `with`) releases every lease at once, `release(thread_id)`
    one, and `hold(thread_id)` claims a thread for a block, renewing it in the background.

    Built from a `state_client.Client` for the blocking methods and/or an `AsyncClient` for the
    `a*` ones; with only a `Client`, the async methods run it in a worker thread. `from_url`
    builds both.

        with StateSaver.from_url("http://127.0.0.1:7478") as saver:
            graph = builder.compile(checkpointer=saver)
            with saver.hold("thread-1"):
                graph.invoke(inputs, {"configurable": {"thread_id": "thread-1"}})
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        aclient: AsyncClient | None = None,
        prefix: str = DEFAULT_PREFIX,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        holder_id: str | None = None,
        serde: SerializerProtocol | None = None,
        max_value_bytes: int = 1024 * 1024,
        max_request_bytes: int = 4 * 1024 * 1024,
        owns_clients: bool = False,
    ) -> None:
        """
        Args:
            client: Blocking client, for `get_tuple`, `put`, `invoke`...
            aclient: Async client, for `aget_tuple`, `aput`, `ainvoke`...
            prefix: Key prefix of everything this saver stores; savers that share a prefix
                share threads (and their leases).
            lease_ttl: Seconds a thread stays this saver's after its last write (or heartbeat
                under `hold`); also how long a dead worker keeps its threads.
            holder_id: This saver's name in leases and in `ThreadBusyError` messages (default:
                host, pid and a random suffix, unique per saver).
            serde: LangGraph serializer (default: LangGraph's JsonPlusSerializer).
            max_value_bytes: The server's largest value (its `--max-value-bytes`, 1 MiB by
                default); larger checkpoints are split over several keys.
            max_request_bytes: Largest transaction body to send (the server refuses bodies over
                its `--max-body-bytes`, 8 MiB by default).
            owns_clients: Close the clients on `close()`/`aclose()`.
        """
        super().__init__(serde=serde)
        if client is None and aclient is None:
            raise TypeError("StateSaver needs a state_client.Client, an AsyncClient, or both (see StateSaver.from_url)")
        if lease_ttl <= 0:
            raise ValueError(f"lease_ttl must be positive seconds; got {lease_ttl!r}")
        self.client = client
        self.aclient = aclient
        self.prefix = prefix
        self.lease_ttl = float(lease_ttl)
        self.holder_id = holder_id or _default_holder()
        self.max_value_bytes = max_value_bytes
        self.max_request_bytes = max_request_bytes
        self._owns_clients = owns_clients
        self._layout = _Layout(prefix)
        self._sync = SyncRunner(client, type(self).__name__)
        self._async = AsyncRunner(aclient, self._sync)
        self._lock = threading.RLock()
        self._holds: dict[str, _Hold] = {}
        self._known: OrderedDict[str, int] = OrderedDict()
        self._pins: dict[str, int] = defaultdict(int)
        self._heartbeat: threading.Thread | None = None
        self._stop = threading.Event()

    @classmethod
    def from_url(
        cls,
        url: str | None = None,
        token: str | None = None,
        **kwargs: Any,
    ) -> StateSaver:
        """A saver with its own `Client` and `AsyncClient` for `url` (default $STATE_URL, then
        http://127.0.0.1:7478) and `token` (default $STATE_TOKEN), closed with the saver. Other
        keyword arguments are the constructor's."""
        return cls(Client(url, token=token), aclient=AsyncClient(url, token=token), owns_clients=True, **kwargs)

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> StateSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> StateSaver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        """Release every thread this saver holds (other workers may write them at once) and
        close the clients it owns."""
        self._stop_heartbeat()
        held = self._held_threads()
        if self.client is None and held:
            logger.warning(
                "StateSaver.close() cannot release threads without a blocking client; use aclose(). "
                "Threads %s stay held until their leases expire.",
                held,
            )
        elif held:
            for tid in held:
                self._release_quietly(self._sync.run, tid)
        if self._owns_clients and self.client is not None:
            self.client.close()

    async def aclose(self) -> None:
        """As `close`, for async code."""
        self._stop_heartbeat()
        for tid in self._held_threads():
            try:
                await self._async.run(self._release_plan(tid))
            except Exception as error:  # the lease expires by itself; say so and go on
                logger.warning("could not release thread %r (its lease will expire): %s", tid, error)
        if self._owns_clients:
            if self.aclient is not None:
                await self.aclient.aclose()
            if self.client is not None:
                self.client.close()

    def _release_quietly(self, run: Callable[[Plan[None]], None], tid: str) -> None:
        try:
            run(self._release_plan(tid))
        except Exception as error:  # the lease expires by itself; never hide the caller's error
            logger.warning("could not release thread %r (its lease will expire): %s", tid, error)

    def release(self, thread_id: str) -> None:
        """Give up this saver's lease on a thread now, so another worker may write it without
        waiting for the lease to expire."""
        self._sync.run(self._release_plan(str(thread_id)))

    async def arelease(self, thread_id: str) -> None:
        """As `release`, for async code."""
        await self._async.run(self._release_plan(str(thread_id)))

    @contextmanager
    def hold(self, thread_id: str) -> Iterator[None]:
        """Claim a thread for the block: raise ThreadBusyError now if another worker has it
        (before any node runs), keep the lease renewed in the background however long the
        nodes take, and release it at the end.

            with saver.hold(thread_id):
                graph.invoke(inputs, {"configurable": {"thread_id": thread_id}})
        """
        tid = str(thread_id)
        self._sync.run(self._lease_plan(tid))
        self._pin(tid)
        self._start_heartbeat()
        try:
            yield
        finally:
            if self._unpin(tid) == 0:
                self._release_quietly(self._sync.run, tid)

    @asynccontextmanager
    async def ahold(self, thread_id: str) -> AsyncIterator[None]:
        """As `hold`, for async code (the renewing runs as a task of the event loop)."""
        tid = str(thread_id)
        await self._async.run(self._lease_plan(tid))
        self._pin(tid)
        task = asyncio.create_task(self._aheartbeat(tid))
        try:
            yield
        finally:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task
            if self._unpin(tid) == 0:
                try:
                    await self._async.run(self._release_plan(tid))
                except Exception as error:  # never hide the block's own exception
                    logger.warning("could not release thread %r (its lease will expire): %s", tid, error)

    # ---- BaseCheckpointSaver ---------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint `config` names, or the thread's newest in its namespace."""
        return self._sync.run(self._get_tuple_plan(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._async.run(self._get_tuple_plan(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by id, across namespaces when `config` names none, across
        threads when there is no `config`), filtered by metadata equality."""
        return self._sync.iterate(self._list_plan(config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in self._async.iterate(self._list_plan(config, filter, before, limit)):
            yield item

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint (and the channel values of `new_versions`) as a child of the
        checkpoint `config` names; ThreadBusyError if another worker owns the thread."""
        return self._sync.run(self._put_plan(config, checkpoint, metadata, new_versions))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._async.run(self._put_plan(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against a checkpoint; a write already stored under the same
        (task, index) is kept, except for the special channels (errors, interrupts...), which
        are replaced, as in InMemorySaver."""
        self._sync.run(self._put_writes_plan(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._async.run(self._put_writes_plan(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and channel values, then release it. Large
        threads take several transactions (128 operations each); a reader in between sees the
        oldest checkpoints go first."""
        self._sync.run(self._delete_thread_plan(str(thread_id)))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._async.run(self._delete_thread_plan(str(thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata `run_id` is one of `run_ids` (in any thread),
        with their writes, and the channel values no remaining checkpoint uses."""
        self._sync.run(self._delete_for_runs_plan(run_ids))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._async.run(self._delete_for_runs_plan(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, write and channel value of one thread into another (whose
        checkpoints of the same ids are replaced). The source is read without its lease."""
        self._sync.run(self._copy_thread_plan(str(source_thread_id), str(target_thread_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._async.run(self._copy_thread_plan(str(source_thread_id), str(target_thread_id)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest`: keep each namespace's newest checkpoint, plus, when its metadata names
        DeltaChannels not yet snapshotted (`counters_since_delta_snapshot`), the ancestors back
        to the one holding a stored value for each, so those channels still rebuild. `delete`:
        remove the threads' checkpoints entirely."""
        self._sync.run(self._prune_plan(thread_ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._async.run(self._prune_plan(thread_ids, strategy))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Zero-padded counter plus a random fraction, as InMemorySaver and PostgresSaver do:
        increasing, and unique across forks of a thread."""
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"

    # ---- leases and continuity -------------------------------------------------------------

    def _held_threads(self) -> builtins.list[str]:
        with self._lock:
            return list(self._holds)

    def _forget_hold(self, tid: str) -> _Hold | None:
        with self._lock:
            return self._holds.pop(tid, None)

    def _known_revision(self, tid: str) -> int | None:
        with self._lock:
            return self._known.get(tid)

    def _remember(self, tid: str, revision: int, *, observed: bool) -> None:
        """What this saver last saw of the thread's owner record: the revision of its own last
        write, or what a get_tuple read (an absent record, 0, resets it: the thread is empty)."""
        with self._lock:
            current = self._known.get(tid)
            hold = self._holds.get(tid)
            if observed and revision == 0 and hold is not None and hold.claimed:
                return  # a read that raced this saver's own first write: the write is newer
            if observed and revision == 0:
                self._known[tid] = 0
            else:
                self._known[tid] = revision if current is None else max(current, revision)
            self._known.move_to_end(tid)
            while len(self._known) > _KNOWN_THREADS:
                # Forget the least recently seen thread this saver does not hold: its next
                # write then claims it without the continuity check, as a first write does.
                victim = next((t for t in self._known if t not in self._holds), None)
                if victim is None:
                    break
                del self._known[victim]

    def _busy_from_lease(self, tid: str, answer: dict[str, Any] | None) -> ThreadBusyError:
        answer = answer or {}
        return ThreadBusyError(
            tid,
            reason="held",
            holder=answer.get("holder"),
            expires_at=answer.get("expires_at"),
            this_saver=self.holder_id,
        )

    def _lease_plan(self, tid: str) -> Plan[_Hold]:
        """This saver's lease on the thread: kept while more than half its time remains, renewed
        when less does, acquired when there is none. ThreadBusyError if another holder has it."""
        lease = self._layout.lease(tid)
        with self._lock:
            hold = self._holds.get(tid)
        now = time.monotonic()
        if hold is not None:
            remaining = hold.deadline - now
            if remaining > self.lease_ttl / 2:
                return hold
            if remaining > 0:
                try:
                    answer = yield from call(
                        "lease_renew",
                        resource_id=lease,
                        holder_id=self.holder_id,
                        token=hold.token,
                        ttl_seconds=self.lease_ttl,
                    )
                    hold.deadline = now + self.lease_ttl
                    hold.expires_at = answer.get("expires_at") or hold.expires_at
                    return hold
                except FencedError:
                    pass  # lapsed or taken: acquiring tells which
        sent = time.monotonic()
        try:
            answer = yield from call(
                "lease_acquire", resource_id=lease, holder_id=self.holder_id, ttl_seconds=self.lease_ttl
            )
        except ConflictError as refused:
            self._forget_hold(tid)
            raise self._busy_from_lease(tid, refused.result) from None
        if answer.get("status") != "acquired" or answer.get("token") is None:
            self._forget_hold(tid)
            raise self._busy_from_lease(tid, answer)
        token = int(answer["token"])
        with self._lock:
            current = self._holds.get(tid)
            if current is not None and current.token == token:
                # Still ours on the server (the same grant, extended): nothing happened between.
                current.deadline = sent + self.lease_ttl
                current.expires_at = answer.get("expires_at", current.expires_at)
                return current
            fresh = _Hold(token=token, deadline=sent + self.lease_ttl, expires_at=answer.get("expires_at", ""))
            self._holds[tid] = fresh
            return fresh

    def _take_plan(self, tid: str) -> Plan[None]:
        """The lease, for operations that act on the thread as it is now (delete, prune, the
        target of a copy) rather than on an earlier read: with the lease held nobody else
        writes, so the owner record read now is the baseline of the continuity check."""
        hold = yield from self._lease_plan(tid)
        if hold.claimed:
            return
        answer = yield from call("state_batch_get", keys=[self._layout.owner(tid)])
        self._observe(tid, answer["entries"][0])

    def _txn_plan(
        self,
        tid: str,
        ops: Sequence[dict[str, Any]],
        compares: Sequence[dict[str, Any]] = (),
        *,
        delete_owner: bool = False,
    ) -> Plan[tuple[dict[str, Any], builtins.list[int]]]:
        """Run one transaction of the thread's data, fenced by its lease and guarded by its
        owner record. Returns the answer and which of `compares` failed (none on success).

        The first write under a new lease token claims the thread: the owner record must still
        be at the revision this saver last wrote or read (anything else means another worker
        wrote the thread since, and writing now would fork it), and it is rewritten with this
        saver's holder and token. Later writes require the record to carry that token. Every
        write rewrites the record, so its revision tracks the thread's last write."""
        owner = self._layout.owner(tid)
        lease = self._layout.lease(tid)
        refusals = 0
        while True:
            hold = yield from self._lease_plan(tid)
            stamp = {"holder": self.holder_id, "token": hold.token}
            guard: builtins.list[dict[str, Any]]
            if hold.claimed:
                guard = [{"key": owner, "value": stamp}]
            else:
                known = self._known_revision(tid)
                guard = [] if known is None else [{"key": owner, "mod_revision": known}]
            success = [*ops, _delete(owner) if delete_owner else _put(owner, stamp)]
            try:
                answer = yield from call(
                    "state_txn",
                    compare=guard + list(compares),
                    success=success,
                    failure=[{"op": "get", "key": owner}],
                    lease=lease,
                    token=hold.token,
                )
            except FencedError:
                # The lease lapsed (and perhaps went elsewhere) before this write arrived. Take
                # it again; the claim then checks nobody wrote the thread in between.
                self._forget_hold(tid)
                refusals += 1
                if refusals > 2:
                    info: dict[str, Any] | None = None
                    with suppress(Exception):
                        info = yield from call("lease_get", resource_id=lease)
                    raise self._busy_from_lease(tid, info) from None
                continue
            if answer.get("succeeded"):
                hold.claimed = not delete_owner
                self._remember(tid, 0 if delete_owner else int(answer["revision"]), observed=delete_owner)
                return answer, []
            failed = set(answer.get("failed_compares") or [])
            if guard and 0 in failed:
                results = answer.get("results") or []
                current = results[0].get("value") if results and results[0].get("status") == "ok" else None
                if current == stamp:
                    # A concurrent write of this saver claimed the thread under this same token
                    # first (the record moved, but only by us): write as its owner.
                    hold.claimed = True
                    continue
                with self._lock:
                    pinned = self._pins.get(tid, 0) > 0
                if not pinned:
                    # Taken only to write, and this write may not happen: leave the thread to
                    # the worker that wrote it (under `hold`, the block keeps it).
                    with suppress(Exception):
                        yield from self._release_plan(tid)
                raise ThreadBusyError(
                    tid,
                    reason="changed",
                    holder=current.get("holder") if isinstance(current, dict) else None,
                    this_saver=self.holder_id,
                )
            return answer, sorted(i - len(guard) for i in failed)

    def _release_plan(self, tid: str) -> Plan[None]:
        hold = self._forget_hold(tid)
        if hold is None:
            return
        with suppress(FencedError, NotFoundError):  # already expired or taken: nothing to give back
            yield from call(
                "lease_release", resource_id=self._layout.lease(tid), holder_id=self.holder_id, token=hold.token
            )

    def _renew_plan(self, tid: str) -> Plan[None]:
        with self._lock:
            hold = self._holds.get(tid)
        if hold is None:
            return
        sent = time.monotonic()
        try:
            answer = yield from call(
                "lease_renew",
                resource_id=self._layout.lease(tid),
                holder_id=self.holder_id,
                token=hold.token,
                ttl_seconds=self.lease_ttl,
            )
        except FencedError:
            self._forget_hold(tid)  # the next write re-acquires and checks continuity
            return
        hold.deadline = sent + self.lease_ttl
        hold.expires_at = answer.get("expires_at") or hold.expires_at

    def _pin(self, tid: str) -> None:
        with self._lock:
            self._pins[tid] += 1

    def _unpin(self, tid: str) -> int:
        with self._lock:
            self._pins[tid] -= 1
            left = self._pins[tid]
            if left <= 0:
                del self._pins[tid]
            return max(left, 0)

    def _start_heartbeat(self) -> None:
        with self._lock:
            if self._heartbeat is not None and self._heartbeat.is_alive():
                return
            self._stop.clear()
            self._heartbeat = threading.Thread(
                target=self._beat, name=f"StateSaver lease renewer ({self.holder_id})", daemon=True
            )
            self._heartbeat.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        beat = self._heartbeat
        if beat is not None and beat is not threading.current_thread():
            beat.join(timeout=5)
        self._heartbeat = None

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_ttl / 3):
            with self._lock:
                pinned = list(self._pins)
            for tid in pinned:
                try:
                    self._sync.run(self._renew_plan(tid))
                except Exception as error:  # the next write reports a lost thread precisely
                    logger.warning("could not renew the lease of thread %r: %s", tid, error)

    async def _aheartbeat(self, tid: str) -> None:
        while True:
            await asyncio.sleep(self.lease_ttl / 3)
            try:
                await self._async.run(self._renew_plan(tid))
            except Exception as error:
                logger.warning("could not renew the lease of thread %r: %s", tid, error)

    # ---- records ---------------------------------------------------------------------------

    def _record(
        self, key: str, fields: dict[str, Any], typed: tuple[str, bytes]
    ) -> tuple[builtins.list[dict[str, Any]], dict[str, Any]]:
        """(chunk puts, main put) storing `fields` and a serialized value under `key`, split
        over `key/1`, `key/2`... when it would exceed the server's value limit."""
        data = _b64(typed[1])
        base = {**fields, "t": typed[0]}
        room = (
            self.max_value_bytes - len(json.dumps(base, separators=(",", ":"), ensure_ascii=False).encode("utf-8")) - 64
        )
        if len(data) <= room:
            return [], _put(key, {**base, "d": data})
        piece = min(room, self.max_value_bytes - 64)
        if piece < 1024:
            raise ValueError(
                f"the fields stored with {key!r} leave no room for its value "
                f"under max_value_bytes={self.max_value_bytes}"
            )
        pieces = [data[i : i + piece] for i in range(0, len(data), piece)]
        chunks = [_put(f"{key}/{n}", {"d": p}) for n, p in enumerate(pieces[1:], start=1)]
        return chunks, _put(key, {**base, "d": pieces[0], "n": len(pieces)})

    def _complete_plan(
        self, values: dict[str, dict[str, Any]], chunks: dict[str, Any] | None = None
    ) -> Plan[dict[str, dict[str, Any]]]:
        """`values` with every chunked value joined (fetching chunks not in `chunks`); a value
        whose chunks are gone (deleted meanwhile) is dropped."""
        chunks = dict(chunks or {})
        wanted = [
            f"{key}/{n}"
            for key, value in values.items()
            for n in range(1, int(value.get("n") or 1))
            if f"{key}/{n}" not in chunks
        ]
        for batch in _batches(wanted, _BATCH_KEYS):
            answer = yield from call("state_batch_get", keys=list(batch))
            for entry in answer.get("entries", []):
                if entry.get("status") == "ok":
                    chunks[entry["key"]] = entry["value"]
        out: dict[str, dict[str, Any]] = {}
        for key, value in values.items():
            count = int(value.get("n") or 1)
            if count == 1:
                out[key] = value
                continue
            parts = [value.get("d") or ""]
            for n in range(1, count):
                piece = chunks.get(f"{key}/{n}")
                if piece is None:
                    break
                parts.append(piece.get("d") or "")
            else:
                joined = dict(value)
                joined["d"] = "".join(parts)
                joined.pop("n", None)
                out[key] = joined
        return out

    def _scan_plan(self, prefix: str, *, values: bool) -> Plan[builtins.list[dict[str, Any]]]:
        entries: builtins.list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = yield from call("state_list", prefix=prefix, limit=_PAGE, cursor=cursor, include_values=values)
            entries.extend(page.get("entries") or [])
            cursor = page.get("next_cursor")
            if not cursor:
                return entries

    def _pack(
        self,
        units: Sequence[Sequence[dict[str, Any]]],
        final: tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]]] | None = None,
    ) -> builtins.list[builtins.list[dict[str, Any]]]:
        """Group operations into transactions under the server's limits, keeping each unit
        (a record and its chunks) together when it fits, and `final` (prelude, core) last with
        its core whole: a checkpoint and its bookkeeping commit together."""
        txns: builtins.list[builtins.list[dict[str, Any]]] = []
        current: builtins.list[dict[str, Any]] = []
        size = 0

        def flush() -> None:
            nonlocal current, size
            if current:
                txns.append(current)
            current, size = [], 0

        def fits(ops: Sequence[dict[str, Any]], ops_size: int) -> bool:
            return len(current) + len(ops) <= _TXN_OPS and size + ops_size <= self.max_request_bytes

        def add(ops: Sequence[dict[str, Any]]) -> None:
            nonlocal size
            ops_size = sum(_size(op) for op in ops)
            if fits(ops, ops_size):
                current.extend(ops)
                size += ops_size
                return
            flush()
            if fits(ops, ops_size):
                current.extend(ops)
                size += ops_size
                return
            for op in ops:  # too big for one transaction: its chunks go ahead one by one
                one = _size(op)
                if not fits([op], one):
                    flush()
                current.append(op)
                size += one

        for unit in units:
            add(unit)
        if final is not None:
            prelude, core = final
            add(prelude)
            core_size = sum(_size(op) for op in core)
            if not fits(core, core_size):
                flush()
            current.extend(core)
            size += core_size
        flush()
        return txns

    def _write_all_plan(self, tid: str, txns: Sequence[Sequence[dict[str, Any]]]) -> Plan[None]:
        for ops in txns:
            yield from self._txn_plan(tid, ops)

    # ---- reads -----------------------------------------------------------------------------

    def _observe(self, tid: str, entry: dict[str, Any]) -> None:
        revision = int(entry.get("mod_revision") or 0) if entry.get("status") == "ok" else 0
        self._remember(tid, revision, observed=True)

    def _get_tuple_plan(self, config: RunnableConfig) -> Plan[CheckpointTuple | None]:
        conf = config["configurable"]
        tid = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        cid = get_checkpoint_id(config)
        owner = self._layout.owner(tid)
        if cid:
            key = self._layout.checkpoint(tid, ns, cid)
            answer = yield from call("state_batch_get", keys=[owner, key])
            owner_entry, entry = answer["entries"]
            self._observe(tid, owner_entry)
            if entry.get("status") != "ok":
                return None
            value = entry["value"]
        else:
            # The owner record first: what get_tuple saw is then never newer than what it
            # remembers, so a later write can only err on the side of refusing.
            answer = yield from call("state_batch_get", keys=[owner])
            self._observe(tid, answer["entries"][0])
            page = yield from call("state_list", prefix=self._layout.checkpoints(tid, ns), limit=1, include_values=True)
            entries = page.get("entries") or []
            if not entries:
                return None
            key, value = entries[0]["key"], entries[0]["value"]
        values = yield from self._complete_plan({key: value})
        if key not in values:
            return None
        tuples = yield from self._tuples_plan([_Stored(tid, key, values[key])])
        return tuples[0]

    def _tuples_plan(self, stored: Sequence[_Stored]) -> Plan[builtins.list[CheckpointTuple]]:
        """Checkpoint tuples for records: their pending writes and channel values, fetched
        together (concurrently under the async driver)."""
        if not stored:
            return []
        layout = self._layout
        calls = []
        for s in stored:
            ns, cid = s.value["checkpoint_ns"], s.value["checkpoint_id"]
            calls.append(
                make_call("state_list", prefix=layout.writes(s.thread_id, ns, cid), limit=_PAGE, include_values=True)
            )
        blob_keys = list(
            dict.fromkeys(
                layout.blob(s.thread_id, s.value["checkpoint_ns"], ch, ver)
                for s in stored
                for ch, ver in (s.value.get("channel_versions") or {}).items()
            )
        )
        batches = [list(b) for b in _batches(blob_keys, _BATCH_KEYS)]
        calls.extend(make_call("state_batch_get", keys=b) for b in batches)
        answers = yield from gather(calls)
        for answer in answers:
            if isinstance(answer, Exception):
                raise answer

        # Pending writes, per checkpoint: main records have two segments after the prefix.
        writes_of: builtins.list[builtins.list[dict[str, Any]]] = []
        for i, s in enumerate(stored):
            ns, cid = s.value["checkpoint_ns"], s.value["checkpoint_id"]
            prefix = layout.writes(s.thread_id, ns, cid)
            entries = list(answers[i].get("entries") or [])
            cursor = answers[i].get("next_cursor")
            while cursor:
                page = yield from call("state_list", prefix=prefix, limit=_PAGE, cursor=cursor, include_values=True)
                entries.extend(page.get("entries") or [])
                cursor = page.get("next_cursor")
            mains = {e["key"]: e["value"] for e in entries if len(e["key"][len(prefix) :].split("/")) == 2}
            chunks = {e["key"]: e["value"] for e in entries if len(e["key"][len(prefix) :].split("/")) == 3}
            complete = yield from self._complete_plan(mains, chunks)
            writes_of.append(list(complete.values()))

        blobs: dict[str, dict[str, Any]] = {}
        for answer in answers[len(stored) :]:
            for entry in answer.get("entries") or []:
                if entry.get("status") == "ok":
                    blobs[entry["key"]] = entry["value"]
        blobs = yield from self._complete_plan(blobs)

        tuples: builtins.list[CheckpointTuple] = []
        for s, writes in zip(stored, writes_of, strict=True):
            tuples.append(self._tuple(s, writes, blobs))
        return tuples

    def _tuple(
        self, s: _Stored, writes: builtins.list[dict[str, Any]], blobs: dict[str, dict[str, Any]]
    ) -> CheckpointTuple:
        value = s.value
        ns, cid, parent = value["checkpoint_ns"], value["checkpoint_id"], value.get("parent_checkpoint_id")
        checkpoint: Checkpoint = self.serde.loads_typed(_typed(value))
        channel_values: dict[str, Any] = {}
        for ch, ver in checkpoint["channel_versions"].items():
            blob = blobs.get(self._layout.blob(s.thread_id, ns, ch, ver))
            if blob is None or blob.get("t") == "empty":
                continue
            channel_values[ch] = self.serde.loads_typed(_typed(blob))
        metadata = s.metadata if s.metadata is not None else self.serde.loads_typed(_typed(value["metadata"]))
        ordered = sorted(writes, key=lambda w: writes_sort_key(w.get("task_path", ""), w["task_id"], int(w["idx"])))
        return CheckpointTuple(
            config={"configurable": {"thread_id": s.thread_id, "checkpoint_ns": ns, "checkpoint_id": cid}},
            checkpoint={**checkpoint, "channel_values": channel_values},
            metadata=metadata,
            parent_config=(
                {"configurable": {"thread_id": s.thread_id, "checkpoint_ns": ns, "checkpoint_id": parent}}
                if parent
                else None
            ),
            pending_writes=[(w["task_id"], w["channel"], self.serde.loads_typed(_typed(w))) for w in ordered],
        )

    def _list_plan(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Plan[None]:
        if limit is not None and limit <= 0:
            return
        layout = self._layout
        wanted: str | None = None
        if config is not None:
            conf = config["configurable"]
            prefix = layout.checkpoints(str(conf["thread_id"]), conf.get("checkpoint_ns"))
            wanted = get_checkpoint_id(config)
        else:
            prefix = layout.threads()
        before_id = get_checkpoint_id(before) if before else None
        found: builtins.list[tuple[str, str, str, str]] = []  # (checkpoint id, thread, namespace, key)
        for entry in (yield from self._scan_plan(prefix, values=False)):
            parts = layout.split(entry["key"])
            if parts is None or parts[1] != "checkpoints" or len(parts[2]) != 2:
                continue
            tid, _, (ns_seg, desc) = parts
            cid = ascending(desc)
            if wanted and cid != wanted:
                continue
            if before_id and cid >= before_id:
                continue
            found.append((cid, tid, unescape(ns_seg), entry["key"]))
        found.sort(key=lambda f: (f[0], f[1], f[2]), reverse=True)
        remaining = limit
        for batch in _batches(found, 32):
            answer = yield from call("state_batch_get", keys=[f[3] for f in batch])
            values = {e["key"]: e["value"] for e in answer.get("entries") or [] if e.get("status") == "ok"}
            values = yield from self._complete_plan(values)
            matching: builtins.list[_Stored] = []
            for _, tid, _, key in batch:
                value = values.get(key)
                if value is None:
                    continue  # deleted since the listing
                metadata = self.serde.loads_typed(_typed(value["metadata"]))
                if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                    continue
                matching.append(_Stored(tid, key, value, metadata))
            for item in (yield from self._tuples_plan(matching)):
                yield Emit(item)
                if remaining is not None:
                    remaining -= 1
                    if remaining <= 0:
                        return

    # ---- writes ----------------------------------------------------------------------------

    def _put_plan(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Plan[RunnableConfig]:
        layout = self._layout
        conf = config["configurable"]
        tid = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        parent = conf.get("checkpoint_id")
        cid = checkpoint["id"]
        c = checkpoint.copy()
        values: dict[str, Any] = c.pop("channel_values")  # type: ignore[misc]
        units: builtins.list[builtins.list[dict[str, Any]]] = []
        for ch, ver in new_versions.items():
            typed = self.serde.dumps_typed(values[ch]) if ch in values else ("empty", b"")
            chunks, main = self._record(layout.blob(tid, ns, ch, ver), {}, typed)
            units.append([*chunks, main])
        full_metadata = get_checkpoint_metadata(config, metadata)
        run_id = full_metadata.get("run_id")
        run_id = run_id if isinstance(run_id, str) and run_id else None
        meta_typed = self.serde.dumps_typed(full_metadata)
        fields = {
            "checkpoint_ns": ns,
            "checkpoint_id": cid,
            "parent_checkpoint_id": parent,
            "run_id": run_id,
            "channel_versions": c["channel_versions"],
            "metadata": {"t": meta_typed[0], "d": _b64(meta_typed[1])},
        }
        chunks, main = self._record(layout.checkpoint(tid, ns, cid), fields, self.serde.dumps_typed(c))
        core = [main]
        if run_id:
            core.append(
                _put(
                    layout.run_entry(run_id, tid, ns, cid),
                    {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid},
                )
            )
        yield from self._write_all_plan(tid, self._pack(units, (chunks, core)))
        return {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}

    def _put_writes_plan(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Plan[None]:
        layout = self._layout
        conf = config["configurable"]
        tid = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        cid = conf["checkpoint_id"]
        # (ops, key that must not exist yet or None): regular writes keep the first value
        # stored under (task, index); special channels replace it, as in InMemorySaver.
        units: builtins.list[tuple[builtins.list[dict[str, Any]], str | None]] = []
        for idx, (channel, value) in enumerate(writes):
            position = WRITES_IDX_MAP.get(channel, idx)
            key = layout.write(tid, ns, cid, task_id, position)
            fields = {"task_id": task_id, "channel": channel, "idx": position, "task_path": task_path}
            chunks, main = self._record(key, fields, self.serde.dumps_typed(value))
            ops = [*chunks, main]
            if len(ops) > _TXN_OPS or sum(_size(op) for op in ops) > self.max_request_bytes:
                yield from self._write_all_plan(tid, self._pack([[op] for op in chunks]))
                ops = [main]
            units.append((ops, key if position >= 0 else None))
        groups: builtins.list[builtins.list[tuple[builtins.list[dict[str, Any]], str | None]]] = []
        current: builtins.list[tuple[builtins.list[dict[str, Any]], str | None]] = []
        n_ops = n_compares = size = 0
        for ops, fresh in units:
            ops_size = sum(_size(op) for op in ops)
            if current and (
                n_ops + len(ops) > _TXN_OPS
                or n_compares + (fresh is not None) > _TXN_OPS
                or size + ops_size > self.max_request_bytes
            ):
                groups.append(current)
                current, n_ops, n_compares, size = [], 0, 0, 0
            current.append((ops, fresh))
            n_ops += len(ops)
            n_compares += fresh is not None
            size += ops_size
        if current:
            groups.append(current)
        for group in groups:
            pending = group
            while pending:
                compares = [{"key": fresh, "exists": False} for _, fresh in pending if fresh is not None]
                answer, failed = yield from self._txn_plan(tid, [op for ops, _ in pending for op in ops], compares)
                if answer.get("succeeded"):
                    break
                stored = {compares[i]["key"] for i in failed if 0 <= i < len(compares)}
                if not stored:
                    raise RuntimeError(
                        f"the server refused the writes of task {task_id!r} without saying why: {answer!r}"
                    )
                pending = [(ops, fresh) for ops, fresh in pending if fresh not in stored]

    def _delete_keys_plan(self, tid: str, keys: Sequence[str], *, delete_owner: bool) -> Plan[None]:
        keys = list(dict.fromkeys(keys))
        batches = [list(b) for b in _batches(keys, _TXN_OPS)] or [[]]
        for n, batch in enumerate(batches):
            last = n == len(batches) - 1
            if not batch and not (last and delete_owner):
                continue
            yield from self._txn_plan(tid, [_delete(k) for k in batch], delete_owner=delete_owner and last)

    def _delete_thread_plan(self, tid: str) -> Plan[None]:
        layout = self._layout
        yield from self._take_plan(tid)
        owner = layout.owner(tid)
        entries = yield from self._scan_plan(layout.thread(tid), values=False)
        checkpoints: builtins.list[tuple[str, str, str]] = []  # (checkpoint id, namespace, key)
        rest: builtins.list[str] = []
        for entry in entries:
            key = entry["key"]
            if key == owner:
                continue
            parts = layout.split(key)
            if parts is not None and parts[1] == "checkpoints" and len(parts[2]) == 2:
                checkpoints.append((ascending(parts[2][1]), unescape(parts[2][0]), key))
            else:
                rest.append(key)
        checkpoints.sort()  # oldest first: a reader meanwhile still finds the newest
        runs: builtins.list[str] = []
        for batch in _batches([c[2] for c in checkpoints], _BATCH_KEYS):
            answer = yield from call("state_batch_get", keys=list(batch))
            for entry in answer.get("entries") or []:
                value = entry.get("value") if entry.get("status") == "ok" else None
                if isinstance(value, dict) and value.get("run_id"):
                    runs.append(layout.run_entry(value["run_id"], tid, value["checkpoint_ns"], value["checkpoint_id"]))
        yield from self._delete_keys_plan(tid, runs + [c[2] for c in checkpoints] + rest, delete_owner=True)
        yield from self._release_plan(tid)

    def _delete_for_runs_plan(self, run_ids: Sequence[str]) -> Plan[None]:
        layout = self._layout
        by_thread: dict[str, builtins.list[tuple[str, str, str]]] = defaultdict(list)  # thread -> (ns, id, entry key)
        for run_id in dict.fromkeys(str(r) for r in run_ids):
            prefix = layout.runs(run_id)
            for entry in (yield from self._scan_plan(prefix, values=False)):
                parts = entry["key"][len(prefix) :].split("/")
                if len(parts) != 3:
                    continue
                by_thread[unescape(parts[0])].append((unescape(parts[1]), ascending(parts[2]), entry["key"]))
        for tid, found in by_thread.items():
            yield from self._take_plan(tid)
            deletes = [entry_key for _, _, entry_key in found]
            mains = [layout.checkpoint(tid, ns, cid) for ns, cid, _ in found]
            for batch in _batches(mains, _BATCH_KEYS):
                answer = yield from call("state_batch_get", keys=list(batch))
                for entry in answer.get("entries") or []:
                    if entry.get("status") != "ok":
                        continue
                    deletes.append(entry["key"])
                    deletes.extend(f"{entry['key']}/{n}" for n in range(1, int(entry["value"].get("n") or 1)))
            for ns, cid, _ in found:
                deletes.extend(
                    e["key"] for e in (yield from self._scan_plan(layout.writes(tid, ns, cid), values=False))
                )
            yield from self._delete_keys_plan(tid, deletes, delete_owner=False)
            for ns in dict.fromkeys(ns for ns, _, _ in found):
                yield from self._collect_blobs_plan(tid, ns)

    def _collect_blobs_plan(self, tid: str, ns: str) -> Plan[None]:
        """Delete the channel values of a namespace that no remaining checkpoint uses."""
        layout = self._layout
        records = yield from self._scan_plan(layout.checkpoints(tid, ns), values=True)
        prefix = layout.checkpoints(tid, ns)
        used = {
            layout.blob(tid, ns, ch, ver)
            for r in records
            if "/" not in r["key"][len(prefix) :]
            for ch, ver in (r["value"].get("channel_versions") or {}).items()
        }
        listed = yield from self._scan_plan(layout.blobs(tid, ns), values=False)
        unused = self._unused_blobs([e["key"] for e in listed], used)
        if unused:
            yield from self._delete_keys_plan(tid, unused, delete_owner=False)

    def _unused_blobs(self, keys: Sequence[str], used: set[str]) -> builtins.list[str]:
        """The keys (chunks included) of the channel values whose main key is not in `used`."""
        unused = []
        for key in keys:
            parts = self._layout.split(key)
            if parts is None or parts[1] != "blobs":
                continue
            main = key if len(parts[2]) == 3 else key.rsplit("/", 1)[0]
            if main not in used:
                unused.append(key)
        return unused

    def _prune_plan(self, thread_ids: Sequence[str], strategy: str) -> Plan[None]:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        layout = self._layout
        for tid in dict.fromkeys(str(t) for t in thread_ids):
            if strategy == "delete":
                yield from self._delete_thread_plan(tid)
                continue
            yield from self._take_plan(tid)
            entries = yield from self._scan_plan(layout.thread(tid), values=False)
            mains: dict[str, dict[str, str]] = defaultdict(dict)  # ns -> id -> key
            record_chunks: dict[str, builtins.list[str]] = defaultdict(list)
            writes: dict[tuple[str, str], builtins.list[str]] = defaultdict(list)  # (ns, desc id) -> keys
            blobs: dict[str, builtins.list[str]] = defaultdict(list)  # ns -> keys
            for entry in entries:
                key = entry["key"]
                parts = layout.split(key)
                if parts is None:
                    continue
                _, kind, segs = parts
                if kind == "checkpoints" and len(segs) == 2:
                    mains[unescape(segs[0])][ascending(segs[1])] = key
                elif kind == "checkpoints" and len(segs) == 3:
                    record_chunks[key.rsplit("/", 1)[0]].append(key)
                elif kind == "writes" and len(segs) >= 2:
                    writes[(unescape(segs[0]), segs[1])].append(key)
                elif kind == "blobs" and len(segs) >= 1:
                    blobs[unescape(segs[0])].append(key)
            records: dict[str, dict[str, Any]] = {}
            all_mains = [k for by_id in mains.values() for k in by_id.values()]
            for batch in _batches(all_mains, _BATCH_KEYS):
                answer = yield from call("state_batch_get", keys=list(batch))
                for entry in answer.get("entries") or []:
                    if entry.get("status") == "ok":
                        records[entry["key"]] = entry["value"]
            deletes: builtins.list[str] = []
            used: set[str] = set()
            for ns, by_id in mains.items():
                present = {cid: key for cid, key in by_id.items() if key in records}
                if not present:
                    continue
                kept = yield from self._kept_plan(tid, ns, present, records)
                for cid, key in present.items():
                    record = records[key]
                    if cid in kept:
                        used.update(
                            layout.blob(tid, ns, ch, ver) for ch, ver in (record.get("channel_versions") or {}).items()
                        )
                        continue
                    deletes.append(key)
                    deletes.extend(record_chunks.get(key, []))
                    deletes.extend(writes.get((ns, descending(cid)), []))
                    if record.get("run_id"):
                        deletes.append(layout.run_entry(record["run_id"], tid, ns, cid))
            for ns_blobs in blobs.values():
                deletes.extend(self._unused_blobs(ns_blobs, used))
            yield from self._delete_keys_plan(tid, deletes, delete_owner=False)

    def _kept_plan(
        self, tid: str, ns: str, present: dict[str, str], records: dict[str, dict[str, Any]]
    ) -> Plan[set[str]]:
        """The newest checkpoint of a namespace and the ancestors its DeltaChannels still need:
        walking parents until each channel its metadata counts as not yet snapshotted has a
        stored value (as `get_delta_channel_history` walks)."""
        latest = max(present)
        kept = {latest}
        record = records[present[latest]]
        metadata = self.serde.loads_typed(_typed(record["metadata"]))
        pending = set((metadata or {}).get("counters_since_delta_snapshot") or {})
        cursor = record.get("parent_checkpoint_id")
        while pending and cursor in present:
            kept.add(cursor)
            ancestor = records[present[cursor]]
            versions = ancestor.get("channel_versions") or {}
            keys = {ch: self._layout.blob(tid, ns, ch, versions[ch]) for ch in pending if ch in versions}
            if keys:
                answer = yield from call("state_batch_get", keys=list(keys.values()))
                stored = {
                    e["key"]
                    for e in answer.get("entries") or []
                    if e.get("status") == "ok" and e["value"].get("t") != "empty"
                }
                pending -= {ch for ch, key in keys.items() if key in stored}
            cursor = ancestor.get("parent_checkpoint_id")
        return kept

    def _copy_thread_plan(self, source: str, target: str) -> Plan[None]:
        layout = self._layout
        src, dst = layout.thread(source), layout.thread(target)
        owner = layout.owner(source)
        entries = [e for e in (yield from self._scan_plan(src, values=True)) if e["key"] != owner]
        if not entries:
            return
        yield from self._take_plan(target)
        others: builtins.list[builtins.list[dict[str, Any]]] = []
        # checkpoint id -> its chunks, its record, its run index entry
        records: dict[str, builtins.list[dict[str, Any]]] = defaultdict(list)
        for entry in entries:
            rest = entry["key"][len(src) :]
            new_key = checked(dst + rest, f"thread {target!r}")
            parts = layout.split(entry["key"])
            if parts is not None and parts[1] == "checkpoints" and len(parts[2]) in (2, 3):
                cid = ascending(parts[2][1])
                if len(parts[2]) == 3:
                    records[cid].insert(0, _put(new_key, entry["value"]))
                    continue
                records[cid].append(_put(new_key, entry["value"]))
                value = entry["value"]
                if value.get("run_id"):
                    records[cid].append(
                        _put(
                            layout.run_entry(value["run_id"], target, value["checkpoint_ns"], cid),
                            {"thread_id": target, "checkpoint_ns": value["checkpoint_ns"], "checkpoint_id": cid},
                        )
                    )
            else:
                others.append([_put(new_key, entry["value"])])
        # Values first, checkpoints last and oldest first: the copy is readable as it grows.
        units = others + [records[cid] for cid in sorted(records)]
        yield from self._write_all_plan(target, self._pack(units))
