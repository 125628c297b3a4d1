"""The writer's redaction pass at scale: `redact_obj` redacts each distinct string once
per call and, for the writer (`share=True`), copies only what it changes. These tests hold it to
the plain definition (every string redacted, every secret-named key's value replaced) on real
captures, on generated structures, and through `write_outputs` on a capture of many processes
whose repeated frame strings and deep row values carry secrets."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scale_capture import build

from debug_hang import redact as redact_module
from debug_hang.pipeline import load_capture, reanalyse
from debug_hang.redact import _PLAIN_VALUE, REDACTED, SECRET_NAME, Redactor
from debug_hang.report.write import write_outputs
from debug_hang.untrusted import strip_controls

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "tests" / "data" / "redact" / "secrets_in_the_job"
HF = "hf_" + "Wr1teScaleRepeatedToken42xQ"  # a token shape: caught by a rule
PASSWORD = "correct-horse-" + "battery-9f3e"  # in URL userinfo: caught by a rule
LEARNT = "plainvalue-" + "7c1d9e5a0b4f-deep"  # no shape at all: caught only once learnt


def per_value(red: Redactor, obj: Any) -> Any:
    """The definition, one value at a time (what the writer did before the walk was memoised)."""
    if isinstance(obj, str):
        return red.redact(strip_controls(obj))
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            name = red.redact(strip_controls(key)) if isinstance(key, str) else key
            if isinstance(key, str) and SECRET_NAME.search(key) and isinstance(value, (str, int, float)) \
                    and not isinstance(value, bool) and str(value) and not _PLAIN_VALUE.match(str(value)):
                out[name] = REDACTED
            else:
                out[name] = per_value(red, value)
        return out
    if isinstance(obj, (list, tuple)):
        return [per_value(red, v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    return red.redact(strip_controls(str(obj)))


@pytest.mark.parametrize("name", ["actors.json", "tasks.json", "jobs.json", "stacks.json"])
@pytest.mark.parametrize("share", [False, True])
def test_the_walk_writes_what_the_definition_writes_on_the_real_run(name: str, share: bool) -> None:
    # GIVEN the rows and stacks a real diagnosis read, and what that run lets one learn
    red = Redactor()
    for rows in ("actors.json", "tasks.json", "jobs.json"):
        red.learn_rows(json.loads((CAPTURE / rows).read_text()))
    data = json.loads((CAPTURE / name).read_text())
    before = copy.deepcopy(data)
    # WHEN redacted by the walk  THEN the JSON is the definition's, and the input is untouched
    assert json.dumps(red.redact_obj(data, share)) == json.dumps(per_value(red, data))
    assert data == before


JSON_TEXT = st.sampled_from(["RUNNING", "Condition.wait", "waiter.acquire()", f"login(token={HF})",
                             f"postgres://trainer:{PASSWORD}@db.internal/runs", LEARNT, "ok\x1b[31m red",
                             "a6b3e2f10c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f", "", "x"]) | st.text(max_size=12)
JSON_KEY = st.sampled_from(["name", "HF_TOKEN", "password", "state", "api_key", "code\x07"]) | st.text(max_size=6)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | JSON_TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner) | st.dictionaries(JSON_KEY, inner, max_size=5),
    max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(JSON, st.booleans())
def test_the_walk_equals_the_definition_on_any_structure(doc: Any, share: bool) -> None:
    red = Redactor()
    red.learn([LEARNT])
    before = copy.deepcopy(doc)
    out = red.redact_obj(doc, share)
    assert json.dumps(out) == json.dumps(per_value(red, doc))
    assert doc == before  # never redacted in place


def test_a_shared_walk_copies_only_what_it_redacts() -> None:
    # GIVEN 1,000 frames holding the same source line, the 500th holding a token
    frame = {"function": "Condition.wait", "code": "waiter.acquire()", "line": 327}
    doc = {"clean": [dict(frame) for _ in range(1000)], "dirty": [dict(frame) for _ in range(1000)]}
    doc["dirty"][499]["code"] = f"login(token={HF})"
    # WHEN redacted for writing
    out = Redactor().redact_obj(doc, share=True)
    # THEN the untouched list and frames are the input's own objects, the token's frame a copy
    assert out["clean"] is doc["clean"] and out["dirty"] is not doc["dirty"]
    assert out["dirty"][498] is doc["dirty"][498] and out["dirty"][499]["code"] == f"login(token={REDACTED})"
    assert doc["dirty"][499]["code"] == f"login(token={HF})"


def test_the_memo_lives_one_call_so_a_value_learnt_later_is_redacted() -> None:
    red = Redactor()
    doc = [f"dsn is {LEARNT}"] * 3
    assert red.redact_obj(doc) == doc  # no shape: not yet known
    red.learn([LEARNT])
    assert red.redact_obj(doc, share=True) == ["dsn is [REDACTED]"] * 3


def test_writer_redacts_a_repeated_frame_string_and_a_deep_row_value(tmp_path: Path) -> None:
    # GIVEN a capture of 64 ranks on 8 nodes built from a recorded one, where every process's
    # first frame holds the same token-bearing source line (redacted once, written 128 times),
    # one process's frame a learnt secret deep in its locals, and one task row a password six
    # levels down
    folder = build(tmp_path / "capture", ranks=64, nodes=8)
    stacks = json.loads((folder / "stacks.json").read_text())
    for proc in stacks["processes"]:
        proc["threads"][0]["frames"][0]["code"] = f"hub = Client(token={HF})"
    stacks["processes"][-1]["threads"][0]["frames"][-1]["locals"] = {"cfg": f"Config(dsn={LEARNT!r})"}
    (folder / "stacks.json").write_text(json.dumps(stacks))
    snap = json.loads((folder / "snapshot.json").read_text())
    snap["tasks"][-1]["task_log_info"] = {"stdout_file": "/tmp/ray/session_latest/logs/worker.out",
                                          "sink": [[{"url": [f"postgres://trainer:{PASSWORD}@db.internal/runs"]}]]}
    (folder / "snapshot.json").write_text(json.dumps(snap))
    redact_module.learn([LEARNT])  # as the pipeline learns a target's environment
    diag = reanalyse(folder)
    # WHEN the output folder is written
    out = tmp_path / "out"
    write_outputs(diag, out, load_capture(folder).tasks_after)
    # THEN no file holds any of the secrets,
    texts = {p.name: p.read_text() for p in out.rglob("*") if p.is_file()}
    assert {"stacks.json", "snapshot.json", "05_stacks.txt", "03_tasks.json"} <= set(texts)
    assert not [(name, s) for name, text in texts.items() for s in (HF, PASSWORD, LEARNT) if s in text]
    # and what surrounds them is written, every time it occurs
    written = json.loads(texts["stacks.json"])["processes"]
    assert [p["threads"][0]["frames"][0]["code"] for p in written] == [f"hub = Client(token={REDACTED})"] * len(written)
    assert len(written) == len(stacks["processes"]) > 64
    assert written[-1]["threads"][0]["frames"][-1]["locals"] == {"cfg": f"Config(dsn='{REDACTED}')"}
    assert f"postgres://trainer:{REDACTED}@db.internal/runs" in texts["snapshot.json"]


LINE = st.sampled_from(["    wait (threading.py:320)", "Thread 15590 (idle): \"MainThread\"", "hub = Client(token=abc)",
                        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE9KY", "a6b3e2f10c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f" * 2,
                        "x" * 39, "AKIA", "", "Ray-KEY"]) | st.text(alphabet="akiAKI40 =:-/\t", max_size=50)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=30), st.integers(min_value=0, max_value=5))
def test_the_distinct_line_precheck_answers_as_the_whole_text(lines: list[str], repeat: int) -> None:
    # GIVEN any text of repeated lines, checked on its distinct lines whatever its length
    text = "\n".join(lines * (repeat + 1))
    whole = any(t in text.lower() for t in redact_module._ALL_TRIGGERS) or \
        (len(text) >= 40 and redact_module._RUN40.search(text) is not None)
    saved = redact_module.DISTINCT_LINES_FROM
    redact_module.DISTINCT_LINES_FROM = 0
    try:
        # THEN it answers as the check of the whole text
        assert redact_module._may_match(text, text.lower()) == whole
    finally:
        redact_module.DISTINCT_LINES_FROM = saved


def test_a_secret_on_one_line_of_a_long_repetitive_text_is_redacted() -> None:
    # GIVEN the real stacks of a run as text, repeated past the distinct-line threshold, with a
    # token on one line in the middle and an AWS-style secret key on another
    stacks = json.loads((CAPTURE / "stacks.json").read_text())
    frames = [f"    {f['function']} ({f['file']}:{f['line']})" for p in stacks["processes"] for t in p["threads"] for f in t["frames"]]
    body = "\n".join(frames)
    copies = redact_module.DISTINCT_LINES_FROM // len(body) + 2
    secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLE9KY"
    text = "\n".join([body] * copies + [f"    login (hub.py:3) {HF}", f"key {secret_key} end"] + [body] * copies)
    assert len(text) > redact_module.DISTINCT_LINES_FROM
    # WHEN redacted  THEN both are gone and the frames are all still there
    out = Redactor().redact(text)
    assert HF not in out and secret_key not in out
    assert out.count(frames[0]) == text.count(frames[0])
