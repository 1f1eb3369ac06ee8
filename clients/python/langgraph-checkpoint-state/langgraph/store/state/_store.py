"""`StateStore`: LangGraph's long-term memory store over a `state` server."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from langgraph.checkpoint.state._keys import checked, escape, unescape
from langgraph.checkpoint.state._plan import (
    AsyncRunner,
    Call,
    Plan,
    SyncRunner,
    call,
    gather,
    make_call,
)
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)
from state_client import AsyncClient, Client, NotFoundError

if TYPE_CHECKING:
    from langgraph.store.base import TTLConfig

DEFAULT_PREFIX = "langgraph/store/"

_TXN_OPS = 128
_BATCH_KEYS = 1000
_PAGE = 1000
# knowledge_save refuses notes over 64 KiB; knowledge_recall returns at most 50 notes within
# at most 32000 tokens, and a query of at most 4096 bytes.
_MAX_NOTE_BYTES = 64 * 1024
_RECALL_ITEMS = 50
_RECALL_TOKENS = 32_000
_MAX_QUERY_BYTES = 4096
_MAX_SCOPE_BYTES = 256


class StateIndexConfig(TypedDict, total=False):
    """Which parts of an item `search(query=...)` matches against, as LangGraph's `IndexConfig`
    `fields` (`["$"]`, the whole item, by default). The server ranks by BM25 over words, so
    there are no embeddings: `dims` and `embed`, if given, are ignored."""

    fields: list[str] | None
    dims: int
    embed: Any


def _truncate(text: str, limit: int) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= limit else data[:limit].decode("utf-8", errors="ignore")


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """InMemoryStore's namespace matching: prefix or suffix, `*` matching any one label."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or k == p for k, p in pairs)


