"""What a busy thread does across its samples: spin on a state nothing changes, or work (pure).

A thread that burns CPU looks the same in two samples whether it spins forever or computes for
minutes. The two are told apart by mechanism, never by a name:

- the loop it runs, from its source (read on the node: the frame's context lines hold the whole
  loop when it is short). A `while` whose exit tests read only what the loop never changes can
  end only when another thread changes it: a spin-wait. A loop that changes what it tests,
  iterates a sequence, or tests a clock moves towards its end by itself;
- the stack across samples: callers that change, or a loop body that goes through other calls,
  is work; the same loop lines every time is not evidence of work;
- the loop's state: scalar locals of the loop's frame (py-spy --locals, or the per-frame facts
  read on the node) that change between samples — the ones its exit tests read, for a loop
  whose source is known;
- every sample under one Python line that is a call: the CPU goes to code below Python (a numpy
  or BLAS call keeps one Python frame for minutes), which is no evidence of a spin either.

`hang` from a busy culprit needs `spin` (positive evidence that it does not advance); `advancing`
is work seen; `no-spin` is a computation that is no spin but was not seen to advance; `undecided`
asks for more samples (pipeline.py takes them).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from debug_hang.analyse.graph import WaitGraph
from debug_hang.analyse.patterns import ProcessVerdict, is_library, settings
from debug_hang.analyse.progress import rules
from debug_hang.model import Collection, Frame, Process, ProcessRef, Thread

if TYPE_CHECKING:
    from debug_hang.analyse.expiry import Expiry

LoopKind = Literal["spin-wait", "endless", "self-advancing", "iterating", "timed", "unknown"]
BusyState = Literal["spin", "advancing", "no-spin", "undecided"]

# Calls that read their arguments and change nothing (a spin-wait may test `len(x)`).
PURE_CALLS = frozenset({
    "len", "abs", "min", "max", "int", "float", "bool", "str", "isinstance", "issubclass", "range", "sum",
    "any", "all", "round", "divmod", "pow", "hash", "id", "ord", "chr", "tuple", "list", "set", "frozenset",
    "dict", "sorted", "enumerate", "zip", "reversed", "repr", "type", "getattr", "hasattr", "callable",
    "print", "sleep",  # a sleep or a print changes nothing a loop tests
})
CLOCKS = frozenset({"time", "monotonic", "perf_counter", "process_time", "time_ns", "monotonic_ns",
                    "perf_counter_ns", "now", "utcnow", "default_timer"})
ENDLESS_ITERATORS = frozenset({"count", "cycle", "repeat"})
_NUMBERED = re.compile(r"^(\d+): ?(.*)$")
_LOOP_HEAD = re.compile(r"^\s*(?:async\s+)?(?:while|for)\b")
_BLOCK_HEAD = re.compile(r"^\s*(?:async\s+)?(?:def|class)\b")
_IDENTITY = re.compile(r"^<.* at 0x[0-9a-f]+>$")
_INLINE = re.compile(r"(^|\.)<(genexpr|listcomp|dictcomp|setcomp|lambda)>$")
_IMPORTING = re.compile(r"<frozen importlib\._bootstrap(?:_external)?>|importlib/_bootstrap")
MAX_VALUE_CHARS = 60


# ------------------------------------------------------------------------------- the loop's source
@dataclass(frozen=True)
class LoopShape:
    """The innermost loop around a frame's line, as its source reads."""

    kind: LoopKind
    header: int  # line of the `while`/`for`
    end: int  # first line after the loop
    text: str  # the header, stripped
    tests: tuple[str, ...] = ()  # what its exit tests read (`self._done`, `epoch`)
    changes: tuple[str, ...] = ()  # what it changes of what it tests (self-advancing)
    calls: tuple[str, ...] = ()  # calls that may change anything (not builtins, not clocks)
    body_calls: bool = False  # some of them are in its body, not only in its tests
    exits: bool = True  # a break or return in it (False: it can end only by an exception)

    def covers(self, line: int | None) -> bool:
        return line is not None and self.header <= line < self.end

    def why(self) -> str:
        tests = ", ".join(f"`{t}`" for t in self.tests) or "nothing"
        return {
            "spin-wait": f"the loop `{self.text}` tests {tests}, which nothing in it changes: only another thread can end it",
            "endless": f"the loop `{self.text}` has no exit and calls nothing that could stop it",
            "self-advancing": f"the loop `{self.text}` changes what it tests ({', '.join(f'`{c}`' for c in self.changes)})",
            "iterating": f"the loop `{self.text}` iterates over a sequence",
            "timed": f"the loop `{self.text}` ends by the clock",
            "unknown": f"the loop `{self.text}` tests {tests} through calls that may change it"
                       + (f" ({', '.join(self.calls[:3])})" if self.calls else ""),
        }[self.kind]


def _numbered(context: list[str] | None) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in context or []:
        m = _NUMBERED.match(item)
        if m:
            out[int(m.group(1))] = m.group(2)
    return out


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _code(text: str) -> bool:
    return bool(text.strip()) and not text.lstrip().startswith("#")


def _loop_lines(src: dict[int, str], line: int) -> tuple[int, int] | None:
    """(header, end) of the innermost loop around `line` whose whole body `src` holds."""
    if line not in src or not _code(src[line]):
        return None
    indent = _indent(src[line]) + (1 if _LOOP_HEAD.match(src[line]) else 0)
    header = None
    for n in range(line, min(src) - 1, -1):
        cur = src.get(n, "")
        if not _code(cur) or _indent(cur) >= indent:
            continue
        if _LOOP_HEAD.match(cur):
            header = n
            break
        if _BLOCK_HEAD.match(cur):
            return None
        indent = _indent(cur)
    if header is None:
        return None
    base = _indent(src[header])
    for n in range(header + 1, max(src) + 1):
        if n not in src:
            return None
        if _code(src[n]) and _indent(src[n]) <= base:
            return header, n
    return None  # the context ends inside the loop: not all of it is known


