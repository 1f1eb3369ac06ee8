"""LangGraph checkpoints in a `state` server, with one writer per thread.

    from langgraph.checkpoint.state import StateSaver, ThreadBusyError

    with StateSaver.from_url("http://127.0.0.1:7478") as saver:
        graph = builder.compile(checkpointer=saver)
        with saver.hold("thread-1"):       # ThreadBusyError here if another worker has it
            graph.invoke(inputs, {"configurable": {"thread_id": "thread-1"}})

`StateSaver` implements the blocking and the async checkpointer methods, and every optional
capability of LangGraph's conformance suite (delete_for_runs, copy_thread, prune). See the
package README for the key layout and the one-writer-per-thread rules.
"""

from ._errors import ThreadBusyError
from ._saver import DEFAULT_LEASE_TTL, DEFAULT_PREFIX, StateSaver

__all__ = ["DEFAULT_LEASE_TTL", "DEFAULT_PREFIX", "StateSaver", "ThreadBusyError"]
