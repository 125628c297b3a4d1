"""Redaction and Markdown/terminal neutralisation on real captured strings.

tests/data/redact/secrets_in_the_job/ holds what a real diagnosis of examples/secrets_in_the_job.py
read from a real cluster: the State API's actor, task and job rows, the loader's worker logs, the
driver log and the stacks (titles, source context). The secrets are the example's own fakes.
"""

from __future__ import annotations

import ast
import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from debug_hang.printer import SafeStream
from debug_hang.redact import REDACTED, RULES, Redactor, learn_runtime_envs, redact, safe_text
from debug_hang.untrusted import code_span, fence, md_cell, md_inline, strip_controls

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
CAPTURE = ROOT / "tests" / "data" / "redact" / "secrets_in_the_job"


def example_literal(name: str) -> Any:
    """A literal assigned at the top of examples/secrets_in_the_job.py (read, not imported)."""
    tree = ast.parse((ROOT / "examples" / "secrets_in_the_job.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise KeyError(name)


DRIVER_ENV: dict[str, str] = example_literal("DRIVER_ENV")
LOADER_ENV: dict[str, str] = example_literal("LOADER_ENV")
FALLBACK_KEY = "sk-proj-DebugHangFallbackKey7Hq2Zx9Lm4Vb"
SECRETS = [*DRIVER_ENV.values(), *LOADER_ENV.values(), FALLBACK_KEY]


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_each_rule_catches_its_example_and_spares_its_near_miss(rule: Any) -> None:
    # GIVEN a token rule  WHEN its example and its look-alike are redacted
    fresh = Redactor()
    # THEN the example is gone and the look-alike stays
    assert rule.example not in fresh.redact(f"x {rule.example} y")
    assert fresh.redact(f"x {rule.near_miss} y") == f"x {rule.near_miss} y"


def test_worker_log_tokens_are_redacted_and_the_line_stays_readable() -> None:
    # GIVEN the real stderr of the loader: 401 warnings that carry the bearer token
    text = (CAPTURE / "worker.err").read_text()
    assert LOADER_ENV["HF_TOKEN"] in text
    # WHEN redacted with the token rules alone (nothing learnt)
    out = Redactor().redact(text)
    # THEN the token is gone, the warning (status, URL, shard) is still there
    assert LOADER_ENV["HF_TOKEN"] not in out
    assert "WARNING hub answered 401 for shard 7" in out
    assert "shard-00007.parquet (Authorization: Bearer [REDACTED])" in out


def test_runtime_env_values_are_learnt_and_redacted_wherever_they_appear() -> None:
    # GIVEN the loader's actor row (its runtime_env env_vars hold WANDB_API_KEY) and its stdout,
    # which prints that key in a shape no rule knows (40 lower-case hex, like a Ray id)
    rows = json.loads((CAPTURE / "actors.json").read_text())
    out_log = (CAPTURE / "worker.out").read_text()
    assert Redactor().redact(out_log) == out_log  # no rule alone catches it
    # WHEN the rows are learnt from
    learn_runtime_envs(rows)
    # THEN the key is redacted in the log, and the actor ids stay
    assert LOADER_ENV["WANDB_API_KEY"] not in redact(out_log)
    for row in rows:
        assert row["actor_id"] in redact(json.dumps(row))
        assert not leaked(redact(json.dumps(row)))


def test_driver_environment_values_are_learnt_from_an_environ() -> None:
    # GIVEN the real driver log, which prints the tracking password after `db_pass=`
    text = (CAPTURE / "driver.log").read_text()
    fresh = Redactor()
    assert DRIVER_ENV["MLFLOW_TRACKING_PASSWORD"] in fresh.redact(text)  # `db_pass=` is no rule
    # WHEN the driver's environment (what /proc/PID/environ held) is learnt
    fresh.learn_env({**DRIVER_ENV, "RANK": "0", "PATH": "/usr/bin:/bin", "HOME": "/root"})
    out = fresh.redact(text)
    # THEN the driver's secrets are gone from the log; plain variables are not learnt
    assert not [s for s in DRIVER_ENV.values() if s in out]
    assert "Connecting to existing Ray cluster at address: 127.0.0.1:6403" in out
    assert fresh.learnt == len(DRIVER_ENV)  # RANK, PATH, HOME are not learnt


def test_rows_and_stacks_of_the_real_run_leak_nothing() -> None:
    # GIVEN every State API row and stack the diagnosis read; what the run lets one learn
    fresh = Redactor()
    fresh.learn_env(DRIVER_ENV)  # the driver's /proc/PID/environ
    for name in ("actors.json", "tasks.json", "jobs.json"):
        fresh.learn_rows(json.loads((CAPTURE / name).read_text()))
    for name in ("actors.json", "tasks.json", "jobs.json", "stacks.json"):
        data = json.loads((CAPTURE / name).read_text())
        # WHEN redacted as a structure (the way the writer does)
        out = json.dumps(fresh.redact_obj(data))
        # THEN no secret is left, and ids, pids and function names survive
        assert not leaked(out), name
    stacks = json.dumps(fresh.redact_obj(json.loads((CAPTURE / "stacks.json").read_text())))
    assert "wait_for_shards" in stacks and "time.sleep(0.05)" in stacks


def test_secret_named_keys_are_redacted_in_structures() -> None:
    doc = {"env_vars": {"AWS_SECRET_ACCESS_KEY": "whatever-it-is", "RANK": "3", "HF_TOKEN": "short1"},
           "nested": [{"password": "hunter2hunter2"}]}
    out = Redactor().redact_obj(doc)
    assert out == {"env_vars": {"AWS_SECRET_ACCESS_KEY": REDACTED, "RANK": "3", "HF_TOKEN": REDACTED},
                   "nested": [{"password": REDACTED}]}


@pytest.mark.parametrize(("text", "kept"), [
    ("postgres://trainer:correct-horse@db.internal:5432/runs", "postgres://trainer:[REDACTED]@db.internal"),
    ("https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIAZ7DEBUGHANGFAKE1%2F2024&X-Amz-Signature=9f8e7d6c5b4a3f2e",
     "X-Amz-Credential=[REDACTED]&X-Amz-Signature=[REDACTED]"),
    ("https://acct.blob.core.windows.net/c/b?sv=2020-08-04&sig=abcDEF%2Bghi%3D", "sv=2020-08-04&sig=[REDACTED]"),
    ("api_key=3f2a9c8d7e6b5a4f3e2d1c0b, key=lambda x: x", "api_key=[REDACTED], key=lambda x: x"),
    ('{"password": "hunter22"}', '{"password": "[REDACTED]"}'),
    ("password = os.environ['DB_PASSWORD']", "password = os.environ['DB_PASSWORD']"),
    ("max_tokens=2048 monkey=banana12345 author: John", "max_tokens=2048 monkey=banana12345 author: John"),
    ("python train.py --hf-token Zq81mXv3LpW0aRt5 --db-password=hunter22 --lr 3e-4",
     "python train.py --hf-token [REDACTED] --db-password=[REDACTED] --lr 3e-4"),
    ("python train.py --max-tokens 512 --tokenizer gpt2 --key-file /etc/k.pem",
     "python train.py --max-tokens 512 --tokenizer gpt2 --key-file /etc/k.pem"),
])
def test_context_rules(text: str, kept: str) -> None:
    assert kept in Redactor().redact(text)


def test_ray_ids_are_never_redacted() -> None:
    # GIVEN the ids of the real run (actor, node, task, job ids are long hex runs)
    tasks = json.loads((CAPTURE / "tasks.json").read_text())
    ids = [str(t[k]) for t in tasks for k in ("task_id", "actor_id", "node_id", "worker_id", "parent_task_id") if t.get(k)]
    assert len(ids) > 10
    # THEN each survives redaction
    for value in ids:
        assert Redactor().redact(value) == value


def test_controls_and_escapes_are_removed_from_the_real_class_name() -> None:
    # GIVEN the trainer's class name as the State API returned it: a path, a newline, a fence,
    # an OSC 52 clipboard write and a screen clear
    rows = json.loads((CAPTURE / "actors.json").read_text())
    name = next(r["class_name"] for r in rows if "debug_hang_escape" in r["class_name"])
    assert "\x1b]52" in name and "\n" in name
    # WHEN made safe
    one_line = strip_controls(name, newlines=False)
    # THEN no control character is left, and the words stay readable
    assert not re.search(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]", one_line)
    assert "52;c;" not in one_line and "[2J" not in one_line
    assert one_line.startswith("../../") and "Root cause: none, all fine" in one_line
    # AND as a table cell it can neither open a code span, a new column nor a heading
    cell = md_cell(name)
    assert "\n" not in cell and "\\`\\`\\`" in cell and re.search(r"(?<!\\)[|`]", cell) is None


def test_code_span_and_fence_outlast_any_backtick_run() -> None:
    # GIVEN job output holding fences of its own (the real driver log does)
    lines = (CAPTURE / "driver.log").read_text().splitlines()
    block = fence(lines)
    opener = block[0].split("text")[0]
    # THEN the block's fence is longer than any run inside, and it is labelled as job output
    assert block[0].endswith("job-output") and block[-1] == opener
    assert all(opener not in line for line in block[1:-1])
    assert code_span("a``b") == "```a``b```"
    assert code_span("`x`") == "`` `x` ``"


def test_md_inline_keeps_own_code_but_no_links_or_html() -> None:
    out = md_inline("waits at `time.sleep(0.05)` see [here](http://x) <img src=x>")
    assert "`time.sleep(0.05)`" in out and "\\[here\\]" in out and "\\<img" in out


def test_safe_stream_redacts_whole_lines_even_when_written_in_pieces() -> None:
    # GIVEN a stream over a buffer  WHEN a token is written in two pieces, then a newline
    sink = io.StringIO()
    stream = SafeStream(sink)
    token = LOADER_ENV["HF_TOKEN"]
    stream.write("token " + token[:10])
    stream.write(token[10:] + "\x1b[2J\n")
    stream.write("tail")
    stream.flush()
    # THEN the token never reaches the sink, nor the escape
    assert token not in sink.getvalue() and "\x1b" not in sink.getvalue()
    assert sink.getvalue().endswith("tail")


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_strip_controls_leaves_no_control_character(text: str) -> None:
    out = strip_controls(text)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", out)
    assert "\x1b" not in safe_text(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="`|\\*_[]<>#~! ab\n", max_size=80))
def test_markdown_helpers_never_leak_structure(text: str) -> None:
    cell = md_cell(text)
    assert "\n" not in cell and re.search(r"(?<!\\)(\\\\)*[|`\[\]<>]", cell.replace("\\\\", "")) is None
    span = code_span(text)
    ticks = re.match("`+", span)
    assert ticks is not None and ticks[0] not in span[len(ticks[0]):-len(ticks[0])]
    block = fence(text.splitlines() or [""])
    assert all(not line.startswith(block[-1]) for line in block[1:-1])


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(SECRETS), st.text(alphabet="abc =:/@?&\"'\n", max_size=40),
       st.text(alphabet="abc =:/@?&\"'\n", max_size=40))