def in_no_loop(frame: Frame) -> bool:
    """The frame's source, from its line up to its function's `def` (in the context lines read),
    shows no loop around the line: the statement runs once per call of that function."""
    src = _numbered(frame.context)
    line = frame.line
    if not line or line not in src or not _code(src[line]):
        return False
    indent = _indent(src[line])
    for n in range(line - 1, min(src) - 1, -1):
        cur = src.get(n, "")
        if not _code(cur) or _indent(cur) >= indent:
            continue
        if _LOOP_HEAD.match(cur):
            return False
        if _BLOCK_HEAD.match(cur):
            return True
        indent = _indent(cur)
    return False  # the context ends before its `def`: not known


def _parsed_loop(frame: Frame) -> tuple[int, int, str, ast.Module | None] | None:
    """The loop around the frame's line in its context lines: (first line, end, header text, its
    parse, None when it does not parse); None without source or without a loop."""
    src = _numbered(frame.context)
    span = _loop_lines(src, frame.line) if frame.line else None
    if span is None:
        return None
    header, end = span
    base = _indent(src[header])
    block = "\n".join(src[n][base:] if _indent(src[n]) >= base else src[n].lstrip() for n in range(header, end))
    try:
        tree: ast.Module | None = ast.parse(block)
    except SyntaxError:
        tree = None
    return header, end, src[header].strip()[:120], tree


def loop_shape(frame: Frame) -> LoopShape | None:
    """The loop around the frame's line, from the frame's context lines (None without source)."""
    parsed = _parsed_loop(frame)
    if parsed is None:
        return None
    header, end, text, tree = parsed
    if tree is None:  # a line cut short, a continuation: the loop is not readable
        return LoopShape("unknown", header, end, text)
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.While, ast.For, ast.AsyncFor)):
        return LoopShape("unknown", header, end, text)
    return _classify(node, header, end, text)


def exitless_loop(frame: Frame) -> LoopShape | None:
    """The loop around the frame's line when nothing in it ends it - no `break`, `return` or
    `raise`, not a `for` over a finite iterable - so only an exception from a call can; else None."""
    parsed = _parsed_loop(frame)
    shape = loop_shape(frame)
    if parsed is None or parsed[3] is None or shape is None or shape.kind == "iterating":
        return None
    node = parsed[3].body[0] if parsed[3].body else None
    if not isinstance(node, (ast.While, ast.For, ast.AsyncFor)) or (isinstance(node, ast.While) and not (
            isinstance(node.test, ast.Constant) and node.test.value)):
        return None  # a `while COND:` ends when COND does
    if any(isinstance(n, (ast.Break, ast.Return, ast.Raise)) for n in ast.walk(node)):
        return None
    return shape


def event_paced_loop(frame: Frame) -> str | None:
    """`self.X` when the frame's line is the header of `while not self.X.wait(...):` (a service
    loop that wakes every timeout to do a round) whose body has no `break`, `return` or `raise`
    and never rebinds, clears or sets X: the loop ends only when another piece of code sets X.
    None otherwise, or without its whole source."""
    parsed = _parsed_loop(frame)
    if parsed is None or parsed[3] is None or parsed[0] != frame.line:
        return None
    loop = parsed[3].body[0] if parsed[3].body else None
    if not isinstance(loop, ast.While) or loop.orelse or not isinstance(loop.test, ast.UnaryOp) \
            or not isinstance(loop.test.op, ast.Not):
        return None
    call = loop.test.operand
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute) or call.func.attr != "wait":
        return None
    obj = _dotted(call.func.value)
    if obj is None or not obj.startswith("self.") or obj.count(".") != 1:
        return None
    for node in ast.walk(loop):
        if isinstance(node, (ast.Break, ast.Return, ast.Raise, ast.Yield, ast.YieldFrom, ast.Await)):
            return None
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(_related(t, obj) or t == "self" for target in targets for t in _targets(target)):
                return None
        if isinstance(node, ast.Call) and node is not call and any(
                _related(m, obj) or m == "self" for m in _mutated_by(node)) and not _call_name(node).endswith(".wait"):
            return None  # `self.stop.set()`, `self._shutdown()`: the loop itself may end it
        if isinstance(node, ast.Call) and any(_dotted(a) in ("self", obj) for a in [*node.args, *(k.value for k in node.keywords)]):
            return None  # `notify(self)`, `stop_all(self.stop)`: a function handed it may set it
    return obj


@dataclass(frozen=True)
class ReleaseGuard:
    """A sleeping loop whose every call that could change anything runs only under `if` tests:
    what those tests read decides whether it ever acts (sets a result, notifies)."""

    header: str  # the loop's header, stripped
    tests: tuple[str, ...]  # the guarding tests, as written
    reads: tuple[str, ...]  # the dotted names they read (`self.pending`)


def release_guard(frame: Frame) -> ReleaseGuard | None:
    """The loop around a sleeping frame's line, when each call in it that is not pure (a
    `set_result`, a `notify`, a `put`) sits under an `if` whose test calls nothing but pure
    builtins (`len`): the names those tests read are then all that decides whether the loop
    acts. None without its whole source, with a call no test guards (it may act any round), or a
    guard that calls out (it may read anything)."""
    parsed = _parsed_loop(frame)
    if parsed is None or parsed[3] is None:
        return None
    tree = parsed[3]
    loop = tree.body[0] if tree.body else None
    if not isinstance(loop, ast.While) or _impure_calls(loop.test):
        return None
    guards: list[ast.expr] = []
    written: set[str] = set()
    if not _all_guarded(loop.body, [], guards, written) or not guards:
        return None
    reads = sorted(set().union(*(_reads(t) for t in guards)))
    if any(_related(r, w) for r in reads for w in written):
        return None  # the loop itself changes what its tests read, every round
    return ReleaseGuard(parsed[2], tuple(ast.unparse(t)[:120] for t in guards), tuple(reads))


def _impure_calls(node: ast.AST) -> list[str]:
    return [_call_name(c) for c in ast.walk(node) if isinstance(c, ast.Call) and not _is_pure(_call_name(c))]


