"""LangGraph's long-term memory store over a `state` server, with BM25 search.

    from langgraph.store.state import StateStore

    with StateStore.from_url("http://127.0.0.1:7478") as store:
        store.put(("memories", "alice"), "m1", {"text": "prefers dark mode"})
        store.search(("memories", "alice"), query="display preferences")

See `StateStore` and the package README.
"""

from ._store import DEFAULT_PREFIX, StateIndexConfig, StateStore

__all__ = ["DEFAULT_PREFIX", "StateIndexConfig", "StateStore"]
