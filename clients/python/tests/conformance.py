"""LangGraph's checkpointer conformance suite against StateSaver on a live state server.

    STATE_URL=http://127.0.0.1:7478 python clients/python/tests/conformance.py

Every suite gets a fresh saver under a key prefix of its own (the suites reuse thread names),
through the AsyncClient, the way an async graph uses it. Exits 0 only when every base
capability and every extended one (delete_for_runs, copy_thread, prune) was detected and passed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncGenerator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
    DetectedCapabilities,
)
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.checkpoint.state import StateSaver
from state_client import AsyncClient, Client

STATE_URL = os.environ.get("STATE_URL", "http://127.0.0.1:7478")
RUN = uuid.uuid4().hex[:8]


@checkpointer_test(name="StateSaver")
async def state_saver() -> AsyncGenerator[StateSaver, None]:
    prefix = f"conformance/{RUN}/{uuid.uuid4().hex[:8]}/"
    async with AsyncClient(STATE_URL) as aclient:
        with Client(STATE_URL) as client:
            saver = StateSaver(client, aclient=aclient, prefix=prefix)
            try:
                yield saver
            finally:
                await saver.aclose()


async def main() -> int:
    with Client(STATE_URL) as probe:
        if not probe.healthz():
            print(f"no state server answers at {STATE_URL} (set STATE_URL)", file=sys.stderr)
            return 2

    async with AsyncClient(STATE_URL) as aclient:
        detected = DetectedCapabilities.from_instance(StateSaver(aclient=aclient))
    print(f"StateSaver against {STATE_URL} (run {RUN})")
    print("capabilities detected:", ", ".join(sorted(c.value for c in detected.detected)) or "none")
    print("capabilities missing: ", ", ".join(sorted(c.value for c in detected.missing)) or "none")

    report = await validate(state_saver, progress=ProgressCallbacks.verbose())
    report.print_report()

    wanted = sorted(c.value for c in BASE_CAPABILITIES | EXTENDED_CAPABILITIES)
    problems = []
    for name in wanted:
        result = report.results.get(name)
        if result is None or not result.detected:
            problems.append(f"{name}: not detected")
        elif result.passed is not True:
            problems.append(f"{name}: {result.tests_failed} failed: {'; '.join(result.failures)}")
        else:
            print(f"  passed  {name:16s} {result.tests_passed} tests")
    if problems:
        print("\nNOT CONFORMANT:")
        for problem in problems:
            print("  " + problem)
        return 1
    print(f"\nall {len(wanted)} capabilities detected and passed ({report.conformance_level()})")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
