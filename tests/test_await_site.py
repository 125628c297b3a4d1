"""The line of an async actor whose awaiting coroutine is on no stack: its running method's first
await, read from its source and followed into the methods of its class it awaits, on a real
capture (tests/data/captures/asyncio_semaphore_leaked_on_timeout,
redteam/asyncio_semaphore_leaked_on_timeout.py, round 14b): BlobFetcher.fetch_nowait awaits
`self._guarded(key)`, whose first await is `await self.sem.acquire()` on a Semaphore whose two
permits cancelled calls leaked. Before: the driver's `print(ray.get(refs))` was the line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, capture_variant

from debug_hang.pipeline import reanalyse
from debug_hang.probe.setters import await_site
from debug_hang.report.json_out import to_json

pytestmark = pytest.mark.unit

CAPTURE = ROOT / "tests" / "data" / "captures" / "asyncio_semaphore_leaked_on_timeout"


def test_an_awaited_semaphore_acquire_is_the_line_and_async_with_the_fix() -> None:
    # GIVEN the actor's loop idle in select, 4 fetch_nowait calls RUNNING, the probe's await site
    doc = to_json(reanalyse(CAPTURE))
    top = doc["root_causes"][0]
    deciding = top["proof"]["deciding"]
    # THEN the line is `_guarded`'s acquire (reached through fetch_nowait), the fix `async with`
    assert (doc["verdict"], top["pattern"]) == ("hang", "async-await-stuck")
    assert (deciding["function"], deciding["line"]) == ("BlobFetcher._guarded", 34)
    assert "async with" in top["fix"]


def test_without_the_await_site_the_line_is_not_invented(tmp_path: Path) -> None:
    # GIVEN the same readings without the probe's await site (an older probe, no source)
    def drop(doc: dict[str, Any]) -> None:
        for p in doc["processes"]:
            p.pop("await_at", None)
    doc = to_json(reanalyse(capture_variant(tmp_path, CAPTURE, stacks=drop)))
    top = doc["root_causes"][0]
    # THEN the same cause, but no line of `_guarded` (the coroutine is on no stack)
    assert top["pattern"] == "async-await-stuck"
    assert (top["proof"]["deciding"] or {}).get("function") != "BlobFetcher._guarded"
    assert "async with" not in top["fix"]


SOURCE = '''
import asyncio

class Svc:
    async def outer(self, k):
        x = 1
        return await self._inner(k)

    async def _inner(self, k):
        async with self.lock:
            await asyncio.sleep(0)

    async def plain(self):
        await self.done.wait()

    def sync(self):
        return 1

    async def calls_sync(self):
        return await self._fut(1)
'''


@pytest.mark.parametrize(("method", "expected"), [
    ("outer", ("Svc._inner", 10, "async with self.lock:", ["Svc.outer:7"])),
    ("plain", ("Svc.plain", 14, "await self.done.wait()", [])),
    ("calls_sync", ("Svc.calls_sync", 20, "await self._fut(1)", [])),
    ("sync", None),
    ("missing", None),
])
def test_await_site_follows_awaited_methods_of_the_class(tmp_path: Path, method: str, expected: Any) -> None:
    # GIVEN a class's source
    path = tmp_path / "svc.py"
    path.write_text(SOURCE)
    site = await_site(str(path), "Svc", method)
    # THEN the first await of the method, followed into the awaited method of the class
    if expected is None:
        assert site is None
    else:
        assert site is not None
        assert (site["method"], site["line"], site["code"], site["via"]) == expected


SLOTS = ROOT / "tests" / "data" / "captures" / "async_future_resolved_by_queued_call"


def test_slots_taken_by_awaiting_calls_print_their_await_not_the_selector() -> None:
    # GIVEN ResultBoard (async, max_concurrency=2): two wait_result calls RUNNING, awaiting
    # `self._future(job)`; the third wait and the publish calls queued behind them
    doc = to_json(reanalyse(SLOTS))
    top = doc["root_causes"][0]
    deciding = top["proof"]["deciding"]
    # THEN event-setter-queued at wait_result's await, not `selectors.py`'s poll line
    assert (doc["verdict"], top["pattern"]) == ("hang", "event-setter-queued")
    assert (deciding["function"], deciding["line"]) == ("ResultBoard.wait_result", 34)
    assert not deciding["file"].endswith("selectors.py")
