"""A Python client for state: durable, atomic, shared state for AI agents.

    from state_client import Client, ConflictError

    with Client("http://127.0.0.1:7478") as state:
        state.state_set("plan", {"step": 1}, expected_version=0)   # create only
        current = state.state_get("plan")
        try:
            state.state_set("plan", {"step": 2}, expected_version=current["version"])
        except ConflictError as lost:
            print("someone else wrote", lost.current_value, "at version", lost.current_version)

Every operation of the server's REST API is a method named as the MCP tool is (`state_get`,
`lease_acquire`, `workflow_claim`, ...); `AsyncClient` has the same methods, awaited.
"""

from ._client import AsyncClient, Client
from ._errors import (
    CompactedError,
    ConflictError,
    FencedError,
    ForbiddenError,
    InvalidArgumentError,
    NotFoundError,
    StateError,
    UnauthorizedError,
    UnavailableError,
    WatchLaggedError,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient",
    "Client",
    "CompactedError",
    "ConflictError",
    "FencedError",
    "ForbiddenError",
    "InvalidArgumentError",
    "NotFoundError",
    "StateError",
    "UnauthorizedError",
    "UnavailableError",
    "WatchLaggedError",
]
