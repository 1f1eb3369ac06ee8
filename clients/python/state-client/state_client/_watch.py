"""Server-sent events of `GET /v1/watch`, parsed into change batches, with the resume state a
reconnect needs (the last event id)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ._errors import StateError, from_problem


@dataclass
class Event:
    event: str = "message"
    id: str | None = None
    data: list[str] = field(default_factory=list)


class Parser:
    """Feeds lines, yields complete events (the text/event-stream format)."""

    def __init__(self) -> None:
        self._current = Event()

    def line(self, line: str) -> Event | None:
        if line == "":
            done, self._current = self._current, Event()
            return done if (done.data or done.event != "message") else None
        if line.startswith(":"):
            return None  # a keep-alive comment
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self._current.event = value
        elif name == "data":
            self._current.data.append(value)
        elif name == "id":
            self._current.id = value
        return None


class Resume:
    """Where a watch is: the revision it has delivered up to, sent as Last-Event-ID."""

    def __init__(self, from_revision: int | None):
        self.last_id: str | None = None if from_revision is None else str(from_revision)

    def headers(self) -> dict[str, str]:
        return {"Last-Event-ID": self.last_id} if self.last_id is not None else {}

    def take(self, event: Event) -> dict[str, Any] | None:
        """The change batch an event carries, if any; raises for a problem that ends the watch,
        returns None (after noting the position) for everything else."""
        if event.event == "problem":
            problem = json.loads("\n".join(event.data) or "{}")
            error = from_problem(int(problem.get("status", 503)), problem, "the watch ended")
            raise error
        if event.id is not None:
            self.last_id = event.id
        if event.event == "position" or not event.data:
            return None
        batch = json.loads("\n".join(event.data))
        return batch if isinstance(batch, dict) else None


def resumable(error: StateError) -> bool:
    """A watch ended by a stopping server is resumed after its last event; a lagged one is not
    (the changes in between are gone from its stream, and the caller has to know)."""
    return error.code == "unavailable"