def _all_guarded(stmts: list[ast.stmt], within: list[ast.expr], guards: list[ast.expr], written: set[str]) -> bool:
    """Every impure call of `stmts` runs under one of the `if` tests `within` (collected into
    `guards`); no test calls out; a `with` takes only a name (`with self.lock:`). What the
    statements no test guards write goes into `written`."""
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            if _impure_calls(stmt.test):
                return False
            if not (_all_guarded(stmt.body, [*within, stmt.test], guards, written)
                    and _all_guarded(stmt.orelse, [*within, stmt.test], guards, written)):
                return False
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            if any(_impure_calls(item.context_expr) for item in stmt.items) \
                    or not _all_guarded(stmt.body, within, guards, written):
                return False
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return False
        elif _impure_calls(stmt):
            if not within:
                return False  # a call every round may act (or change what a test reads)
            guards.extend(t for t in within if all(t is not g for g in guards))
        elif not within:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Assign):
                    written.update(t for target in node.targets for t in _targets(target))
                elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
                    written.update(_targets(node.target))
                else:
                    written.update(_advanced_by(node, stmt))
    return True


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    if isinstance(node, (ast.Subscript, ast.Starred)):
        return _dotted(node.value)
    return None


def _call_name(call: ast.Call) -> str:
    return _dotted(call.func) or "?"