def _compare(item_value: Any, filter_value: Any) -> bool:
    """InMemoryStore's filter rule: nested dicts match key by key, lists element by element,
    `$eq/$ne/$gt/$gte/$lt/$lte` dicts apply operators, anything else compares equal."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(_operator(item_value, op, value) for op, value in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(_compare(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(_compare(i, f) for i, f in zip(item_value, filter_value, strict=True))
        )
    return bool(item_value == filter_value)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$gt":
        return float(value) > float(operand)
    if operator == "$gte":
        return float(value) >= float(operand)
    if operator == "$lt":
        return float(value) < float(operand)
    if operator == "$lte":
        return float(value) <= float(operand)
    if operator == "$ne":
        return bool(value != operand)
    raise ValueError(f"Unsupported operator: {operator}")


def _validate(namespace: tuple[str, ...]) -> None:
    # Labels become key segments joined by `/`, with an empty segment ending the namespace;
    # an empty label would be ambiguous (LangGraph's own methods refuse it too).
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidNamespaceError(f"Namespace labels must be non-empty strings: {namespace!r}")


class StateStore(BaseStore):
    """LangGraph's `BaseStore` (long-term memory) over a `state` server.

    Items are keys `{prefix}items/{label}/{label}//{key}` (labels and key escaped: `%`, `/` and
    control characters percent-encoded), holding the value as JSON with its timestamps. Writes
    of one batch go out in transactions of up to 128 items.

    - `search(query=...)` is answered by the server's `knowledge_recall` (BM25): every indexed
      item is also a note (id = the item's key, scope = its namespace) holding the text of the
      index fields (`["$"]`, the whole item, by default; `index=False` turns indexing off, and
      `put(..., index=...)` overrides it per item). Matches come first, best first, with their
      score; the rest of the items that pass the filter follow with `score=None`, so a query
      never returns fewer items than the same search without one (as InMemoryStore does when
      some items have no vectors).
    - TTL: `ttl` in minutes becomes the key's expiry; `refresh_ttl` on get/search writes the
      item again with the same TTL (unless it changed meanwhile). Expired items are gone from
      get, search and list_namespaces at once: the server expires keys itself.
    - Everything else follows InMemoryStore: search order (namespaces in the order they first
      appear, items in creation order), filter operators, offset/limit slicing, a batch's reads
      seeing the state before its writes, the last put of a key in a batch winning.
    """

    supports_ttl = True

    def __init__(
        self,
        client: Client | None = None,
        *,
        aclient: AsyncClient | None = None,
        prefix: str = DEFAULT_PREFIX,
        index: StateIndexConfig | Literal[False] | None = None,
        ttl: TTLConfig | None = None,
        owns_clients: bool = False,
    ) -> None:
        """
        Args:
            client: Blocking client, for `get`, `put`, `search`...
            aclient: Async client, for `aget`, `aput`, `asearch`...
            prefix: Key prefix of everything this store keeps (and of its notes' ids).
            index: Fields to index for `search(query=...)` (default: the whole item), or False.
            ttl: LangGraph TTLConfig: `default_ttl` minutes for puts without one, and
                `refresh_on_read` (default True) for get/search.
            owns_clients: Close the clients on `close()`/`aclose()`.
        """
        if client is None and aclient is None:
            raise TypeError("StateStore needs a state_client.Client, an AsyncClient, or both (see StateStore.from_url)")
        self.client = client
        self.aclient = aclient
        self.prefix = prefix
        self.ttl_config = ttl
        self._owns_clients = owns_clients
        if index is False:
            self._fields: list[tuple[str, str | list[str]]] | None = None
        else:
            fields = (index or {}).get("fields") or ["$"]
            self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in fields]
        self._sync = SyncRunner(client, type(self).__name__)
        self._async = AsyncRunner(aclient, self._sync)

    @classmethod
    def from_url(cls, url: str | None = None, token: str | None = None, **kwargs: Any) -> StateStore:
        """A store with its own `Client` and `AsyncClient` for `url` (default $STATE_URL, then
        http://127.0.0.1:7478) and `token` (default $STATE_TOKEN), closed with the store."""
        return cls(Client(url, token=token), aclient=AsyncClient(url, token=token), owns_clients=True, **kwargs)

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> StateStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def close(self) -> None:
        if self._owns_clients and self.client is not None:
            self.client.close()

    async def aclose(self) -> None:
        if self._owns_clients:
            if self.aclient is not None:
                await self.aclient.aclose()
            if self.client is not None:
                self.client.close()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._sync.run(self._batch_plan(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._async.run(self._batch_plan(list(ops)))

    # ---- keys ------------------------------------------------------------------------------

    def _items_root(self) -> str:
        return f"{self.prefix}items/"

    def _namespace_path(self, namespace: tuple[str, ...]) -> str:
        return "/".join(escape(label) for label in namespace)

    def _items_prefix(self, namespace_prefix: tuple[str, ...]) -> str:
        """Keys of the items whose namespace starts with `namespace_prefix`."""
        path = self._namespace_path(namespace_prefix)
        return self._items_root() + (path + "/" if path else "")

    def _item_key(self, namespace: tuple[str, ...], key: str) -> str:
        return checked(
            f"{self._items_root()}{self._namespace_path(namespace)}//{escape(key)}",
            f"item {key!r} of namespace {namespace!r}",
        )

    def _decode(self, item_key: str) -> tuple[tuple[str, ...], str] | None:
        rest = item_key[len(self._items_root()) :]
        path, sep, key = rest.partition("//")
        if not sep:
            return None
        return tuple(unescape(label) for label in path.split("/")) if path else (), unescape(key)

    def _scope(self, namespace: tuple[str, ...]) -> str:
        """The notes' scope of a namespace: readable when short enough, else a digest."""
        scope = f"{self.prefix}{self._namespace_path(namespace)}"
        if len(scope.encode("utf-8")) <= _MAX_SCOPE_BYTES:
            return scope
        digest = hashlib.sha256(scope.encode("utf-8")).hexdigest()
        return f"{_truncate(self.prefix, 64)}#{digest}"

    def _text(self, value: dict[str, Any], index: Literal[False] | list[str] | None) -> str | None:
        """The text an item is found by, or None when it is not indexed."""
        if index is False or (index is None and self._fields is None):
            return None
        paths = self._fields if index is None else [(p, p if p == "$" else tokenize_path(p)) for p in index]
        texts: list[str] = []
        for _, tokens in paths or []:
            texts.extend(t for t in get_text_at_path(value, tokens) if t and t.strip())
        text = _truncate("\n\n".join(texts), _MAX_NOTE_BYTES)
        return text if text.strip() else None

    # ---- plans -----------------------------------------------------------------------------

    @staticmethod
    def _item(record: dict[str, Any]) -> Item:
        return Item(
            value=record["value"],
            key=record["key"],
            namespace=tuple(record["namespace"]),
            created_at=datetime.fromisoformat(record["created_at"]),
            updated_at=datetime.fromisoformat(record["updated_at"]),
        )

    def _scan_plan(self, prefix: str) -> Plan[list[str]]:
        keys: list[str] = []
        cursor: str | None = None
        while True:
            page = yield from call("state_list", prefix=prefix, limit=_PAGE, cursor=cursor, include_values=False)
            keys.extend(e["key"] for e in page.get("entries") or [])
            cursor = page.get("next_cursor")
            if not cursor:
                return keys

    def _read_plan(self, keys: Sequence[str]) -> Plan[dict[str, dict[str, Any]]]:
        """The live entries (value, mod_revision, create_revision) of `keys`, from snapshots of
        up to 1000 keys each."""
        entries: dict[str, dict[str, Any]] = {}
        keys = list(dict.fromkeys(keys))
        for start in range(0, len(keys), _BATCH_KEYS):
            answer = yield from call("state_batch_get", keys=keys[start : start + _BATCH_KEYS])
            for entry in answer.get("entries") or []:
                if entry.get("status") == "ok" and isinstance(entry.get("value"), dict):
                    entries[entry["key"]] = entry
        return entries

    def _batch_plan(self, ops: list[Op]) -> Plan[list[Result]]:
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, (GetOp, PutOp)):
                _validate(op.namespace)
            elif isinstance(op, SearchOp):
                _validate(op.namespace_prefix)
            elif not isinstance(op, ListNamespacesOp):
                raise ValueError(f"Unknown operation type: {type(op)}")
            if isinstance(op, PutOp):
                if not op.namespace:
                    raise InvalidNamespaceError("Namespace cannot be empty.")
                puts[(op.namespace, op.key)] = op  # the last put of a key wins

        # Reads see the state before this batch's writes, as in InMemoryStore.
        put_keys = {self._item_key(ns, key): (ns, key) for ns, key in puts}
        get_keys = [self._item_key(op.namespace, op.key) for op in ops if isinstance(op, GetOp)]
        snapshot = yield from self._read_plan(get_keys + list(put_keys))
        refresh: dict[str, dict[str, Any]] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                entry = snapshot.get(self._item_key(op.namespace, op.key))
                results[i] = self._item(entry["value"]) if entry else None
                if entry and op.refresh_ttl and entry["value"].get("ttl"):
                    refresh[entry["key"]] = entry
            elif isinstance(op, SearchOp):
                found, seen = yield from self._search_plan(op)
                results[i] = found
                if op.refresh_ttl:
                    refresh.update(seen)
            elif isinstance(op, ListNamespacesOp):
                results[i] = yield from self._list_namespaces_plan(op)
        yield from self._write_plan(puts, snapshot)
        yield from self._refresh_plan({k: e for k, e in refresh.items() if k not in put_keys})
        return results

    def _write_plan(
        self, puts: dict[tuple[tuple[str, ...], str], PutOp], snapshot: dict[str, dict[str, Any]]
    ) -> Plan[None]:
        """Items first (in transactions), then their notes: a search joins notes with live
        items, so a note written late or left behind by a crash is never returned on its own."""
        now = datetime.now(timezone.utc).isoformat()
        writes: list[dict[str, Any]] = []
        notes: list[Call] = []
        for (namespace, key), op in puts.items():
            item_key = self._item_key(namespace, key)
            previous = snapshot.get(item_key)
            before = previous["value"] if previous else None
            if op.value is None:
                if previous:
                    writes.append({"op": "delete", "key": item_key})
                if before and before.get("indexed"):
                    notes.append(make_call("knowledge_delete", id=item_key))
                continue
            text = self._text(dict(op.value), op.index)
            record = {
                "namespace": list(namespace),
                "key": key,
                "value": dict(op.value),
                "created_at": before["created_at"] if before else now,
                "updated_at": now,
                "ttl": op.ttl,
                "indexed": text is not None,
            }
            write: dict[str, Any] = {"op": "put", "key": item_key, "value": record}
            if op.ttl is not None:
                write["ttl_seconds"] = float(op.ttl) * 60.0
            writes.append(write)
            if text is not None:
                notes.append(
                    make_call(
                        "knowledge_save",
                        id=item_key,
                        content=text,
                        scope=self._scope(namespace),
                        source="langgraph store",
                    )
                )
            elif before and before.get("indexed"):
                notes.append(make_call("knowledge_delete", id=item_key))
        for start in range(0, len(writes), _TXN_OPS):
            yield from call("state_txn", success=writes[start : start + _TXN_OPS])
        for answer in (yield from gather(notes)):
            if isinstance(answer, Exception) and not isinstance(answer, NotFoundError):
                raise answer

    def _refresh_plan(self, entries: dict[str, dict[str, Any]]) -> Plan[None]:
        """Write items read with refresh_ttl again with their TTL, each only if unchanged since
        the read (a change set its own TTL)."""
        pending = list(entries.values())
        for start in range(0, len(pending), _TXN_OPS):
            batch = pending[start : start + _TXN_OPS]
            for _ in range(2):
                if not batch:
                    break
                answer = yield from call(
                    "state_txn",
                    compare=[{"key": e["key"], "mod_revision": e["mod_revision"]} for e in batch],
                    success=[
                        {
                            "op": "put",
                            "key": e["key"],
                            "value": e["value"],
                            "ttl_seconds": float(e["value"]["ttl"]) * 60.0,
                        }
                        for e in batch
                    ],
                )
                if answer.get("succeeded"):
                    break
                failed = set(answer.get("failed_compares") or [])
                batch = [e for i, e in enumerate(batch) if i not in failed]

    def _search_plan(self, op: SearchOp) -> Plan[tuple[list[SearchItem], dict[str, dict[str, Any]]]]:
        prefix = self._items_prefix(op.namespace_prefix)
        keys = yield from self._scan_plan(prefix)
        entries = yield from self._read_plan(keys)
        # InMemoryStore's order: namespaces as they first appeared, items as they were created
        # (a dict's insertion order; re-putting a key keeps its place).
        first: dict[tuple[str, ...], int] = {}
        for entry in entries.values():
            ns = tuple(entry["value"]["namespace"])
            first[ns] = min(first.get(ns, entry["create_revision"]), entry["create_revision"])
        ordered = sorted(
            entries.values(), key=lambda e: (first[tuple(e["value"]["namespace"])], e["create_revision"], e["key"])
        )
        if op.filter:
            ordered = [e for e in ordered if all(_compare(e["value"]["value"].get(k), v) for k, v in op.filter.items())]
        ranked: list[tuple[dict[str, Any], float | None]] = [(e, None) for e in ordered]
        query = _truncate(op.query, _MAX_QUERY_BYTES) if op.query else ""
        if query.strip() and ordered:
            namespaces = {tuple(e["value"]["namespace"]) for e in ordered}
            scope = self._scope(next(iter(namespaces))) if len(namespaces) == 1 else None
            recalled = yield from call(
                "knowledge_recall", query=query, scope=scope, limit=_RECALL_ITEMS, max_tokens=_RECALL_TOKENS
            )
            scores: dict[str, float] = {}
            orphans: list[Call] = []
            listed = set(keys)
            for note in recalled.get("items") or []:
                note_id = note.get("id", "")
                if note_id in entries:
                    scores.setdefault(note_id, float(note.get("score") or 0.0))
                elif note_id.startswith(prefix) and note_id not in listed:
                    # Its item expired or a crash split them: the note alone is never an answer.
                    orphans.append(make_call("knowledge_delete", id=note_id))
            yield from gather(orphans)
            matched = [e for e in ordered if e["key"] in scores]
            matched.sort(key=lambda e: -scores[e["key"]])
            ranked = [(e, scores[e["key"]]) for e in matched] + [(e, None) for e in ordered if e["key"] not in scores]
        page = ranked[op.offset : op.offset + op.limit]
        found = [
            SearchItem(
                namespace=tuple(e["value"]["namespace"]),
                key=e["value"]["key"],
                value=e["value"]["value"],
                created_at=datetime.fromisoformat(e["value"]["created_at"]),
                updated_at=datetime.fromisoformat(e["value"]["updated_at"]),
                score=score,
            )
            for e, score in page
        ]
        return found, {e["key"]: e for e, _ in page if e["value"].get("ttl")}

    def _list_namespaces_plan(self, op: ListNamespacesOp) -> Plan[list[tuple[str, ...]]]:
        literal: list[str] = []
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                for label in condition.path:
                    if label == "*":
                        break
                    literal.append(label)
                break
        keys = yield from self._scan_plan(self._items_prefix(tuple(literal)))
        namespaces: list[tuple[str, ...]] = []
        for key in keys:
            decoded = self._decode(key)
            if decoded is not None:
                namespaces.append(decoded[0])
        unique = list(dict.fromkeys(namespaces))
        if op.match_conditions:
            unique = [ns for ns in unique if all(_matches(c, ns) for c in op.match_conditions)]
        # max_depth truncates deeper namespaces (and merges those that become equal).
        listed = sorted({ns[: op.max_depth] for ns in unique}) if op.max_depth is not None else sorted(unique)
        return listed[op.offset : op.offset + op.limit]
