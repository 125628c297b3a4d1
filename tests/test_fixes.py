"""The fix a report prints is the catalog fix that fits the cause: the rule that decided a cause
names which of its pattern's fixes applies (analyse/fixes.py), on real captures."""

from __future__ import annotations

import pytest
from conftest import ROOT

from debug_hang.analyse.fixes import CHOSEN, chosen
from debug_hang.analyse.patterns import catalog
from debug_hang.pipeline import reanalyse
from debug_hang.report.json_out import to_json
from debug_hang.report.markdown import render_markdown

pytestmark = pytest.mark.unit

CAPTURES = ROOT / "tests" / "data" / "captures"


@pytest.mark.parametrize("key", sorted(CHOSEN))
def test_every_chosen_fix_is_one_fix_of_its_pattern_in_the_catalog(key: str) -> None:
    pattern_id, phrase = CHOSEN[key]
    fixes = [f for f in catalog()[pattern_id].fixes if phrase in f]
    assert len(fixes) == 1, (key, pattern_id, phrase)
    assert chosen(key) == fixes[0]


CASES = {  # capture: a phrase of the fix its cause must print (not its pattern's first fix)
    "flock_held_across_child_that_takes_it": "tell the child the lock is held",
    "pipe_stdin_and_stdout_both_full": "proc.communicate(data)",
    "mp_queue_child_joined_before_get": "get() everything it puts",
    "asyncio_event_set_from_thread": "call_soon_threadsafe",
    "thread_local_ready_event": "never in threading.local",
    "lease_held_by_prior_attempt": "TTL or heartbeat",
    "flock_taken_twice_same_process": "file lock taken twice",
    "dataloader_fork_workers_ray_get": "Make Ray calls in the parent",
    "sqlite_second_connection_same_thread": "the helper the caller's connection",
}


@pytest.mark.parametrize("capture", sorted(CASES))
def test_a_cause_prints_the_fix_its_rule_chose(capture: str) -> None:
    diag = reanalyse(CAPTURES / capture)
    doc = to_json(diag)
    cause = doc["root_causes"][0]
    first = catalog()[cause["pattern"]].fixes[0]
    assert CASES[capture] in cause["proof"]["fix"] and cause["proof"]["fix"] != first, cause["proof"]["fix"]
    # AND the report's fix suggestions list it first
    report = render_markdown(diag)
    suggestions = report.split("## Fix suggestions", 1)[1].splitlines()[1]
    assert CASES[capture] in suggestions, suggestions


def test_a_cause_no_rule_chose_a_fix_for_prints_its_patterns_first() -> None:
    doc = to_json(reanalyse(CAPTURES / "pipe_stderr_full_parent_reads_stdout"))
    cause = doc["root_causes"][0]
    assert cause["proof"]["fix"] == catalog()[cause["pattern"]].fixes[0]