def _reads(expr: ast.AST) -> set[str]:
    """Dotted names an expression reads (`self._done[epoch]` reads `self._done` and `epoch`)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = _dotted(node)
            if name:
                found.add(name)
                return
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                visit(node.func.value)  # `self._ev.is_set()` reads `self._ev`
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                visit(arg)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(expr)
    return found


def _exits(stmts: list[ast.stmt]) -> bool:
    """True when these statements leave the loop (break, return, raise), not counting inner loops."""
    for stmt in stmts:
        if isinstance(stmt, (ast.Break, ast.Return, ast.Raise)):
            return True
        if isinstance(stmt, ast.If) and (_exits(stmt.body) or _exits(stmt.orelse)):
            return True
        if isinstance(stmt, (ast.With, ast.AsyncWith)) and _exits(stmt.body):
            return True
        if isinstance(stmt, ast.Try) and any(_exits(s) for s in (stmt.body, stmt.orelse, stmt.finalbody)):
            return True
    return False


def _guard_tests(stmts: list[ast.stmt]) -> list[ast.expr]:
    """Tests of the `if`s that leave the loop (not inside inner loops or functions)."""
    tests: list[ast.expr] = []
    for stmt in stmts:
        if isinstance(stmt, ast.If):
            if _exits(stmt.body) or _exits(stmt.orelse):
                tests.append(stmt.test)
            tests += _guard_tests(stmt.body) + _guard_tests(stmt.orelse)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            tests += _guard_tests(stmt.body)
        elif isinstance(stmt, ast.Try):
            tests += _guard_tests(stmt.body) + _guard_tests(stmt.orelse) + _guard_tests(stmt.finalbody)
    return tests


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return [t for elt in node.elts for t in _targets(elt)]
    name = _dotted(node)
    return [name] if name else []


def _is_pure(name: str) -> bool:
    last = name.split(".")[-1]
    return last in PURE_CALLS and ("." not in name or last == "sleep")


@dataclass
class _Flow:
    """What a loop does to its state: names it advances (from their own value or by mutating
    them), names it re-reads from other state (`seen = self.version`) and names fed by a call
    (`seen = self.store.latest()`: a call may return anything), and calls that may change anything."""

    advanced: set[str]
    rereads: dict[str, set[str]]
    call_fed: set[str]
    calls: set[str]


def _advanced_by(node: ast.AST, loop: ast.AST) -> list[str]:
    """Names one statement advances: augmented, iterated, bound by `with`, deleted."""
    if isinstance(node, ast.AugAssign) or (isinstance(node, ast.AnnAssign) and node.value is not None):
        return _targets(node.target)
    if isinstance(node, (ast.For, ast.AsyncFor)) and node is not loop:
        return _targets(node.target)
    if isinstance(node, ast.Delete):
        return [t for target in node.targets for t in _targets(target)]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [t for item in node.items if item.optional_vars for t in _targets(item.optional_vars)]
    return []


def _mutated_by(call: ast.Call) -> list[str]:
    """What a call may change: its object (`q.pop()`, `self.step()`), the iterator `next` takes."""
    out = []
    if isinstance(call.func, ast.Attribute) and (receiver := _dotted(call.func.value)):
        out.append(receiver)
    if _call_name(call) == "next" and call.args and (arg := _dotted(call.args[0])):
        out.append(arg)
    return out


def _flow(loop: ast.AST, tests: list[ast.expr]) -> _Flow:
    in_tests = {id(n) for t in tests for n in ast.walk(t)}
    advanced: set[str] = set()
    assigns: list[tuple[list[str], ast.expr]] = []
    calls: set[str] = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and all(_same(target, node.value) for target in node.targets):
            continue  # `x = x`, `d[k] = d[k]`: what it writes is what was there
        if isinstance(node, ast.Assign):
            assigns.append(([t for target in node.targets for t in _targets(target)], node.value))
        elif isinstance(node, ast.NamedExpr):
            assigns.append((_targets(node.target), node.value))
        elif isinstance(node, ast.Call) and id(node) not in in_tests and not _is_pure(_call_name(node)):
            calls.add(_call_name(node))
            advanced.update(_mutated_by(node))
        else:
            advanced.update(_advanced_by(node, loop))
    return _propagate(advanced, assigns, calls)


def _same(target: ast.expr, value: ast.expr) -> bool:
    """The target and the value are the same expression (read and written back unchanged)."""
    def shape(node: ast.expr) -> str:
        return ast.dump(node, annotate_fields=False).replace("Store()", "Load()")
    return shape(target) == shape(value)


def _propagate(advanced: set[str], assigns: list[tuple[list[str], ast.expr]], calls: set[str]) -> _Flow:
    """Assignments sorted into advancing, re-reading and call-fed ones (to a fixed point)."""
    rereads: dict[str, set[str]] = {}
    call_fed: set[str] = set()
    changed = True
    while changed:  # a name computed from an advancing one advances too (`u = state >> 11`)
        changed = False
        for targets, value in assigns:
            reads = _reads(value)
            fed = any(isinstance(n, ast.Call) and not _is_pure(_call_name(n)) for n in ast.walk(value))
            for t in targets:
                if t in advanced:
                    continue
                if any(_related(r, t) for r in reads) or (
                        not fed and any(_related(r, a) for r in reads for a in advanced)):
                    advanced.add(t)  # from its own value (`i = i + 1`), or from advancing state
                    changed = True
                elif fed:
                    call_fed.add(t)  # whatever the call returns: not known to advance
                else:
                    rereads.setdefault(t, set()).update(reads)
    return _Flow(advanced, {k: v for k, v in rereads.items() if k not in advanced}, call_fed - advanced, calls)


def _related(read: str, written: str) -> bool:
    return read == written or read.startswith(written + ".") or written.startswith(read + ".")


def _classify(node: ast.While | ast.For | ast.AsyncFor, header: int, end: int, text: str) -> LoopShape:
    tests: list[ast.expr] = []
    if isinstance(node, (ast.For, ast.AsyncFor)):
        it = node.iter
        endless = isinstance(it, ast.Call) and (_call_name(it).split(".")[-1] in ENDLESS_ITERATORS
                                                 or (_call_name(it) == "iter" and len(it.args) == 2))
        if not endless:
            return LoopShape("iterating", header, end, text)
    elif not (isinstance(node.test, ast.Constant) and node.test.value):
        tests.append(node.test)
    tests += _guard_tests(node.body)
    reads = set().union(*(_reads(t) for t in tests)) if tests else set()
    test_calls = {_call_name(c) for t in tests for c in ast.walk(t) if isinstance(c, ast.Call)}
    flow = _flow(node, tests)
    for name in sorted(reads):  # a name re-read from other state: the test reads that state
        reads |= flow.rereads.get(name, set())
    shown = tuple(sorted(reads))
    if any(c.split(".")[-1] in CLOCKS for c in test_calls):
        return LoopShape("timed", header, end, text, shown)
    changed = sorted(r for r in reads if any(_related(r, w) for w in flow.advanced))
    if changed:
        return LoopShape("self-advancing", header, end, text, shown, tuple(changed))
    queries = {c for c in test_calls if not _is_pure(c)} | {f"{n} = (a call)" for n in reads & flow.call_fed}
    if flow.calls or queries:
        return LoopShape("unknown", header, end, text, shown, calls=tuple(sorted(flow.calls | queries)),
                         body_calls=bool(flow.calls),
                         exits=any(isinstance(n, (ast.Break, ast.Return)) for n in ast.walk(node)))
    return LoopShape("endless" if not tests else "spin-wait", header, end, text, shown)


# ------------------------------------------------------------------------------- a connect retried at once
CONNECT_NAMES = frozenset({"create_connection", "connect", "connect_ex"})
_CONNECT_CALL = re.compile(r"\b(create_connection|connect|connect_ex)\(")
_LOG_CALLS = frozenset({"print", "debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


@dataclass(frozen=True)
class RetryLoop:
    """A loop that retries a connect at once: it ends only by the connect succeeding (the `break`
    or `return` after it), its `except` only counts the failure (no sleep, no back-off, nothing that
    changes what it dials), and the port it dials has no listener on a loopback address, which
    refuses each attempt at once."""

    header: str  # the loop's header, stripped
    call: str  # the connect statement, stripped
    ports: tuple[int, ...]  # the loopback ports it dials, none of them listened on
    counters: tuple[str, ...]  # what its `except` advances (`self.attempts`)
    backoff: bool = False  # its `except` sleeps before the next attempt: a client waiting for a service

    def why(self) -> str:
        ports = ", ".join(str(p) for p in self.ports)
        if self.backoff:
            now = f"; nothing listens on loopback port {ports} now" if self.ports else ""
            return (f"the loop `{self.header}` retries `{self.call[:80]}` and sleeps in its `except` before the next "
                    f"attempt{now}: a client backing off until a service listens, which a server still starting "
                    "ends (or a stale port never does)")
        counted = f"; its `except` only advances {', '.join(f'`{c}`' for c in self.counters)}" if self.counters else \
            "; its `except` only retries"
        return (f"the loop `{self.header}` ends only when `{self.call[:80]}` succeeds, and nothing listens on "
                f"loopback port {ports} it dials (refused at once, every round){counted}, with no sleep or "
                "back-off and nothing that changes what it dials: a retry that cannot succeed (a livelock)")


def _connect_stmt(stmts: list[ast.stmt]) -> tuple[int, ast.Call] | None:
    """(index, call) of the first statement of `stmts` that calls a connect."""
    for i, stmt in enumerate(stmts):
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and _call_name(node).split(".")[-1] in CONNECT_NAMES:
                return i, node
    return None


def _only_counts(handler: ast.ExceptHandler, dialled: set[str], backoff: bool) -> tuple[list[str], bool] | None:
    """The names an `except` branch advances when all it does is count and log, and whether it
    sleeps (only with `backoff`); None when it does anything else: sleeps (without `backoff`),
    waits, exits the loop, changes what the connect dials, calls out."""
    counters: list[str] = []
    sleeps = False
    for stmt in handler.body:
        if isinstance(stmt, (ast.Pass, ast.Continue)):
            continue
        if isinstance(stmt, ast.AugAssign) and not _impure_calls(stmt.value):
            names = _targets(stmt.target)
            if not names or any(_related(n, d) for n in names for d in dialled):
                return None
            counters += names
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and _call_name(stmt.value).split(".")[-1] in _LOG_CALLS \
                and not any(isinstance(n, ast.Call) and n is not stmt.value for n in ast.walk(stmt.value)):
            continue  # print(...) or log.warning(...): it tells, it changes nothing dialled
        if backoff and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                and _call_name(stmt.value).split(".")[-1] == "sleep":
            sleeps = True
            continue
        return None
    return counters, sleeps


def retry_shape(frame: Frame, backoff: bool = False) -> tuple[str, str, int, list[str], bool] | None:
    """The loop around the frame's line when it retries a connect at once (its header, the
    connect statement, that statement's line, what its `except` counts, whether it sleeps: only
    with `backoff`, a retry that sleeps in its `except`); None otherwise.

    The shape: `while True:` (or `for _ in count()`) whose body is one `try:` (and counters) whose
    body makes the connect and then leaves the loop (`break`, `return`), and whose every `except`
    only counts and logs; no `else`/`finally` that calls anything; nothing in the loop changes what
    the connect call reads."""
    parsed = _parsed_loop(frame)
    if parsed is None:
        return None
    header, _end, text, tree = parsed
    if tree is None:
        return None
    loop = tree.body[0] if tree.body else None
    endless = (isinstance(loop, ast.While) and isinstance(loop.test, ast.Constant) and bool(loop.test.value)) or (
        isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call)
        and _call_name(loop.iter).split(".")[-1] in ENDLESS_ITERATORS)
    if not endless or loop is None or not isinstance(loop, (ast.While, ast.For)) or loop.orelse:
        return None
    tries = [s for s in loop.body if isinstance(s, ast.Try)]
    others = [s for s in loop.body if not isinstance(s, ast.Try)]
    if len(tries) != 1 or any(not (isinstance(s, ast.AugAssign) and not _impure_calls(s.value)) for s in others):
        return None
    attempt = tries[0]
    found = _connect_stmt(attempt.body)
    if found is None or not attempt.handlers or _impure_calls(ast.Module(body=attempt.finalbody, type_ignores=[])):
        return None
    index, call = found
    if not (_exits(attempt.body[index + 1:]) or _exits(attempt.orelse)) or _exits(attempt.body[:index]):
        return None
    dialled = _reads(call)
    counters = [t for s in others if isinstance(s, ast.AugAssign) for t in _targets(s.target)]
    if any(_related(c, d) for c in counters for d in dialled):
        return None
    sleeps = False
    for handler in attempt.handlers:
        counted = _only_counts(handler, dialled, backoff)
        if counted is None:
            return None
        counters += counted[0]
        sleeps = sleeps or counted[1]
    line = header + attempt.body[index].lineno - 1
    return text, ast.unparse(attempt.body[index])[:120], line, sorted(set(counters)), sleeps


def _thread_runs(thread: Thread, info: dict[str, Any]) -> bool:
    """The node saw this thread on a CPU or queued for one most of the window (a spin at any
    load), or, without per-thread readings, its process used real CPU."""
    readings = info.get("threads")
    if isinstance(readings, dict) and thread.os_thread_id is not None:
        mine = readings.get(str(thread.os_thread_id))
        return isinstance(mine, dict) and (float(mine.get("runnable", 0.0)) >= settings().spin_runnable_percent
                                           or float(mine.get("cpu", 0.0)) >= settings().busy_cpu_percent)
    cpu = info.get("cpu_percent")
    return isinstance(cpu, (int, float)) and float(cpu) >= settings().busy_cpu_percent


def connect_retry(seen: list[Thread], info: dict[str, Any], sleeping: bool = False) -> RetryLoop | None:
    """One thread across its samples retrying a connect that cannot succeed (`RetryLoop`), or None.
    With `sleeping` (a thread asleep in its loop): one retrying a connect with back-off, every
    sample inside the same job frame's retry loop whose `except` sleeps (`RetryLoop.backoff`).

    All must hold: at least two samples, every one inside the same job frame's retry loop
    (`retry_shape`), the connect seen in most of them (its frame on the stack or the frame at the
    connect line); the thread busy (on a CPU, or queued for one, most of the window); and every
    port it was seen dialling (the probe's `connect_targets` for this thread) a loopback port
    nobody listens on in the process's network namespace."""
    if len(seen) < 2 or not seen[-1].os_thread_id or not (sleeping or _thread_runs(seen[-1], info)):
        return None
    tid = seen[-1].os_thread_id
    targets = [t for t in info.get("connect_targets") or [] if isinstance(t, dict) and t.get("tid") == tid]
    if not sleeping and (not targets or any(t.get("listening") is not False for t in targets)):
        return None
    loopback = {int(t["port"]): t.get("loopback") for t in targets if isinstance(t.get("port"), int)}
    shape: tuple[str, str, int, list[str], bool] | None = None
    function = None
    at_connect = 0
    for thread in seen:
        frames = _python(thread)
        if not frames:
            return None
        depth = _loop_index(frames)
        frame = frames[depth]
        if function is None:
            function, shape = frame.function, retry_shape(frame, backoff=sleeping)
            if shape is None or shape[4] != sleeping:
                return None
        if frame.function != function or shape is None:
            return None
        span = _parsed_loop(frame)
        if span is None or not span[0] <= (frame.line or 0) < span[1]:
            return None  # it left the loop
        inner = frames[depth + 1:]
        connecting = any(f.function.split(".")[-1] in CONNECT_NAMES for f in inner) or (
            frame.line == shape[2] and bool(_CONNECT_CALL.search(frame.code or "")))
        at_connect += connecting
        for f in inner:  # the frames' own word on the host, where their locals were read
            if f.function.split(".")[-1] in CONNECT_NAMES and isinstance(f.facts, dict):
                port, lb = f.facts.get("port"), f.facts.get("loopback(host)")
                if isinstance(port, int) and isinstance(lb, bool) and port in loopback and loopback[port] is None:
                    loopback[port] = lb
    if shape is None:
        return None
    if sleeping:
        quiet = tuple(sorted(p for p, lb in loopback.items() if lb is True and not any(
            t.get("port") == p and t.get("listening") for t in targets)))
        return RetryLoop(shape[0], shape[1], quiet, tuple(shape[3]), backoff=True)
    if 2 * at_connect <= len(seen) or not loopback or any(v is not True for v in loopback.values()):
        return None
    return RetryLoop(shape[0], shape[1], tuple(sorted(loopback)), tuple(shape[3]))


# ------------------------------------------------------------------------------- across samples
@dataclass
class BusyWork:
    """One busy thread of a process across its samples, and what that says."""

    ref: ProcessRef
    label: str
    thread: str
    samples: int
    span_s: float | None
    function: str
    file: str
    lines: tuple[int, ...]
    loop: LoopShape | None
    moved: str = ""  # what moved between samples
    advanced: tuple[str, ...] = ()  # loop state that changed: "i 120 → 9050"
    ignored: tuple[str, ...] = ()  # state that changed but the loop does not test
    frozen: tuple[str, ...] = ()  # loop state the same in every sample
    one_call: str = ""  # the line whose call holds every sample
    helpers: tuple[str, ...] = ()  # other threads of the process, in job code, that work
    code: str = ""  # the source line of the first sample
    sleeping: bool = False  # it sleeps in its loop (a poll, or paced work), not busy
    starting: str = ""  # it is importing modules (a worker starting up): what it moves through is no work
    no_loop: bool = False  # every job frame's source shows its line in no loop: a wait that ends with its call
    retry: RetryLoop | None = None  # a connect retried at once to a loopback port nobody listens on
    expiry: Expiry | None = None  # a time its loop holds at which its wait ends by itself (analyse/expiry.py)

    @property
    def state(self) -> BusyState:
        if self.starting:
            return "undecided"  # loading code: its work, or its wait, has not begun
        if self.retry is not None and self.retry.backoff:
            return "no-spin"  # a connect retried with back-off: it ends when a service listens
        if self.retry is not None and not self.helpers:
            return "spin"  # its stack moves through the connect, its counter climbs: rounds of a loop that cannot end
        if self.moved or self.advanced:
            return "advancing"
        if self.helpers:
            return "undecided"
        kind = self.loop.kind if self.loop else None
        if kind in ("spin-wait", "endless") and self.samples >= 2:
            return "spin"
        if kind in ("self-advancing", "iterating", "timed") or self.one_call or self.no_loop:
            return "no-spin"
        need = rules().busy
        in_place = len(self.lines) == 1 or (self.loop is not None and all(self.loop.covers(n) for n in self.lines))
        if (kind in (None, "unknown") and self.frozen and in_place
                and self.samples >= need.spin_by_state_samples and (self.span_s or 0.0) >= need.spin_by_state_span_s):
            return "spin"  # the same loop and the same state, again and again: nothing it does advances it
        return "undecided"

    @property
    def proven_by_source(self) -> bool:
        """Its loop, as its source reads, cannot end by itself (not only: it did not move)."""
        return (self.retry is not None and not self.retry.backoff) or (
            self.loop is not None and self.loop.kind in ("spin-wait", "endless"))

    def seen(self) -> str:
        """How many samples, over how long."""
        span = f" over {self.span_s:.1f}s" if self.span_s is not None else ""
        return f"{self.samples} sample(s){span}"

    def where(self) -> str:
        lines = "/".join(str(n) for n in self.lines[:4])
        return f"{self.function} line {lines}" + (f" `{self.code[:80]}`" if self.code else "")

    def text(self) -> str:
        """What was seen, in one sentence (used by the summary, the report and the evidence)."""
        state = self.state
        if state == "advancing":
            what = "; ".join(x for x in (f"its stack moved ({self.moved})" if self.moved else "",
                                          f"its loop state advanced ({', '.join(self.advanced[:3])})" if self.advanced else "")
                             if x)
            if self.sleeping:
                return f"{self.label} sleeps between the rounds of a loop that moves on: {what}, in {self.seen()}"
            return f"{self.label} works: {what}, in {self.seen()}"
        if state == "spin":
            if self.retry is not None:
                why = self.retry.why()
            elif self.proven_by_source and self.loop is not None:
                why = self.loop.why()
            else:  # seen by its state: the loop re-reads something (through a call) that never changes
                loop = f"the loop `{self.loop.text}`" if self.loop else "its loop"
                why = f"{loop} found the same state in every sample ({', '.join(self.frozen[:3])})"
            state_text = f"; its state stayed {', '.join(self.frozen[:3])}" if self.frozen and self.proven_by_source else ""
            other = f" ({', '.join(self.ignored[:2])} changed, which the loop does not test)" if self.ignored else ""
            verb = "polls" if self.sleeping else "spins"
            return (f"{self.label} {verb} at {self.where()} in every one of {self.seen()}: {why}"
                    f"{state_text}{other}")
        if state == "no-spin" and self.retry is not None:
            return (f"{self.label} sleeps at {self.where()} in a connect retried with back-off ({self.retry.why()}); "
                    f"nothing was seen to advance in {self.seen()}")
        if state == "no-spin":
            why = (f"every sample is inside one call at {self.where()}: the CPU goes to library or native code "
                   "under that line (numpy, torch, BLAS, a C extension), which `py-spy dump --native` shows"
                   if self.one_call else self.loop.why() if self.loop else "")
            if self.sleeping and self.no_loop:
                return (f"{self.label} sleeps at {self.where()}, in no loop (its source, up to each job "
                        f"function's `def`, shows none): a sleep that ends, then the call goes on; nothing was "
                        f"seen to advance in {self.seen()}")
            if self.sleeping:
                return (f"{self.label} sleeps inside a loop that is no poll for a condition ({why}): paced work; "
                        f"nothing was seen to advance in {self.seen()}")
            return (f"{self.label} is busy in a computation that is no spin ({why}); nothing was seen to advance "
                    f"in {self.seen()}")
        reason = self.starting or (f"other threads of it work ({', '.join(self.helpers[:2])}) and may end its wait"
                                   if self.helpers else "neither its loop's source nor its scalar locals show whether it advances")
        return f"{self.label} is {'sleeping' if self.sleeping else 'busy'} at {self.where()} in {self.seen()}: {reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.ref.pid, "node_id": self.ref.node_id, "name": self.label, "thread": self.thread,
                "state": self.state, "samples": self.samples, "span_s": self.span_s, "function": self.function,
                "lines": list(self.lines), "loop": self.loop.kind if self.loop else None,
                "moved": self.moved, "advanced": list(self.advanced), "frozen": list(self.frozen),
                "one_call": self.one_call, "sleeping": self.sleeping, "text": self.text(),
                **({"retry": {"ports": list(self.retry.ports), "counters": list(self.retry.counters)}}
                   if self.retry is not None else {}),
                **({"expiry": self.expiry.to_dict()} if self.expiry is not None else {})}


