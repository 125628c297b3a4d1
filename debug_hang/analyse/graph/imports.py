"""Import locks: a thread running a module's import-time code holds that module's import lock.

While `import X` executes X's body, importlib holds X's module lock (`_find_and_load` →
`_load_unlocked` → `exec_module` → `<module> (X.py)` on that thread's stack). Another thread
importing X meanwhile waits for it in `_ModuleLock.acquire` (under `_find_and_load`, or
`_lock_unlock_module` when X is already in sys.modules but still initialising); which module it
waits for is the import its caller's line makes (`from X import y`, `import X`), or the `name`
its importlib frames hold when the dump has locals. Python's own deadlock detection sees only
cycles of module locks: when the holder, inside X's body, waits on those very threads - a
Future their pool jobs would complete, a join - nothing raises and nothing moves.

The rule fires only when the holder is seen waiting on the waiters in every sample: waiting
(idle) inside the module body on a Future or a join, the threads that could complete it all
waiting for a module lock it holds. An import that is merely slow (a holder that computes, or
waits on something else) is left to the other readings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from debug_hang.analyse.graph.builder import Builder, graph_pass
from debug_hang.analyse.graph.inprocess import name_of, pool_of, pool_running, runs
from debug_hang.analyse.graph.threads import frame_text, other_threads_in_job_code
from debug_hang.analyse.patterns import ProcessVerdict
from debug_hang.model import Frame, Process, Thread

_BOOTSTRAP = re.compile(r"^<frozen importlib\._bootstrap(_external)?>$|(^|/)importlib/_bootstrap(_external)?\.py$")
# What the holder may wait on inside the module body for the waiters: a Future or a thread.
_FUTURE_WAIT = re.compile(r"concurrent/futures/_base\.py$")
_JOIN = re.compile(r"^(Thread\.)?(join|_wait_for_tstate_lock)$")
_THREADING = re.compile(r"(^|/)threading\.py$")
# The modules an import line names (a caller's line: the import a waiter waits in).
_FROM = re.compile(r"^\s*from\s+(?P<mod>\.*[\w.]*)\s+import\s+(?P<names>[\w\s,.()*]+)")
_IMPORT = re.compile(r"^\s*import\s+(?P<mods>[\w\s,.]+)")
_DYNAMIC = re.compile(r"""(?:import_module|__import__)\(\s*['"](?P<mod>[\w.]+)['"]""")


def _python(thread: Thread) -> list[Frame]:
    return [f for f in thread.frames if not f.native]


def _bootstrap(frame: Frame) -> bool:
    return bool(_BOOTSTRAP.search(frame.file))


def held_modules(thread: Thread) -> list[tuple[str, Frame]]:
    """The module files whose body the thread executes under importlib (`<module>` frames just
    inside `_load_unlocked`), innermost first, with that frame: it holds each one's import lock."""
    frames = _python(thread)
    out = []
    for i, frame in enumerate(frames):
        if frame.function != "<module>" or _bootstrap(frame):
            continue
        outer = frames[i + 1:i + 5]
        if any(_bootstrap(f) and f.name == "_load_unlocked" for f in outer):
            out.append((frame.file, frame))
    return out


@dataclass
class ImportWait:
    """A thread waiting for a module's import lock, and the modules its import may name."""

    thread: Thread
    caller: Frame | None  # the first frame outside importlib: the line that imports
    names: set[str]  # dotted module names the wait may be for (empty: could not tell)


def import_wait(thread: Thread) -> ImportWait | None:
    """A thread idle in importlib's `_ModuleLock.acquire`: which import it waits in."""
    frames = _python(thread)
    # `_ModuleLock.acquire` (py-spy 0.3.14 and tracebacks print a bare `acquire`: in importlib's
    # bootstrap the only blocking one)
    if not frames or not _bootstrap(frames[0]) or frames[0].name != "acquire" or "Dummy" in frames[0].function:
        return None
    caller = next((f for f in frames if not _bootstrap(f)), None)
    names: set[str] = set()
    for frame in frames:
        if not _bootstrap(frame):
            break
        name = (frame.locals or {}).get("name")
        if isinstance(name, str) and re.fullmatch(r"['\"]?[\w.]+['\"]?", name):
            names.add(name.strip("'\""))
    if caller is not None and caller.code:
        names |= imported_names(caller.code)
    return ImportWait(thread, caller, names)


def imported_names(code: str) -> set[str]:
    """The dotted module names an import line may load: `from a.b import c` → a.b, a.b.c (c may
    be a submodule), `import a.b as x, d` → a, a.b, d; a relative import keeps its leading dots."""
    out: set[str] = set()
    found = _FROM.match(code)
    if found:
        mod = found["mod"]
        if mod.strip("."):
            out.add(mod)
        for name in re.split(r"[\s,()]+", found["names"]):
            if name and name not in ("as", "*") and name.isidentifier():
                out.add(f"{mod}.{name}" if mod.strip(".") else f"{mod}{name}")
        return out
    found = _IMPORT.match(code)
    if found:
        for part in found["mods"].split(","):
            mod = part.split(" as ")[0].strip()
            pieces = mod.split(".")
            out.update(".".join(pieces[:i]) for i in range(1, len(pieces) + 1) if all(p.isidentifier() for p in pieces[:i]))
        return out
    return {m["mod"] for m in _DYNAMIC.finditer(code)}


def module_is(path: str, name: str) -> bool:
    """Whether the file `path` is module `name` (`a.b` → .../a/b.py or .../a/b/__init__.py; a
    relative name matches by its trailing part)."""
    parts = [p for p in name.lstrip(".").split(".") if p]
    if not parts:
        return False
    tail = "/".join(parts)
    path = path.replace("\\", "/")
    return any(path == end or path.endswith("/" + end) for end in (f"{tail}.py", f"{tail}/__init__.py"))


def _waits_on_threads(thread: Thread, module_frame: Frame) -> Frame | None:
    """The wait frame (Future.result / futures.wait / Thread.join) inside the module body, if the
    holder waits there on a Future or a thread."""
    frames = _python(thread)
    for frame in frames[:frames.index(module_frame)]:
        if _FUTURE_WAIT.search(frame.file) or (_THREADING.search(frame.file) and _JOIN.search(frame.function)):
            return frame
    return None


@dataclass
class ImportDeadlock:
    holder: Thread
    module: Frame  # the holder's `<module>` frame: the import-time code
    wait: Frame  # where the holder waits (Future.result, Thread.join)
    waiters: list[ImportWait]


def find_import_deadlock(verdict: ProcessVerdict, info: dict[str, object] | None = None) -> ImportDeadlock | None:
    """A thread inside a module's body that waits on a Future or a join, while every other thread
    that could complete it waits for an import lock that thread holds."""
    threads = [t for t, _m in verdict.threads]
    waits = {id(t): w for t in threads if (w := import_wait(t)) is not None}
    if not waits:
        return None
    for holder in threads:
        if id(holder) in waits or runs(holder, info):
            continue
        for path, module in held_modules(holder):
            wait = _waits_on_threads(holder, module)
            if wait is None:
                continue
            mine = [w for w in waits.values() if any(module_is(path, n) for n in w.names)]
            if not mine:
                continue
            # Every thread that could complete the wait (job code, a pool worker running a job)
            # waits for this module: no other thread is left to do it.
            others = {id(t) for t in other_threads_in_job_code(verdict, holder)}
            others |= {id(t) for t in threads if t is not holder and pool_of(t) and pool_running(t)}
            if others and others <= {id(w.thread) for w in mine}:
                return ImportDeadlock(holder, module, wait, mine)
    return None


def _same_in(sample: Process, found: ImportDeadlock) -> bool:
    """The earlier sample shows the same holder in the same module line and the same waiters
    waiting for its import lock."""
    by_id = {t.os_thread_id or t.thread_id: t for t in sample.threads}
    holder = by_id.get(found.holder.os_thread_id or found.holder.thread_id)
    if holder is None or not any(f.file == found.module.file and f.line == found.module.line
                                 for _p, f in held_modules(holder)):
        return False
    for waiter in found.waiters:
        then = by_id.get(waiter.thread.os_thread_id or waiter.thread.thread_id)
        if then is None or import_wait(then) is None:
            return False
    return True


@graph_pass(after=("follow_threads",), decides=("import-lock-deadlock",))
def detect_import_lock_waits(b: Builder) -> None:
    """A process whose thread, running a module's import-time code, waits on threads that wait
    for that module's import lock, the same in every sample (import-lock-deadlock)."""
    for key, verdict in b.verdicts.items():
        ref = verdict.process.ref
        found = find_import_deadlock(verdict, b.inp.info.get(ref))
        samples = b.inp.samples.get(ref) or []
        if found is None or len(samples) < 2 or not all(_same_in(s, found) for s in samples):
            continue
        node = b.g.nodes[key]
        node.pattern, node.state = "import-lock-deadlock", "blocked"
        node.frame = node.user_frame = found.module
        b.deciding[key] = found.holder
        holder = name_of(found.holder)
        node.evidence.append(
            f"thread {holder} executes the body of {found.module.short_file} under importlib (`<module>` at "
            f"{frame_text(found.module)}, inside _find_and_load → _load_unlocked): it holds that module's import "
            f"lock until the body returns, and waits at {found.wait.function} ({found.wait.short_file}:{found.wait.line})")
        for waiter in found.waiters[:4]:
            node.evidence.append(
                f"  thread {name_of(waiter.thread)} waits for that import lock in _ModuleLock.acquire, importing at "
                f"{frame_text(waiter.caller)}")
        if len(found.waiters) > 4:
            node.evidence.append(f"  and {len(found.waiters) - 4} more thread(s) the same way")
        node.evidence.append(
            "no other thread of the process could complete what the holder waits for: the threads that would wait "
            "for the module it is still importing, and it waits for them (Python's import deadlock detection sees "
            f"only cycles of module locks), in all {len(samples)} samples")
