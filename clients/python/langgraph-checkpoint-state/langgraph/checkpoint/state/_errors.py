"""The one exception a caller of the saver handles differently from a failure of the server."""

from __future__ import annotations

from typing import Literal

BusyReason = Literal["held", "changed"]


class ThreadBusyError(RuntimeError):
    """Another worker owns this thread, so this saver wrote nothing.

    `StateSaver` lets one worker at a time write a thread (LangGraph issue #8796: two workers
    resuming the same thread each append checkpoints to the same parent and fork its history).
    This is raised instead of writing:

    - `reason == "held"`: another saver holds the thread's lease now (`holder`, until
      `expires_at`). A worker that died keeps the thread until its lease expires; after that the
      next writer gets it.
    - `reason == "changed"`: the thread was written by another worker after this saver last
      read it, so writing now would fork it. Load it again (a new `invoke`/`stream` or
      `get_state` reads the latest checkpoint) and continue from there.

    Nothing was written in either case; retrying after the wait, or after reloading, is safe.
    """

    def __init__(
        self,
        thread_id: str,
        *,
        reason: BusyReason,
        holder: str | None = None,
        expires_at: str | None = None,
        this_saver: str | None = None,
    ):
        self.thread_id = thread_id
        self.reason: BusyReason = reason
        self.holder = holder
        self.expires_at = expires_at
        self.this_saver = this_saver
        super().__init__(self._message())

    def _message(self) -> str:
        me = f" (this saver is {self.this_saver!r})" if self.this_saver else ""
        if self.reason == "held":
            who = repr(self.holder) if self.holder else "another saver"
            until = f" until {self.expires_at}" if self.expires_at else ""
            return (
                f"thread {self.thread_id!r} is being written by another worker: {who} holds its lease"
                f"{until}{me}. One worker writes a thread at a time, so nothing was written. Retry "
                "after the lease expires (a worker that died frees the thread then), or send this "
                "thread's runs to the worker that holds it."
            )
        who = f" ({self.holder!r})" if self.holder else ""
        return (
            f"thread {self.thread_id!r} was written by another worker{who} since this saver last read "
            f"it{me}; nothing was written, so its history did not fork. Load the thread again (a new "
            "invoke/stream, or get_state, reads its latest checkpoint) and continue from there."
        )