def _thread_key(thread: Thread) -> Any:
    return thread.os_thread_id or thread.thread_id or thread.name


def _python(thread: Thread) -> list[Frame]:
    return [f for f in reversed(thread.frames) if not f.native]  # outermost first


OUTER_LOOP_FRAMES = 2  # callers of the job's innermost frame whose loop counts (node_probe reads them)


def _loop_index(frames: list[Frame]) -> int:
    """The frame of the loop the thread runs: the job's innermost frame, or the nearest of its job
    callers that loops (a sleep or a check in a helper called once per round); the innermost
    frame when all are library code."""
    job = [i for i, f in enumerate(frames) if not is_library(f)]
    if not job:
        return len(frames) - 1
    # A generator expression, comprehension or lambda runs inside its caller's statement (a loop
    # test `while any(... for ...)`): the loop is the caller's, whichever frame a sample caught.
    job = [i for i in job if not _INLINE.search(frames[i].function)] or job
    return next((i for i in reversed(job[-(OUTER_LOOP_FRAMES + 1):]) if loop_shape(frames[i]) is not None), job[-1])


def frame_state(frame: Frame) -> dict[str, str]:
    """A frame's scalar state: the node's per-frame facts when read, else py-spy's locals (reprs),
    short values only, object identities left out (`self` is the same object every time)."""
    facts = getattr(frame, "facts", None)
    raw: dict[str, Any] = dict(facts) if isinstance(facts, dict) else dict(frame.locals or {})
    out: dict[str, str] = {}
    for name, value in raw.items():
        text = str(value)
        if name == "self" or len(text) > MAX_VALUE_CHARS or _IDENTITY.match(text):
            continue
        out[str(name)] = text
    return out


