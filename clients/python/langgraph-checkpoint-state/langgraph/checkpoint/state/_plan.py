"""Sans-I/O plumbing shared by the saver and the store.

Every operation is written once, as a generator that yields the server calls it needs and
receives their answers (or has their exceptions thrown into it). Two small drivers run such a
plan: one over the blocking `state_client.Client`, one over `AsyncClient`. That keeps the sync
and async halves of `StateSaver` and `StateStore` from drifting apart: there is one copy of every
rule about keys, leases and transactions, and the drivers only move bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from state_client import AsyncClient, Client

T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """One server operation: the name of a `Client`/`AsyncClient` method and its keyword arguments."""

    operation: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Gather:
    """Independent calls. The async driver runs them concurrently, the blocking one in order.
    The plan receives one entry per call: its answer, or the exception it raised (not raised)."""

    calls: tuple[Call, ...]


@dataclass(frozen=True)
class Emit:
    """An item a listing plan hands to its consumer before it continues."""

    item: Any


Step = Call | Gather | Emit
Plan = Generator[Step, Any, T]


def call(operation: str, **arguments: Any) -> Plan[dict[str, Any]]:
    """`answer = yield from call("state_get", key=...)`: one call, its answer or its exception."""
    answer: dict[str, Any] = yield Call(operation, {k: v for k, v in arguments.items() if v is not None})
    return answer


def gather(calls: Sequence[Call]) -> Plan[list[Any]]:
    """Several independent calls; each entry is an answer or the exception that call raised."""
    if not calls:
        return []
    answers: list[Any] = yield Gather(tuple(calls))
    return answers


def make_call(operation: str, **arguments: Any) -> Call:
    return Call(operation, {k: v for k, v in arguments.items() if v is not None})


class SyncRunner:
    """Runs plans over a blocking client (or, when only an `AsyncClient` was given, refuses with
    a message that says which methods to use instead)."""

    def __init__(self, client: Client | None, owner: str):
        self.client = client
        self.owner = owner

    def _require(self) -> Client:
        if self.client is None:
            raise TypeError(
                f"{self.owner} was built with only an AsyncClient, so its blocking methods cannot "
                "run; use the async ones (ainvoke, astream, aget_state...) or give it a "
                f"state_client.Client too ({self.owner}.from_url builds both)"
            )
        return self.client

    def execute(self, step: Call | Gather) -> Any:
        client = self._require()
        if isinstance(step, Call):
            return getattr(client, step.operation)(**step.arguments)
        answers: list[Any] = []
        for one in step.calls:
            try:
                answers.append(getattr(client, one.operation)(**one.arguments))
            except Exception as error:  # handed to the plan, which decides
                answers.append(error)
        return answers

    def _drive(self, plan: Plan[T]) -> Generator[Any, None, T]:
        send: Any = None
        throw: BaseException | None = None
        while True:
            try:
                step = plan.throw(throw) if throw is not None else plan.send(send)
            except StopIteration as done:
                result: T = done.value
                return result
            send, throw = None, None
            if isinstance(step, Emit):
                yield step.item
                continue
            try:
                send = self.execute(step)
            except Exception as error:
                throw = error

    def run(self, plan: Plan[T]) -> T:
        driver = self._drive(plan)
        try:
            next(driver)
        except StopIteration as done:
            result: T = done.value
            return result
        driver.close()
        raise TypeError("this plan emits items: iterate it instead of running it")

    def iterate(self, plan: Plan[None]) -> Iterator[Any]:
        yield from self._drive(plan)


class AsyncRunner:
    """Runs plans over an `AsyncClient`, or over the blocking client in a worker thread when no
    `AsyncClient` was given (so an async graph never blocks its event loop on the saver)."""

    def __init__(self, aclient: AsyncClient | None, fallback: SyncRunner):
        self.aclient = aclient
        self.fallback = fallback

    async def execute(self, step: Call | Gather) -> Any:
        if self.aclient is None:
            self.fallback._require()
            return await asyncio.to_thread(self.fallback.execute, step)
        if isinstance(step, Call):
            return await getattr(self.aclient, step.operation)(**step.arguments)
        results = await asyncio.gather(
            *(getattr(self.aclient, one.operation)(**one.arguments) for one in step.calls),
            return_exceptions=True,
        )
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, Exception):
                raise result
        return list(results)

    async def run(self, plan: Plan[T]) -> T:
        send: Any = None
        throw: BaseException | None = None
        while True:
            try:
                step = plan.throw(throw) if throw is not None else plan.send(send)
            except StopIteration as done:
                result: T = done.value
                return result
            send, throw = None, None
            if isinstance(step, Emit):
                plan.close()
                raise TypeError("this plan emits items: iterate it instead of running it")
            try:
                send = await self.execute(step)
            except Exception as error:
                throw = error

    async def iterate(self, plan: Plan[None]) -> AsyncIterator[Any]:
        send: Any = None
        throw: BaseException | None = None
        try:
            while True:
                try:
                    step = plan.throw(throw) if throw is not None else plan.send(send)
                except StopIteration:
                    return
                send, throw = None, None
                if isinstance(step, Emit):
                    yield step.item
                    continue
                try:
                    send = await self.execute(step)
                except Exception as error:
                    throw = error
        finally:
            plan.close()
