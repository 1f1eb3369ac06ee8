"""The server's problem documents (RFC 9457) as exceptions, one class per thing a caller does
differently: retry from the current value, give up, fix the call, wait and resend."""

from __future__ import annotations

from typing import Any


class StateError(Exception):
    """A call the server refused or could not answer. `code` is stable for programs
    (`conflict`, `fenced`, `not_found`, `invalid_arguments`, ...); `detail` says what to do."""

    def __init__(self, status: int, code: str, detail: str, problem: dict[str, Any] | None = None):
        super().__init__(f"{code}: {detail}" if detail else code)
        self.status = status
        self.code = code
        self.detail = detail
        self.problem = problem or {}

    @property
    def result(self) -> dict[str, Any] | None:
        """The operation's result, for conflicts, fences and not-founds."""
        result = self.problem.get("result")
        return result if isinstance(result, dict) else None

    @property
    def argument(self) -> str | None:
        """For invalid input: the argument at fault."""
        return self.problem.get("argument")


class ConflictError(StateError):
    """A precondition did not hold (a version, a create-only write, a compare). Nothing was
    changed; `current_value` and `current_version` are what to retry from."""

    @property
    def current_version(self) -> int | None:
        return (self.result or {}).get("version")

    @property
    def current_value(self) -> Any:
        return (self.result or {}).get("value")


class FencedError(StateError):
    """The lease or claim token is no longer current: another worker holds it now. Nothing was
    changed; stop writing on behalf of that lease."""


class NotFoundError(StateError):
    """It does not exist."""


class CompactedError(NotFoundError):
    """The history asked for was compacted; `compacted_revision` is the newest revision gone."""

    @property
    def compacted_revision(self) -> int | None:
        return self.problem.get("compacted_revision")


class InvalidArgumentError(StateError):
    """The call's arguments are wrong; nothing was changed. `argument` names the culprit."""


class UnauthorizedError(StateError):
    """The server needs a token (pass `token=` or set STATE_TOKEN)."""


class ForbiddenError(StateError):
    """The token does not cover what the call touches."""


class UnavailableError(StateError):
    """The store could not answer (stopping, its owner restarting, out of space). The client
    already resent the call with its idempotency key as many times as it was told to."""


class WatchLaggedError(StateError):
    """A watch fell too far behind and was ended by the server; `resume_after` is the revision
    to start a new watch after (changes between were not delivered)."""

    @property
    def resume_after(self) -> int | None:
        return self.problem.get("resume_after")


def from_problem(status: int, problem: Any, fallback: str) -> StateError:
    if not isinstance(problem, dict):
        problem = {}
    code = str(problem.get("code") or _code_of_status(status))
    detail = str(problem.get("detail") or fallback)
    if code == "conflict":
        cls: type[StateError] = ConflictError
    elif code == "fenced":
        cls = FencedError
    elif code == "compacted" or status == 410:
        cls = CompactedError
    elif code == "not_found" or status == 404:
        cls = NotFoundError
    elif code == "watch_lagged":
        cls = WatchLaggedError
    elif status == 401:
        cls = UnauthorizedError
    elif status == 403:
        cls = ForbiddenError
    elif status in (400, 413, 422):
        cls = InvalidArgumentError
    elif status in (502, 503, 504):
        cls = UnavailableError
    else:
        cls = StateError
    return cls(status, code, detail, problem)


def _code_of_status(status: int) -> str:
    return {401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict", 412: "conflict", 503: "unavailable"}.get(
        status, f"http_{status}"
    )