def _exited(info: dict[str, Any]) -> bool:
    """The probe listed the process at its first reading and found it gone at its last."""
    states = info.get("run_state")
    return isinstance(states, list) and len(states) > 1 and states[0] is not None and states[-1] is None


def _span(info: dict[str, Any], samples: int) -> float | None:
    times = [float(t) for t in info.get("sampled_at") or [] if isinstance(t, (int, float))]
    if len(times) >= 2:
        return round(max(times) - min(times), 1)
    window = (info.get("progress") or {}).get("window_s")
    return float(window) if isinstance(window, (int, float)) and samples > 1 else None


def _first_difference(stacks: list[list[Frame]], depth: int) -> str:
    """Where the callers (the frames outside the loop's frame) or the loop's function changed."""
    first = stacks[0]
    for other in stacks[1:]:
        for a, b in zip(first[:depth + 1], other, strict=False):
            if a.function != b.function:
                return f"{a.function} then {b.function}"
            if (a.line != b.line) and a is not first[depth]:
                return f"{a.function} at line {a.line} then {b.line}"
        if len(other) <= depth:
            return f"{first[depth].function} returned"
    return ""


def busy_work(verdict: ProcessVerdict, samples: list[Process], info: dict[str, Any],
              sleeping: bool = False, deciding: Thread | None = None) -> BusyWork | None:
    """The deciding busy thread of a busy process across its samples (None when no thread of its
    latest sample is busy in Python code); with `sleeping`, the deciding thread of a process that
    sleeps in a loop (a poll, or paced work), read the same way; with `deciding`, that thread (one
    the in-process graph found running while the process's waits end at it)."""
    main = verdict.main
    latest = verdict.process
    matched = deciding or next((t for t, m in verdict.threads if m is main), None)
    # The thread as py-spy read it (a match re-read without CPU works on an idle copy).
    thread = next((t for t in latest.threads if matched is not None and _thread_key(t) == _thread_key(matched)), None)
    # (a connect re-read as busy-loop, analysis.py: the node saw the thread run, py-spy may not have)
    reread = verdict.pattern == "busy-loop" and thread is not None and not thread.active and _thread_runs(thread, info)
    if thread is None or not (thread.active or sleeping or deciding is not None or reread) or not _python(thread):
        return None
    key = _thread_key(thread)
    ordered = sorted(samples, key=lambda p: p.sample)
    seen: list[Thread] = []
    gone = ""
    for proc in ordered:
        mine = next((t for t in proc.threads if _thread_key(t) == key), None)
        if mine is None or not _python(mine):
            gone = gone or f"the thread was not there in sample {proc.sample + 1}"
            continue
        seen.append(mine)
    stacks = [_python(t) for t in seen]
    depth = _loop_index(stacks[-1])
    loop_frame = stacks[-1][depth]
    work = BusyWork(ref=latest.ref, label=latest.label, thread=str(thread.name or key), samples=len(seen),
                    span_s=_span(info, len(seen)), function=loop_frame.function, file=loop_frame.short_file,
                    lines=(), loop=loop_shape(loop_frame), code=loop_frame.code or "", sleeping=sleeping)
    moved = gone or _first_difference(stacks[-1:] + stacks[:-1], depth) if len(stacks) > 1 else gone
    if not moved and _exited(info):
        # Its process was gone at the probe's last reading: whatever loop it was in, it left it (a
        # pool worker recycled after its task, a job step that finished), so it is not stuck there.
        moved = "its process exited within the window (the probe found it gone at its last reading)"
    frames_at = [s[depth] for s in stacks if len(s) > depth and s[depth].function == loop_frame.function]
    work.lines = tuple(sorted({f.line for f in frames_at if f.line is not None}))
    if not moved and work.loop is not None:
        outside = [n for n in work.lines if not work.loop.covers(n)]
        if outside:
            moved = f"{loop_frame.function} left the loop at line {work.loop.header} for line {outside[0]}"
    callees = {s[depth + 1].function for s in stacks if len(s) > depth + 1}
    if not moved and len(callees) > 1:
        moved = f"the loop calls {', '.join(sorted(callees)[:3])}"
    kind = work.loop.kind if work.loop else None
    if not moved and kind in ("self-advancing", "iterating", "timed") and len(work.lines) > 1:
        # A loop that moves towards its end by itself, seen at other statements of it: it goes round.
        moved = f"the loop ran on, line {work.lines[0]} then {work.lines[-1]}"
    work.moved = moved
    _read_state(work, frames_at, _comprehensions(stacks, depth, loop_frame) if work.loop is None else None)
    line_code = (frames_at[0].code or "") if frames_at else ""
    calls_here = not line_code or "(" in line_code or "@" in line_code
    if (not sleeping and len(work.lines) == 1 and kind not in ("spin-wait", "endless") and calls_here
            and not (work.loop and work.lines[0] == work.loop.header)
            and all(is_library(s[depth + 1]) for s in stacks if len(s) > depth + 1)):
        work.one_call = line_code or f"line {work.lines[0]}"
    if sleeping and work.loop is None:
        job = [f for f in stacks[-1] if not is_library(f)]
        work.no_loop = bool(job) and all(in_no_loop(f) for f in job)
    work.helpers = _working_threads(ordered, key)
    work.retry = connect_retry(seen, info, sleeping=sleeping)
    if any(_IMPORTING.search(f.file) or f.function in ("_find_and_load", "_gcd_import") for s in stacks[-1:] for f in s):
        work.starting = "it is importing modules: a process starting up, whose work (or wait) has not begun"
    return work


