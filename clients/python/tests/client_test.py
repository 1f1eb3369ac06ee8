"""The Python client against a live state-http (`--tools all`) at $STATE_URL: every operation
family, problem documents as typed exceptions, watch resuming after a dropped connection, and a
write whose answer is lost applied exactly once. Prints one line per check; exits nonzero on
the first failure.

    STATE_URL=http://127.0.0.1:7478 python3 client_test.py
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
import uuid

from state_client import (
    AsyncClient,
    StateError,
    Client,
    ConflictError,
    FencedError,
    InvalidArgumentError,
    NotFoundError,
)

URL = os.environ["STATE_URL"]
RUN = uuid.uuid4().hex[:8]
checks = 0


def check(label: str, condition: bool, detail: object = "") -> None:
    global checks
    if not condition:
        print(f"FAILED: {label}: {detail}", file=sys.stderr)
        sys.exit(1)
    checks += 1
    print(f"ok: {label}")


def raises(exception: type[Exception], call, *args, **kwargs) -> Exception:
    try:
        call(*args, **kwargs)
    except exception as error:
        return error
    print(f"FAILED: {call.__name__} did not raise {exception.__name__}", file=sys.stderr)
    sys.exit(1)


def every_method_is_there(state: Client) -> None:
    with Client(URL) as plain:
        document = plain._http.get("/openapi.json").json()
    hand_written = {"state_watch": "watch", "call": "call", "healthz": "healthz", "metrics": "metrics"}
    ids = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    missing = [i for i in ids if not callable(getattr(Client, hand_written.get(i, i), None))]
    missing += [f"async {i}" for i in ids if not callable(getattr(AsyncClient, hand_written.get(i, i), None))]
    check(f"a method for each of the server's {len(ids)} operations", not missing, missing)


def kv(state: Client) -> None:
    key = f"py-{RUN}/kv/a b/ü"
    first = state.state_set(key, {"n": 1}, expected_version=0)
    check("create only", first["status"] == "ok" and first["version"] == 1, first)
    conflict = raises(ConflictError, state.state_set, key, {"n": 2}, expected_version=0)
    check("a conflict carries the current value and version",
          conflict.current_version == 1 and conflict.current_value == {"n": 1} and conflict.status == 412, conflict.problem)
    read = state.state_get(key)
    check("a key with `/`, a space and non-ASCII reads back", read["value"] == {"n": 1} and read["key"] == key, read)
    missing = raises(NotFoundError, state.state_get, f"py-{RUN}/kv/none")
    check("not found is NotFoundError with the revision", missing.result["version"] == 0, missing.problem)
    state.state_set(f"py-{RUN}/kv/b", [1, 2])
    listed = state.state_list(prefix=f"py-{RUN}/kv/", include_values=True)
    check("list by prefix", [e["key"] for e in listed["entries"]] == sorted([key, f"py-{RUN}/kv/b"]), listed)
    got = state.state_batch_get([key, f"py-{RUN}/kv/b"])
    check("batch get", len(got["results"] if "results" in got else got.get("entries", [])) == 2, got)
    txn = state.state_txn(compare=[{"key": key, "version": 1}],
                          success=[{"op": "put", "key": key, "value": {"n": 3}}, {"op": "delete", "key": f"py-{RUN}/kv/b"}])
    check("a transaction applies both writes", txn["succeeded"] and len(txn["results"]) == 2, txn)
    history = state.history_log(key=key)
    check("history of the key", len(history["events"]) >= 2, history)
    deleted = state.state_delete(key, expected_version=2)
    check("delete at a version", deleted["status"] == "ok", deleted)
    # Dot segments are parts of a key, not directions: `../important` must not reach `important`.
    state.state_set(f"py-{RUN}/important", "keep")
    state.state_set(f"py-{RUN}/tmp/../important", "elsewhere")
    state.state_set(f"py-{RUN}/x/./y", 1)
    check("a key with dot segments is that key",
          state.state_get(f"py-{RUN}/important")["value"] == "keep"
          and state.state_get(f"py-{RUN}/tmp/../important")["value"] == "elsewhere"
          and state.state_get(f"py-{RUN}/x/./y")["key"] == f"py-{RUN}/x/./y")
    empty = raises(ValueError, state.state_get, "")
    check("an empty key is refused before it is sent", "must not be empty" in str(empty))
    bad = raises(InvalidArgumentError, state.state_list, limit=5000)
    check("bad arguments are InvalidArgumentError", bad.status == 400, bad.problem)


def leases_and_fencing(state: Client) -> None:
    resource = f"py-{RUN}/lease"
    held = state.lease_acquire(resource, "a", 30)
    check("lease acquired with a token", held["status"] == "acquired" and held["token"] > 0, held)
    other = raises(ConflictError, state.lease_acquire, resource, "b", 30)
    check("a second holder is told who holds it", other.result["holder"] == "a" and other.status == 409, other.problem)
    write = state.state_set(f"py-{RUN}/fenced", 1, lease=resource, token=held["token"])
    check("a write under the current token", write["status"] == "ok", write)
    renewed = state.lease_renew(resource, "a", held["token"], 30)
    check("renew", renewed["status"] in ("renewed", "ok"), renewed)
    state.lease_release(resource, "a", held["token"])
    again = state.lease_acquire(resource, "b", 30)
    fenced = raises(FencedError, state.state_set, f"py-{RUN}/fenced", 2, lease=resource, token=held["token"])
    check("a stale token is FencedError", fenced.code == "fenced" and again["token"] > held["token"], fenced.problem)
    check("lease get and list", state.lease_get(resource)["holder"] == "b"
          and any(l["resource_id"] == resource for l in state.lease_list(prefix=f"py-{RUN}/")["leases"]))


def semaphores_and_paths(state: Client) -> None:
    name = f"py-{RUN}/sem"
    one = state.semaphore_acquire(name, "a", 1, 30)
    two = raises(ConflictError, state.semaphore_acquire, name, "b", 1, 30)
    check("a semaphore of one admits one", one["status"] == "acquired" and two.result["status"] == "full", two.problem)
    state.semaphore_release(name, "a", one["token"])
    check("semaphore get/list", state.semaphore_get(name)["name"] == name and state.semaphore_list(prefix=f"py-{RUN}/") is not None)
    scope = f"py-{RUN}/repo"
    mine = state.paths_reserve(scope, "a", ["src/**"], 30, exclusive=True)
    theirs = raises(ConflictError, state.paths_reserve, scope, "b", ["src/main.rs"], 30, exclusive=True)
    check("path reservations conflict", mine["status"] == "granted" and "a" in str(theirs.result), theirs.problem)
    checked = state.paths_check(scope, "b", "src/lib.rs")
    check("paths check names the holder", "a" in str(checked), checked)
    state.paths_release(scope, "a")
    check("paths list/scopes", state.paths_list(scope) is not None and state.paths_scopes(prefix=f"py-{RUN}/") is not None)


def queues(state: Client) -> None:
    queue = f"py-{RUN}/q"
    for n in range(3):
        state.queue_send(queue, {"n": n})
    got = state.queue_receive(queue, "worker", visibility_seconds=30)
    message = got["message"] if "message" in got else got["messages"][0]
    check("receive the first message", message["body"] == {"n": 0}, got)
    state.queue_ack(queue, message["message_id"], message["receipt"])
    peeked = state.queue_peek(queue)
    check("peek shows the two left", len(peeked["messages"]) == 2, peeked)
    check("queue list", any(q["queue"] == queue for q in state.queue_list(prefix=f"py-{RUN}/")["queues"]))


def workflows(state: Client) -> None:
    created = state.workflow_create(f"py-{RUN}-flow", input={"x": 1})
    run_id = created["run_id"]
    claim = state.workflow_claim("worker", run_id=run_id)
    check("claim the run", claim["status"] == "claimed", claim)
    token = claim["token"]
    state.workflow_checkpoint(run_id, "worker", token, 1, output={"step": "one"})
    state.workflow_heartbeat(run_id, "worker", token)
    resume = state.workflow_resume(run_id)
    check("resume shows the checkpoint", "one" in str(resume), resume)
    state.workflow_signal(run_id, "go", value=7)
    done = state.workflow_complete(run_id, "worker", token, result={"ok": True})
    check("complete", done["status"] in ("completed", "ok"), done)
    status = state.workflow_status(run_id)
    check("status is completed", status["run"]["run_status"] == "completed", status)
    check("list and discover", state.workflow_list(name=f"py-{RUN}-flow") is not None and state.workflow_discover() is not None)


def sessions_checkpoints_knowledge(state: Client) -> None:
    sid = f"py-{RUN}/session"
    state.session_save(sid, {"goal": "ship"})
    check("session round trip", state.session_restore(sid)["context"] == {"goal": "ship"})
    check("session list", any(s["session_id"] == sid for s in state.session_list(prefix=f"py-{RUN}/")["sessions"]))
    saved = state.checkpoint_save(description=f"py {RUN} checkpoint about zebras", workspace=f"py-{RUN}")
    check("checkpoint saved", "checkpoint_id" in str(saved), saved)
    found = state.checkpoint_search("zebras", workspace=f"py-{RUN}")
    check("checkpoint search finds it", "zebras" in str(found), found)
    check("checkpoint restore and timeline", state.checkpoint_restore(workspace=f"py-{RUN}") is not None
          and state.checkpoint_timeline(workspace=f"py-{RUN}") is not None)
    kid = f"py-{RUN}/k/1"
    state.knowledge_save(kid, "The deploy key rotates every ninety days.", scope=f"py-{RUN}")
    recalled = state.knowledge_recall("deploy key rotation", scope=f"py-{RUN}")
    check("knowledge recall ranks it", kid in str(recalled), recalled)
    check("knowledge list", kid in str(state.knowledge_list(scope=f"py-{RUN}")))
    state.knowledge_delete(kid)
    check("knowledge delete", kid not in str(state.knowledge_list(scope=f"py-{RUN}")))


def admin_and_transfer(state: Client) -> None:
    check("health", state.state_health()["status"] in ("ok", "healthy") and state.healthz())
    check("metrics", "state_" in state.metrics())
    exported = state.store_export(limit=5)
    check("export pages records", isinstance(exported.get("records"), list) and exported["records"], exported)
    record = dict(exported["records"][0], key=f"py-{RUN}/imported")
    dry = state.store_import([record], dry_run=True)
    usage = state.store_usage(prefix=f"py-{RUN}/")
    check("usage measures a prefix", usage["keys"] >= 1 and usage["bytes"] > 0, usage)
    check("import dry run changes nothing", "imported" not in str(state.state_list(prefix=f"py-{RUN}/imported")), dry)
    reply = state.call("native", "state_get", {"key": f"py-{RUN}/none"})
    check("call answers with the reply envelope", reply["outcome"] == "not_found", reply)
    refused = raises(InvalidArgumentError, state.state_reset, False)
    check("reset without confirm is refused", refused.status == 400, refused.problem)


def watch(state: Client) -> None:
    prefix = f"py-{RUN}/watch/"
    start = state.state_set(f"{prefix}0", 0)["revision"]
    for n in range(1, 4):
        state.state_set(f"{prefix}{n}", n)
    batches = []
    for batch in state.watch(prefix=prefix, from_revision=start - 1):
        batches.append(batch)
        if len(batches) == 4:
            break
    values = [e["value"] for b in batches for e in b["events"]]
    check("watch replays from a revision in order", values == [0, 1, 2, 3], batches)


def watch_resumes_through_a_dropped_connection() -> None:
    """A proxy cuts the stream after the first batch; the client reconnects with Last-Event-ID
    and gets the rest, none twice."""
    prefix = f"py-{RUN}/resume/"
    with Client(URL) as direct:
        start = direct.state_set(f"{prefix}0", 0)["revision"]
        for n in range(1, 5):
            direct.state_set(f"{prefix}{n}", n)
    proxy = Proxy(cut_after_bytes_of_response=lambda attempt: 700 if attempt == 0 else None)
    with Client(proxy.url) as state:
        seen = []
        for batch in state.watch(prefix=prefix, from_revision=start - 1):
            seen += [e["value"] for e in batch["events"]]
            if len(seen) >= 5:
                break
    check("a cut watch resumes after its last event", seen == [0, 1, 2, 3, 4] and proxy.connections >= 2,
          (seen, proxy.connections))


def a_lost_answer_is_resent_and_applied_once() -> None:
    """The proxy forwards the first request and closes the connection instead of answering; the
    client resends with the same idempotency key and the queue holds exactly one message."""
    queue = f"py-{RUN}/once"
    proxy = Proxy(drop_first_response=True)
    with Client(proxy.url) as state:
        sent = state.queue_send(queue, {"only": "once"})
    with Client(URL) as direct:
        peeked = direct.queue_peek(queue, limit=10)
    check("a write whose answer was lost is applied once",
          proxy.connections >= 2 and len(peeked["messages"]) == 1 and "message_id" in str(sent), (proxy.connections, peeked))


def a_restarting_server_is_waited_out_and_a_stranger_is_not_taken_for_it() -> None:
    """The proxy refuses connections for its first 1.5 s, as a restarting server does: a write
    is resent until it gets through, once. A server that is not state answering 404 is not
    read as "the key is absent"."""
    queue = f"py-{RUN}/restart"
    proxy = Proxy(refuse_for_seconds=1.5)
    with Client(proxy.url) as state:
        state.queue_send(queue, {"after": "a restart"})
    with Client(URL) as direct:
        peeked = direct.queue_peek(queue, limit=10)
    check("a write through a server restarting for 1.5 s gets through, once",
          len(peeked["messages"]) == 1 and proxy.connections >= 2, (proxy.connections, peeked))

    import http.server

    class NotState(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<h1>Not Found</h1>")

        def log_message(self, *args):
            pass

    stranger = http.server.HTTPServer(("127.0.0.1", 0), NotState)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    with Client(f"http://127.0.0.1:{stranger.server_address[1]}") as wrong:
        try:
            wrong.state_get("k")
            check("another server's 404 is an error", False)
        except NotFoundError:
            check("another server's 404 is not NotFoundError", False)
        except StateError as error:
            check("another server's 404 says to check the URL", error.code == "http_404" and "check the URL" in str(error), error)
    stranger.shutdown()


async def async_client() -> None:
    async with AsyncClient(URL) as state:
        key = f"py-{RUN}/async"
        await state.state_set(key, "a", expected_version=0)
        try:
            await state.state_set(key, "b", expected_version=0)
            check("async conflict raises", False)
        except ConflictError as error:
            check("the async client raises the same exceptions", error.current_value == "a")
        results = await asyncio.gather(*(state.state_txn(
            compare=[], success=[{"op": "put", "key": f"{key}/{n}", "value": n}]) for n in range(20)))
        check("20 concurrent async calls", all(r["succeeded"] for r in results))
        async for batch in state.watch(key=key, from_revision=0):
            check("async watch", batch["events"][0]["value"] == "a", batch)
            break


class Proxy:
    """A loopback TCP proxy in front of the server that misbehaves on purpose."""

    def __init__(self, drop_first_response: bool = False, cut_after_bytes_of_response=None, refuse_for_seconds=0.0):
        self.drop_first_response = drop_first_response
        self.refuse_until = time.monotonic() + refuse_for_seconds
        self.cut = cut_after_bytes_of_response or (lambda attempt: None)
        self.connections = 0
        host, port = URL.removeprefix("http://").rsplit(":", 1)
        self.upstream = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            client, _ = self.listener.accept()
            attempt = self.connections
            self.connections += 1
            threading.Thread(target=self._serve, args=(client, attempt), daemon=True).start()

    def _serve(self, client: socket.socket, attempt: int) -> None:
        if time.monotonic() < self.refuse_until:
            client.close()
            return
        upstream = socket.create_connection(self.upstream)
        if self.drop_first_response and attempt == 0:
            upstream.sendall(whole_request(client))
            upstream.recv(65536)  # the server answered: the write is done; the client never hears
            client.close()
            upstream.close()
            return
        limit = self.cut(attempt)

        def pump(src: socket.socket, dst: socket.socket, limit: int | None) -> None:
            sent = 0
            try:
                while data := src.recv(65536):
                    if limit is not None and sent + len(data) > limit:
                        dst.sendall(data[: limit - sent])
                        break
                    dst.sendall(data)
                    sent += len(data)
            except OSError:
                pass
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        threading.Thread(target=pump, args=(client, upstream, None), daemon=True).start()
        pump(upstream, client, limit)


def whole_request(client: socket.socket) -> bytes:
    """One HTTP request as the client sent it, however many reads it takes: its head, then as
    many body bytes as its Content-Length says."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = client.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def main() -> None:
    with Client(URL) as state:
        every_method_is_there(state)
        kv(state)
        leases_and_fencing(state)
        semaphores_and_paths(state)
        queues(state)
        workflows(state)
        sessions_checkpoints_knowledge(state)
        admin_and_transfer(state)
        watch(state)
    watch_resumes_through_a_dropped_connection()
    a_lost_answer_is_resent_and_applied_once()
    a_restarting_server_is_waited_out_and_a_stranger_is_not_taken_for_it()
    asyncio.run(async_client())
    print(f"{checks} client checks passed")


if __name__ == "__main__":
    main()