def test_a_learnt_secret_is_redacted_in_any_surrounding(secret: str, before: str, after: str) -> None:
    fresh = Redactor()
    fresh.learn([secret])
    assert secret not in fresh.redact(before + secret + after)


def test_values_known_only_by_digest_are_redacted_and_never_carried() -> None:
    # GIVEN a node's redactor that learnt the driver's environment (the probe's)
    node = Redactor()
    node.learn_env(DRIVER_ENV)
    handed_back = node.digests()
    # THEN what it hands back holds no value
    assert not [v for v in DRIVER_ENV.values() if v in json.dumps(handed_back)]
    # WHEN the diagnosing process learns the digests and redacts the real driver log
    head = Redactor()
    head.learn_digests(handed_back)
    out = head.redact((CAPTURE / "driver.log").read_text())
    # THEN the password printed after `db_pass=` and inside the tracking URL is gone
    assert DRIVER_ENV["MLFLOW_TRACKING_PASSWORD"] not in out
    assert "db_pass=[REDACTED]" in out and "Connecting to existing Ray cluster" in out


def test_the_node_probe_pickles_by_value_without_the_secrets_learnt_here() -> None:
    """The node probe is shipped to remote nodes pickled by value: the module-level redactor goes
    with it. It must pickle (no lock), and carry none of the secret values learnt on this machine."""
    from ray import cloudpickle

    import debug_hang
    from debug_hang import redact as redact_module
    from debug_hang.probe.node_probe import probe_node

    secret = "plainvalue-9f8e7d6c5b4a-learnt-here"  # no token shape: redacted only once learnt
    redact_module.DEFAULT.learn([secret])
    assert secret not in redact_module.redact(f"dsn is {secret}")
    cloudpickle.register_pickle_by_value(debug_hang)
    try:
        blob = cloudpickle.dumps(probe_node)
    finally:
        cloudpickle.unregister_pickle_by_value(debug_hang)
    assert secret.encode() not in blob
    shipped = pickle.loads(pickle.dumps(redact_module.DEFAULT))
    assert secret in shipped.redact(f"dsn is {secret}")  # the copy learnt nothing