_COMPREHENSION = re.compile(r"(^|\.)<(genexpr|listcomp|dictcomp|setcomp)>$")


def _comprehensions(stacks: list[list[Frame]], depth: int, loop_frame: Frame) -> list[Frame | None] | None:
    """When the loop's frame is at a statement that is no loop, the comprehension or generator
    expression it runs there is the loop (`vals = [eigh(m + k) for k in range(n)]`): per sample,
    that frame (its iteration variable is the loop's state), None where the sample has none;
    None when no sample shows one."""
    inner: list[Frame | None] = []
    for s in stacks:
        if len(s) > depth and s[depth].function == loop_frame.function:
            below = s[depth + 1] if len(s) > depth + 1 else None
            inner.append(below if below is not None and _COMPREHENSION.search(below.function) else None)
    return inner if any(f is not None for f in inner) else None


def _read_state(work: BusyWork, frames: list[Frame], inner: list[Frame | None] | None = None) -> None:
    """Which scalar locals of the loop's frame changed between samples, and which did not (with
    those of the comprehension it runs, when that is its loop: `inner`, one per frame)."""
    states = [frame_state(f) for f in frames]
    if inner is not None and len(inner) == len(states):
        states = [{**s, **{f"{name} (in {i.function.rsplit('.', 1)[-1]})": v for name, v in frame_state(i).items()}}
                  if i is not None else s for s, i in zip(states, inner, strict=True)]
    states = [s for s in states if s]
    if len(states) < 2:
        return
    names = sorted(set(states[0]).intersection(*states[1:]))
    # A counter the loop never tests is no progress when nothing else in the loop works (a spin
    # that counts its rounds); with calls in its body, any local that changes may be its work.
    loop = work.loop
    tested = set(loop.tests) if loop and (loop.kind in ("spin-wait", "endless")
                                          or (loop.kind == "unknown" and not loop.body_calls)) else None
    advanced, ignored, frozen = [], [], []
    for name in names:
        values = [s[name] for s in states]
        if len(set(values)) == 1:
            frozen.append(f"{name}={values[0]}")
        elif tested is None or name in tested:
            advanced.append(f"{name} {values[0]} → {values[-1]}")
        else:
            ignored.append(f"{name} {values[0]} → {values[-1]}")
    work.advanced, work.ignored, work.frozen = tuple(advanced), tuple(ignored), tuple(frozen)


