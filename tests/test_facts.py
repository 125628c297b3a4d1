"""Per-frame facts (debug_hang/facts.py, probe/objmem.py) read from real local processes.

A process started here parks threads on known objects; py-spy dumps it with its locals, and the
facts must name the same object in every frame that works on it, give lengths read from memory,
and never carry a value (a secret in a local stays on the node).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from debug_hang.facts import identities_in, object_ids, parse_identity, reduce_locals, reduce_repr
from debug_hang.model import Frame, Process, Thread, process_from_dict, process_to_dict
from debug_hang.probe.node_probe import probe_node
from debug_hang.probe.objmem import plausible_object_id
from debug_hang.probe.pyspy import DumpOptions, dump_pid

pytestmark = pytest.mark.unit

SECRET = "hunter2-" + "s3cr3t" * 4
TARGET = f'''
import threading, time
SECRET = {SECRET!r}

class Service:
    def __init__(self):
        self.ready = threading.Event()
        self.items = [object() for _ in range(300)]
        self._lock = threading.Lock()

    def spin(self):
        n = 0
        while True:
            n += 1
            if n < 0:
                self.ready.set()

    def wait_ready(self, token):
        table = {{i: i for i in range(50)}}
        self.ready.wait()

    def hold(self):
        with self._lock:
            self.ready.wait()

    def take(self):
        time.sleep(0.2)
        with self._lock:
            pass

svc = Service()
threading.Thread(target=svc.spin, name="spinner", daemon=True).start()
threading.Thread(target=svc.wait_ready, args=(SECRET,), name="waiter", daemon=True).start()
threading.Thread(target=svc.hold, name="holder", daemon=True).start()
threading.Thread(target=svc.take, name="taker", daemon=True).start()
time.sleep(0.5)
print("READY", flush=True)
time.sleep(600)
'''


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[str]]:
    script = tmp_path_factory.mktemp("facts") / "service.py"
    script.write_text(TARGET)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _threads(pid: int, options: DumpOptions) -> dict[str, Thread]:
    result = dump_pid(pid, options)
    assert result.error is None, result.error
    return {str(t.name): t for p in result.processes for t in p.threads}


def _frame(thread: Thread, function: str) -> Frame:
    return next(f for f in thread.frames if f.function.endswith(function))


def test_the_same_object_has_one_identity_in_every_thread_that_works_on_it(target: subprocess.Popen[str]) -> None:
    threads = _threads(target.pid, DumpOptions(facts=True))
    waiter, spinner = threads["waiter"], threads["spinner"]
    # The waiter's Event.wait frame names the Event; its caller and the spinner work on one Service.
    event = _frame(waiter, "Event.wait").facts or {}
    assert parse_identity(event["self"]) and str(event["self"]).startswith("Event@0x")
    owner = (_frame(waiter, "Service.wait_ready").facts or {})["self"]
    assert str(owner).startswith("Service@0x")
    assert (_frame(spinner, "Service.spin").facts or {})["self"] == owner
    # A loop counter is a number; lengths come from the objects' memory.
    assert isinstance((_frame(spinner, "Service.spin").facts or {})["n"], int)
    waiting = _frame(waiter, "Service.wait_ready").facts or {}
    assert waiting["len(table)"] == 50
    assert waiting["len(token)"] == len(SECRET)


def test_facts_never_carry_a_value_and_locals_stay_on_the_node_unless_asked(target: subprocess.Popen[str]) -> None:
    threads = _threads(target.pid, DumpOptions(facts=True))
    procs = [Process(pid=target.pid, threads=list(threads.values()))]
    text = json.dumps([process_to_dict(p) for p in procs])
    assert SECRET not in text
    assert all(f.locals is None for t in threads.values() for f in t.frames)
    asked = _threads(target.pid, DumpOptions(locals=True))
    assert any(SECRET in (f.locals or {}).get("token", "") for t in asked.values() for f in t.frames)


def test_facts_survive_the_saved_form_and_older_files_load_without_them(target: subprocess.Popen[str]) -> None:
    threads = _threads(target.pid, DumpOptions(facts=True))
    proc = Process(pid=target.pid, threads=list(threads.values()))
    again = process_from_dict(json.loads(json.dumps(process_to_dict(proc))))
    assert [f.facts for t in again.threads for f in t.frames] == [f.facts for t in proc.threads for f in t.frames]
    old = process_to_dict(proc)
    for thread in old["threads"]:
        for frame in thread["frames"]:
            del frame["facts"]  # a stacks.json written before facts existed
    assert all(f.facts is None for t in process_from_dict(old).threads for f in t.frames)


def test_the_probe_reads_facts_on_every_sample_but_the_first(target: subprocess.Popen[str]) -> None:
    out = probe_node("local", [target.pid], DumpOptions(facts=True).to_dict(), samples=2, interval_s=0.2,
                     children=False)
    by_sample = {p["sample"]: p for p in out["processes"]}
    def facts_in(raw: dict[str, object]) -> int:
        return sum(1 for t in raw["threads"] for f in t["frames"] if f.get("facts"))  # type: ignore[attr-defined,index]
    assert facts_in(by_sample[0]) == 0 and facts_in(by_sample[1]) > 0
    single = probe_node("local", [target.pid], DumpOptions(facts=True).to_dict(), samples=1, children=False)
    assert facts_in(single["processes"][0]) > 0


def test_a_lock_is_read_held_by_the_thread_inside_its_with_block_and_taken_at_its_line(
        target: subprocess.Popen[str]) -> None:
    out = probe_node("local", [target.pid], DumpOptions(facts=True).to_dict(), samples=1, children=False)
    threads = {t.name: t for t in process_from_dict(out["processes"][0]).threads}
    holder = _frame(threads["holder"], "Service.hold").facts or {}
    taker = _frame(threads["taker"], "Service.take").facts or {}
    assert holder["with"] == "self._lock" and "enters" not in holder
    assert taker["enters"] == "self._lock" and "with" not in taker
    assert holder["self"] == taker["self"]  # the same Service: the same lock


def test_py_spy_text_locals_give_the_same_identities() -> None:
    # As `py-spy dump --locals` prints them (parsed from pasted text: no addresses, no memory).
    shown = {"self": "<Condition at 0x7f16ab35d410>", "timeout": "None", "saved_state": "(1, 139735337752256)",
             "gotit": "False", "futs": "[<Future at 0x7f16ab35d3d0>, <Future at 0x7f16ab35d510>]",
             "name": '"a secret value"', "n": "196", "rate": "0.25", "huge": "+bigint"}
    facts = reduce_locals(shown)
    assert facts == {"self": "Condition@0x7f16ab35d410", "timeout": "None", "gotit": False,
                     "futs": "[Future@0x7f16ab35d3d0, Future@0x7f16ab35d510]", "n": 196, "rate": 0.25}
    assert identities_in(facts["futs"]) == ["Future@0x7f16ab35d3d0", "Future@0x7f16ab35d510"]
    assert reduce_repr("[<Ref at 0x1>, <Ref at 0x2>, ...]") == "[Ref@0x1, Ref@0x2, ...]"
    assert reduce_repr("[1, 2, 3]") is None and reduce_repr('{"k": "v"}') is None


def test_object_ids_have_a_ray_object_id_shape() -> None:
    # A real ObjectID read from a Ray actor's ray.get (its task id, then index 1), and noise.
    real = bytes.fromhex("6c5d30715ef60d4dffffffffffffffffffffffff0900000001000000")
    assert plausible_object_id(real)
    assert not plausible_object_id(bytes(28)) and not plausible_object_id(b"\xff" * 28)
    assert not plausible_object_id(real[:27])
    facts = {"ids(object_refs)": real.hex() + "," + real.hex(), "object_refs": "[ray.ObjectRef@0x1]"}
    assert object_ids(facts) == [real.hex()]


def test_an_unreadable_memory_gives_no_memory_facts(target: subprocess.Popen[str], tmp_path: Path) -> None:
    from debug_hang.probe.objmem import Memory

    gone = Memory(4_194_304)  # no such pid: the open fails, every read answers None
    assert gone.read(0x1000, 8) is None and gone.word(0x1000) is None
    mem = Memory(target.pid)
    assert mem.read(0, 8) is None  # address 0 is never read
    mem.close()
