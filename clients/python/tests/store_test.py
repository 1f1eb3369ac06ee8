"""StateStore against a live state server, side by side with LangGraph's InMemoryStore.

    STATE_URL=http://127.0.0.1:7478 python clients/python/tests/store_test.py

The same operations go to both stores and their answers are compared wherever InMemoryStore
defines them: get, search order, filters ($eq/$ne/$gt/$gte/$lt/$lte, nested, lists), offsets
and limits, list_namespaces (prefix, suffix, wildcards, max_depth, limit, offset), deletes, a
batch's reads before its writes. Then what InMemoryStore has no counterpart for: search with a
natural-language query (BM25 via knowledge_recall; InMemoryStore ignores a query without
embeddings), per-item indexing, TTLs and their refresh, the async methods. Exits 1 on the
first difference, with what differed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from langgraph.store.base import BaseStore, GetOp, Item, PutOp, Result
from langgraph.store.memory import InMemoryStore
from langgraph.store.state import StateStore
from state_client import AsyncClient, Client

STATE_URL = os.environ.get("STATE_URL", "http://127.0.0.1:7478")
PASSED: list[str] = []


class Failure(Exception):
    pass


def check(condition: bool, what: str, detail: Any = "") -> None:
    if not condition:
        raise Failure(f"{what}: {detail}")


def view(items: Sequence[Item | None] | Result) -> list[tuple[tuple[str, ...], str, Any]]:
    """What two stores can agree on: namespace, key and value, in order (not the timestamps)."""
    if not isinstance(items, Sequence):
        items = [items]
    return [(i.namespace, i.key, i.value) for i in items if isinstance(i, Item)]


def same(what: str, ours: Any, theirs: Any) -> None:
    check(ours == theirs, f"{what} differs from InMemoryStore", f"\n  StateStore:    {ours}\n  InMemoryStore: {theirs}")


DATA: list[tuple[tuple[str, ...], str, dict[str, Any] | None]] = [
    (("users", "alice"), "prefs", {"theme": "dark", "score": 7, "tags": ["a", "b"], "meta": {"lang": "en", "v": 2}}),
    (("docs",), "d1", {"title": "Python tutorial", "body": "Learn python programming step by step", "score": 4.5}),
    (("users", "bob"), "prefs", {"theme": "light", "score": 3, "tags": ["b"], "meta": {"lang": "fr", "v": 1}}),
    (("docs",), "d2", {"title": "TypeScript guide", "body": "Types for javascript", "score": 3.0}),
    (("docs", "drafts"), "d3", {"title": "Rust notes", "body": "ownership and borrowing", "score": 5.0}),
    (("users", "alice"), "history", {"theme": "dark", "score": 11, "tags": ["c"], "meta": {"lang": "en", "v": 3}}),
    (("docs",), "d4", {"title": "Cooking", "body": "pasta with python-shaped noodles", "score": 1.0}),
    (("cache", "v1"), "x", {"score": 0}),
    (("cache", "v2"), "y", {"score": 2}),
    (("docs", "a/b"), "slash/key%", {"title": "odd names", "score": 2.5}),
    (
        ("users", "alice"),
        "prefs",
        {"theme": "solarized", "score": 8, "tags": ["a", "b"], "meta": {"lang": "en", "v": 2}},
    ),
    (("cache", "v1"), "x", None),  # a delete
]


def load(store: BaseStore) -> None:
    for namespace, key, value in DATA:
        if value is None:
            store.delete(namespace, key)
        else:
            store.put(namespace, key, value)


def compare_with_memory(ours: StateStore, memory: InMemoryStore) -> None:
    load(ours)
    load(memory)

    for namespace, key, _ in [*DATA, (("nope",), "missing", None)]:
        same(
            f"get{namespace, key}",
            view(ours.get(namespace, key)),
            view(memory.get(namespace, key)),
        )
    PASSED.append("get (including deleted and missing items) matches InMemoryStore")

    searches: list[dict[str, Any]] = [
        {"namespace_prefix": ()},
        {"namespace_prefix": ("docs",)},
        {"namespace_prefix": ("users",)},
        {"namespace_prefix": ("docs",), "limit": 2},
        {"namespace_prefix": ("docs",), "limit": 2, "offset": 2},
        {"namespace_prefix": (), "offset": 3, "limit": 100},
        {"namespace_prefix": (), "filter": {"theme": "dark"}},
        {"namespace_prefix": (), "filter": {"score": {"$gt": 3}}},
        {"namespace_prefix": (), "filter": {"score": {"$gte": 3, "$lt": 8}}},
        {"namespace_prefix": (), "filter": {"score": {"$lte": 2.5}}},
        {"namespace_prefix": (), "filter": {"score": {"$ne": 3}}},
        {"namespace_prefix": (), "filter": {"score": {"$eq": 3.0}}},
        {"namespace_prefix": ("users",), "filter": {"meta": {"lang": "en"}}},
        {"namespace_prefix": ("users",), "filter": {"tags": ["a", "b"]}},
        {"namespace_prefix": ("users",), "filter": {"tags": ["b"], "theme": "light"}},
        {"namespace_prefix": ("docs", "a/b")},
        {"namespace_prefix": ("nope",)},
    ]
    for arguments in searches:
        prefix = arguments.pop("namespace_prefix")
        same(
            f"search{prefix} {arguments}",
            view(ours.search(prefix, **arguments)),
            view(memory.search(prefix, **arguments)),
        )
    PASSED.append(
        f"search: {len(searches)} prefix/filter/limit/offset combinations match InMemoryStore, order included"
    )

    listings: list[dict[str, Any]] = [
        {},
        {"prefix": ("users",)},
        {"suffix": ("prefs",)},
        {"suffix": ("alice",)},
        {"prefix": ("*", "alice")},
        {"prefix": ("docs",), "max_depth": 1},
        {"max_depth": 1},
        {"max_depth": 2, "limit": 2, "offset": 1},
        {"prefix": ("cache",), "suffix": ("v2",)},
        {"limit": 1},
    ]
    # InMemoryStore also lists namespaces that hold no item (any namespace a get or a delete
    # touched stays a key of its dict); StateStore lists the namespaces that hold items. So the
    # reference is an InMemoryStore holding just the live items.
    live = InMemoryStore()
    for item in memory.search((), limit=1_000_000):
        live.put(item.namespace, item.key, item.value)
    for arguments in listings:
        same(f"list_namespaces {arguments}", ours.list_namespaces(**arguments), live.list_namespaces(**arguments))
    PASSED.append(
        f"list_namespaces: {len(listings)} prefix/suffix/wildcard/max_depth/limit/offset cases match InMemoryStore"
    )

    for store in (ours, memory):
        store.put(("batch",), "k", {"v": 1})
    ours_answers = ours.batch(
        [PutOp(("batch",), "k", {"v": 2}), GetOp(("batch",), "k"), PutOp(("batch",), "k", {"v": 3})]
    )
    memory_answers = memory.batch(
        [PutOp(("batch",), "k", {"v": 2}), GetOp(("batch",), "k"), PutOp(("batch",), "k", {"v": 3})]
    )
    same("a batch's get before its puts", view(ours_answers[1]), view(memory_answers[1]))
    same("the last put of a batch", view(ours.get(("batch",), "k")), view(memory.get(("batch",), "k")))
    PASSED.append("batch: reads see the state before the batch's writes, the last put of a key wins, as InMemoryStore")

    first = ours.get(("users", "alice"), "prefs")
    time.sleep(0.01)
    ours.put(("users", "alice"), "prefs", {"theme": "dark"})
    second = ours.get(("users", "alice"), "prefs")
    check(first is not None and second is not None, "re-put item readable")
    assert first is not None and second is not None
    check(
        second.created_at == first.created_at and second.updated_at > first.updated_at,
        "an update keeps created_at and moves updated_at",
        (first, second),
    )
    PASSED.append("an update keeps created_at and advances updated_at (as PostgresStore; InMemoryStore resets both)")


def query_search(store: StateStore) -> None:
    load(store)
    results = store.search(("docs",), query="python programming")
    keys = [r.key for r in results]
    scored = [r for r in results if r.score is not None]
    check(bool(scored), "a query finds the items that mention it", keys)
    check(keys[0] == "d1", "the best match comes first", [(r.key, r.score) for r in results])
    check(
        all(r.score is not None for r in results[: len(scored)])
        and all(r.score is None for r in results[len(scored) :]),
        "matches first, then the other items with score None",
        [(r.key, r.score) for r in results],
    )
    check(
        sorted(keys) == sorted(r.key for r in store.search(("docs",), limit=100)),
        "a query returns every item that passes the filter",
        keys,
    )
    scores = [s.score or 0.0 for s in scored]
    check(scores == sorted(scores, reverse=True), "scores descend", scored)
    best = [(r.key, round(r.score or 0, 3)) for r in scored]
    PASSED.append(f"search(query=...): BM25 matches first, best first ({best}), the rest after")

    filtered = store.search(("docs",), query="python", filter={"score": {"$lt": 2}})
    check([r.key for r in filtered] == ["d4"], "query and filter together", [(r.key, r.score) for r in filtered])
    paged = store.search(("docs",), query="python programming", limit=1, offset=1)
    check([r.key for r in paged] == keys[1:2], "query with offset/limit pages the ranking", [r.key for r in paged])
    PASSED.append("search(query, filter, offset, limit) combine as a filtered ranking, then a slice")

    store.put(("idx",), "plain", {"text": "zanzibar expedition"}, index=False)
    store.put(("idx",), "titled", {"title": "quokka habits", "body": "zanzibar"}, index=["title"])
    only = store.search(("idx",), query="zanzibar")
    check(
        all(r.score is None for r in only),
        "index=False and unindexed fields are not matched",
        [(r.key, r.score) for r in only],
    )
    hit = store.search(("idx",), query="quokka")
    check(
        [(r.key, r.score is not None) for r in hit][:1] == [("titled", True)],
        "index=[fields] indexes those fields",
        hit,
    )
    PASSED.append("put(index=False) is not searchable by query; put(index=['title']) matches its title only")

    store.put(("docs",), "d4", {"title": "Cooking", "body": "risotto", "score": 1.0})
    again = [r.key for r in store.search(("docs",), query="noodles") if r.score is not None]
    check("d4" not in again, "an update re-indexes the new text", again)
    store.delete(("docs",), "d1")
    gone = [r.key for r in store.search(("docs",), query="tutorial")]
    check("d1" not in gone, "a deleted item is not found by query", gone)
    PASSED.append("an update re-indexes an item's text; a delete removes it from query results")


def ttl(store: StateStore) -> None:
    minutes = 0.05  # 3 s
    store.put(("ttl",), "short", {"text": "ephemeral wombat"}, ttl=minutes)
    store.put(("ttl",), "kept", {"text": "refreshed wombat"}, ttl=minutes)
    store.put(("ttl",), "forever", {"text": "permanent wombat"})
    check(store.get(("ttl",), "short", refresh_ttl=False) is not None, "an item with a TTL is there before it expires")
    time.sleep(1.8)
    check(store.get(("ttl",), "kept") is not None, "get refreshes the TTL")  # expires 3 s from now
    check(len(store.search(("ttl",), query="wombat", refresh_ttl=False)) == 3, "all three before expiry")
    time.sleep(1.8)  # 3.6 s after the puts, 1.8 s after the refresh
    check(store.get(("ttl",), "short", refresh_ttl=False) is None, "an unrefreshed item expires after its TTL")
    check(store.get(("ttl",), "kept", refresh_ttl=False) is not None, "a refreshed item outlives its first TTL")
    left = sorted(r.key for r in store.search(("ttl",), query="wombat", refresh_ttl=False))
    check(left == ["forever", "kept"], "search omits expired items", left)
    assert store.client is not None
    notes = store.client.knowledge_list(prefix=f"{store.prefix}items/ttl/")["notes"]  # the layout: items/{ns}//{key}
    check(
        f"{store.prefix}items/ttl//short" not in {n["id"] for n in notes},
        "a query search deletes the note of an expired item",
        [n["id"] for n in notes],
    )
    time.sleep(3.4)
    check(store.get(("ttl",), "kept", refresh_ttl=False) is None, "refresh_ttl=False does not refresh")
    check(store.list_namespaces(prefix=("ttl",)) == [("ttl",)], "the namespace stays while an item lives")
    PASSED.append(
        "ttl (minutes): items expire, get/search refresh the TTL, refresh_ttl=False does not, "
        "expired items (and their notes) leave search"
    )

    with_default = StateStore(store.client, prefix=store.prefix, ttl={"default_ttl": minutes, "refresh_on_read": False})
    with_default.put(("ttl2",), "d", {"v": 1})
    check(with_default.get(("ttl2",), "d") is not None, "TTLConfig default_ttl item present")
    time.sleep(3.5)
    check(with_default.get(("ttl2",), "d") is None, "TTLConfig default_ttl applies to puts without a ttl")
    PASSED.append("TTLConfig: default_ttl applies to puts without one; refresh_on_read=False reads without refreshing")


async def async_methods(prefix: str) -> None:
    async with AsyncClient(STATE_URL) as aclient:
        store = StateStore(aclient=aclient, prefix=prefix)
        memory = InMemoryStore()
        for s in (store, memory):
            await s.aput(("async", "one"), "a", {"n": 1, "text": "asynchronous kangaroo"})
            await s.aput(("async", "two"), "b", {"n": 2})
            await s.adelete(("async", "two"), "b")
        same("aget", view(await store.aget(("async", "one"), "a")), view(await memory.aget(("async", "one"), "a")))
        same("asearch", view(await store.asearch(("async",))), view(await memory.asearch(("async",))))
        same("alist_namespaces", await store.alist_namespaces(prefix=("async",)), [("async", "one")])
        found = await store.asearch(("async",), query="kangaroo")
        check([(r.key, r.score is not None) for r in found] == [("a", True)], "asearch with a query", found)
    PASSED.append("async methods (aput/aget/asearch/adelete/alist_namespaces) over AsyncClient")


def main() -> int:
    run = uuid.uuid4().hex[:8]
    with Client(STATE_URL) as client:
        if not client.healthz():
            print(f"no state server answers at {STATE_URL} (set STATE_URL)", file=sys.stderr)
            return 2
        try:
            compare_with_memory(StateStore(client, prefix=f"store-test/{run}/compare/"), InMemoryStore())
            query_search(StateStore(client, prefix=f"store-test/{run}/query/"))
            ttl(StateStore(client, prefix=f"store-test/{run}/ttl/"))
            asyncio.run(async_methods(f"store-test/{run}/async/"))
        except Failure as failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            return 1
    print(f"store_test against {STATE_URL}, key prefix store-test/{run}/")
    for line in PASSED:
        print(f"  ok  {line}")
    print("PASSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