def _working_threads(samples: list[Process], busy_key: Any) -> tuple[str, ...]:
    """Other threads of the process in job code that run, or move, between samples: one of them
    may change what a spinning thread tests."""
    by_thread: dict[Any, list[Thread]] = {}
    for proc in samples:
        for t in proc.threads:
            if _thread_key(t) != busy_key and any(not is_library(f) for f in t.frames if not f.native):
                by_thread.setdefault(_thread_key(t), []).append(t)
    working = []
    for threads in by_thread.values():
        stacks = {tuple((f.function, f.line) for f in t.frames if not f.native) for t in threads}
        if any(t.active for t in threads) or len(stacks) > 1:
            working.append(str(threads[-1].name or _thread_key(threads[-1])))
    return tuple(working)


def paced_threads(verdicts: list[ProcessVerdict], collection: Collection) -> list[BusyWork]:
    """Every process whose reading is a sleep in a loop (verdict_rules.yaml `busy.paced_patterns`:
    a poll) across its samples: a loop that tests what nothing in it changes polls; one that
    iterates or changes what it tests is paced work."""
    paced = set(rules().busy.paced_patterns)
    samples: dict[ProcessRef, list[Process]] = {}
    for proc in collection.processes:
        samples.setdefault(proc.ref, []).append(proc)
    out = []
    for v in verdicts:
        if v.verdict == "blocked" and v.pattern in paced:
            work = busy_work(v, samples.get(v.process.ref, [v.process]), collection.info.get(v.process.ref, {}),
                             sleeping=True)
            if work is not None:
                out.append(work)
    return out


def busy_threads(verdicts: list[ProcessVerdict], collection: Collection,
                 refs: set[ProcessRef] | None = None) -> list[BusyWork]:
    """Every busy process's deciding thread across its samples (only `refs` when given). A process
    whose wait is not recognised counts when its deciding thread runs job code: on a loaded node a
    computing thread gets a small share of a CPU, and its match is re-read as not busy."""
    samples: dict[ProcessRef, list[Process]] = {}
    for proc in collection.processes:
        samples.setdefault(proc.ref, []).append(proc)
    out: list[BusyWork] = []
    for v in verdicts:
        ref = v.process.ref
        if v.verdict not in ("busy", "unknown") or (refs is not None and ref not in refs):
            continue
        work = busy_work(v, samples.get(ref, [v.process]), collection.info.get(ref, {}))
        if work is not None:
            out.append(work)
    return out


def standing_threads(graph: WaitGraph, verdicts: list[ProcessVerdict], collection: Collection,
                     known: set[ProcessRef]) -> list[BusyWork]:
    """Busy threads that stand for their process in the wait-for graph (graph/inprocess.py: a
    setter that spins while the process's calls wait on it), for processes not read already
    (`known`): their process's own reading is a wait, theirs is read like a busy process's."""
    by_ref = {v.process.ref: v for v in verdicts}
    samples: dict[ProcessRef, list[Process]] = {}
    for proc in collection.processes:
        samples.setdefault(proc.ref, []).append(proc)
    paced = set(rules().busy.paced_patterns)
    out: list[BusyWork] = []
    for node in graph.nodes.values():
        verdict = by_ref.get(node.ref)
        # A thread standing for its process that sleeps in a loop (a poll, or paced work: a setter
        # that sleeps between items) is read across its samples like a process that does.
        sleeping = node.state == "blocked" and node.pattern in paced and verdict is not None \
            and verdict.pattern not in paced
        if not (node.state == "busy" or sleeping) or node.frame is None or verdict is None or node.ref in known:
            continue
        thread = next((t for t in verdict.process.threads if any(f is node.frame for f in t.frames)), None)
        work = busy_work(verdict, samples.get(node.ref, [verdict.process]), collection.info.get(node.ref, {}),
                         sleeping=sleeping, deciding=thread) if thread is not None else None
        if work is not None:
            out.append(work)
    return out
