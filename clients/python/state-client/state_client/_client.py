"""The clients: `Client` (blocking) and `AsyncClient` (asyncio), over state-http's REST API v1.

Every write is sent with an idempotency key, and resent with the same key when the connection
drops or the store answers `unavailable`, so a write is applied once even when its answer is
lost. Refusals arrive as exceptions from `_errors`.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from ._errors import StateError, UnavailableError, from_problem
from ._operations import ROUTES, AsyncOperations, Operations
from ._watch import Parser, Resume, resumable

DEFAULT_URL = "http://127.0.0.1:7478"
USER_AGENT = "state-client-python"


def _settings(url: str | None, token: str | None) -> tuple[str, dict[str, str]]:
    url = (url or os.environ.get("STATE_URL") or DEFAULT_URL).rstrip("/")
    token = token if token is not None else os.environ.get("STATE_TOKEN")
    headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return url, headers


def _request(operation: str, arguments: dict[str, Any], key: str | None) -> dict[str, Any]:
    route = ROUTES[operation]
    request: dict[str, Any] = {"method": route.method, "url": route.url(arguments), "params": route.params(arguments)}
    has_body, body = route.json_body(arguments)
    if has_body:
        request["json"] = body
    if key is not None:
        request["headers"] = {"Idempotency-Key": key}
    return request


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.is_success:
        return response.json() if response.content else {}
    try:
        problem = response.json()
    except ValueError:
        problem = None
    if not isinstance(problem, dict) or "code" not in problem:
        # Not a state server's answer (a proxy's error page, another server at that URL): a 404
        # from it must not read as "the key is absent".
        status = response.status_code
        detail = (f"{response.request.url} answered HTTP {status} ({response.reason_phrase}) without a problem "
                  f"document: check the URL (is a state server listening there?)")
        if status in (502, 503, 504):
            return _raise(UnavailableError(status, "unavailable", detail))
        return _raise(StateError(status, f"http_{status}", detail))
    raise from_problem(response.status_code, problem, response.reason_phrase)


def _raise(error: StateError) -> dict[str, Any]:
    raise error


def _timeout(base: float, arguments: dict[str, Any]) -> float:
    # A call that waits on the server (a receive, an awaited signal) gets its wait on top.
    wait = arguments.get("wait_seconds")
    return base + float(wait) if isinstance(wait, (int, float)) else base


def _call_request(profile: str, name: str, arguments: dict[str, Any] | None, key: str | None) -> dict[str, Any]:
    return {"method": "POST", "url": f"/v1/call/{profile}/{name}", "json": arguments or {},
            "headers": {"Idempotency-Key": key or str(uuid.uuid4())}}


def _backoff(attempt: int) -> float:
    return min(1.0, 0.05 * (2**attempt)) * (0.5 + random.random() / 2)


def _last(attempts: int, retries: int | None, deadline: float, pause: float) -> bool:
    return (retries is not None and attempts > retries) or time.monotonic() + pause >= deadline


def _gave_up(error: Exception, url: str, attempts: int, timeout: float) -> StateError:
    if isinstance(error, StateError):
        return error
    return UnavailableError(
        503, "unavailable",
        f"could not reach {url} within {timeout:g} s ({attempts} attempts; the last: {error!r}). A write sent may "
        f"have applied: resend it with the same idempotency_key. Pass a larger timeout= to wait out a server "
        f"that is restarting.")


class Client(Operations):
    """A blocking client. `url` defaults to $STATE_URL, then http://127.0.0.1:7478; `token` to
    $STATE_TOKEN. A call is resent after a dropped connection or an `unavailable` answer (with
    the same idempotency key, so a write still applies once) until `timeout` seconds have passed
    in all, which outlasts a server restarting; `retries` caps the resends too, if given.

        with Client() as state:
            state.state_set("config/mode", {"fast": True})
            state.state_get("config/mode")["value"]
    """

    def __init__(self, url: str | None = None, *, token: str | None = None, timeout: float = 30.0, retries: int | None = None,
                 transport: httpx.BaseTransport | None = None):
        self.url, headers = _settings(url, token)
        self.timeout = timeout
        self.retries = retries
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _send(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Sends `request`, resending it after a dropped connection or an `unavailable` answer
        until `timeout` seconds have passed in all (or `retries` resends, if given)."""
        deadline = time.monotonic() + timeout
        attempts = 0
        while True:
            attempts += 1
            try:
                return _answer(self._http.request(**request, timeout=max(deadline - time.monotonic(), 0.05)))
            except (httpx.TransportError, UnavailableError) as error:
                pause = _backoff(attempts)
                if _last(attempts, self.retries, deadline, pause):
                    raise _gave_up(error, self.url, attempts, timeout) from error
                time.sleep(pause)

    def _call(self, operation: str, arguments: dict[str, Any], idempotency_key: str | None) -> dict[str, Any]:
        key = (idempotency_key or str(uuid.uuid4())) if ROUTES[operation].mutating else None
        return self._send(_request(operation, arguments, key), _timeout(self.timeout, arguments))

    def call(self, profile: str, name: str, arguments: dict[str, Any] | None = None, *,
             idempotency_key: str | None = None) -> dict[str, Any]:
        """Call any operation of the catalog by name, compatibility profiles included
        (`profile`: native, agentcheckpoint, sidecar, caxton, memory, ...). Returns the reply
        (`outcome`, `result`, `error`) without raising for refusals."""
        return self._send(_call_request(profile, name, arguments, idempotency_key), self.timeout)

    def healthz(self) -> bool:
        """Whether the server and its store answer (the probe endpoint)."""
        try:
            return self._http.get("/healthz").is_success
        except httpx.TransportError:
            return False

    def metrics(self) -> str:
        """Prometheus metrics, as text."""
        response = self._http.get("/metrics")
        if not response.is_success:
            _answer(response)
        return response.text

    def watch(self, *, key: str | None = None, prefix: str | None = None, kind: str | None = None,
              from_revision: int | None = None, include_values: bool = True,
              idle_timeout: float = 60.0, reconnect_for: float = 60.0) -> Iterator[dict[str, Any]]:
        """Every change under `key` or `prefix` after `from_revision` (absent: from now on), one
        `{"revision", "events"}` batch per revision, in order, then live ones forever. A dropped
        connection or a stopping server is resumed after the last revision delivered, so nothing
        is skipped or repeated; so is a stream silent for `idle_timeout` seconds (the server sends a
        keep-alive every 15 s). It gives up (UnavailableError) after `reconnect_for` seconds without
        a connection. A watch the server ended for lagging raises WatchLaggedError."""
        resume = Resume(from_revision)
        params = _watch_params(key, prefix, kind, include_values)
        failures, failing_since = 0, None
        while True:
            try:
                with self._http.stream("GET", "/v1/watch", params=params, headers=resume.headers(),
                                       timeout=httpx.Timeout(self.timeout, read=idle_timeout)) as response:
                    if not response.is_success:
                        response.read()
                        _answer(response)
                    parser = Parser()
                    for line in response.iter_lines():
                        event = parser.line(line)
                        if event is None:
                            continue
                        batch = resume.take(event)
                        failures, failing_since = 0, None
                        if batch is not None:
                            yield batch
            except (httpx.TransportError, StateError) as error:
                if isinstance(error, StateError) and not resumable(error):
                    raise
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > reconnect_for:
                    raise _gave_up(error, self.url, failures + 1, reconnect_for) from error
                failures += 1
                time.sleep(_backoff(failures))


class AsyncClient(AsyncOperations):
    """The asyncio client: the same methods as `Client`, awaited.

        async with AsyncClient() as state:
            await state.state_set("config/mode", {"fast": True})
            async for batch in state.watch(prefix="config/"):
                ...
    """

    def __init__(self, url: str | None = None, *, token: str | None = None, timeout: float = 30.0, retries: int | None = None,
                 transport: httpx.AsyncBaseTransport | None = None):
        self.url, headers = _settings(url, token)
        self.timeout = timeout
        self.retries = retries
        self._http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """As `Client._send`."""
        deadline = time.monotonic() + timeout
        attempts = 0
        while True:
            attempts += 1
            try:
                return _answer(await self._http.request(**request, timeout=max(deadline - time.monotonic(), 0.05)))
            except (httpx.TransportError, UnavailableError) as error:
                pause = _backoff(attempts)
                if _last(attempts, self.retries, deadline, pause):
                    raise _gave_up(error, self.url, attempts, timeout) from error
                await asyncio.sleep(pause)

    async def _call(self, operation: str, arguments: dict[str, Any], idempotency_key: str | None) -> dict[str, Any]:
        key = (idempotency_key or str(uuid.uuid4())) if ROUTES[operation].mutating else None
        return await self._send(_request(operation, arguments, key), _timeout(self.timeout, arguments))

    async def call(self, profile: str, name: str, arguments: dict[str, Any] | None = None, *,
                   idempotency_key: str | None = None) -> dict[str, Any]:
        """As `Client.call`."""
        return await self._send(_call_request(profile, name, arguments, idempotency_key), self.timeout)

    async def healthz(self) -> bool:
        """As `Client.healthz`."""
        try:
            return (await self._http.get("/healthz")).is_success
        except httpx.TransportError:
            return False

    async def metrics(self) -> str:
        """As `Client.metrics`."""
        response = await self._http.get("/metrics")
        if not response.is_success:
            _answer(response)
        return response.text

    async def watch(self, *, key: str | None = None, prefix: str | None = None, kind: str | None = None,
                    from_revision: int | None = None, include_values: bool = True,
                    idle_timeout: float = 60.0, reconnect_for: float = 60.0) -> AsyncIterator[dict[str, Any]]:
        """As `Client.watch`, with `async for`."""
        resume = Resume(from_revision)
        params = _watch_params(key, prefix, kind, include_values)
        failures, failing_since = 0, None
        while True:
            try:
                async with self._http.stream("GET", "/v1/watch", params=params, headers=resume.headers(),
                                             timeout=httpx.Timeout(self.timeout, read=idle_timeout)) as response:
                    if not response.is_success:
                        await response.aread()
                        _answer(response)
                    parser = Parser()
                    async for line in response.aiter_lines():
                        event = parser.line(line)
                        if event is None:
                            continue
                        batch = resume.take(event)
                        failures, failing_since = 0, None
                        if batch is not None:
                            yield batch
            except (httpx.TransportError, StateError) as error:
                if isinstance(error, StateError) and not resumable(error):
                    raise
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > reconnect_for:
                    raise _gave_up(error, self.url, failures + 1, reconnect_for) from error
                failures += 1
                await asyncio.sleep(_backoff(failures))


def _watch_params(key: str | None, prefix: str | None, kind: str | None, include_values: bool) -> dict[str, str]:
    params = {"include_values": "true" if include_values else "false"}
    for name, value in (("key", key), ("prefix", prefix), ("kind", kind)):
        if value is not None:
            params[name] = value
    return params
