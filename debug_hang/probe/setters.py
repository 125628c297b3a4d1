"""Who could set what a frame waits on, and which Ray calls a frame's function makes later: read
from the job's source on its node (ast, bounded, one parse per file).

A thread in `self.opened.wait()` is released only by code that calls `self.opened.set()` (or
`notify`/`notify_all` on a Condition): in an actor, a method of the same class, called in by
another process. The probe keeps, for the frame at such a wait, the functions of its file that set
the same object (`setters`: `Gate.open:32`; for `self.X`, the methods of the frame's own class,
and those of it that call such a method on self);
a thread in `self.q.put(item)` (a full bounded queue) is released only by a get on that queue: its
`setters` are the functions that call `self.q.get()`/`get_nowait()`,
and for every job frame the Ray calls its function makes after its current line (`calls_after`:
`open:47` for `gate.open.remote()`, `score:12` for `score.options(...).remote()`): a call a
process would make only once the wait it is in returns.

An async actor's method suspended in `await self.ready.wait()` (or `await self.fut`) has no frame
in a stack dump: its call is known only by name (the RUNNING task `Store.vocab`). `awaited_in`
reads that method of the class from the job's files on the node and keeps the `self.X` objects it
awaits and the methods of its class that set them (`set`, `notify`, `set_result`, `put_nowait` for an
awaited `get()`), and which of those run on a thread the class starts (`threads`: passed to
threading.Thread, an executor's submit, run_in_executor or to_thread, or called by such a function).
For a method that awaits `self.Q.join()` it keeps the join and each `self.Q.task_done()` of the class
with what can skip it (a `continue`/`break`/`return`/`raise` of its loop above it, or `in finally`).

For a frame at `self.X.wait()` `set_facts` adds to the frame's facts the sets of X that every normal
return of their method reaches (`sets_always`), where X is cleared or rebound (`resets`), and the
property or method X names when it is one (`defined`): whether a FINISHED setting call must have set
the object the frame waits on.
"""

from __future__ import annotations

import ast
import os

MAX_SOURCE_BYTES = 2_000_000
MAX_SETTERS = 8
MAX_CALLS = 24
MAX_CACHED = 64
WAITS = frozenset({"wait", "wait_for"})
SETS = frozenset({"set", "notify", "notify_all", "set_result"})
MAX_AWAITS = 4
PUTS = frozenset({"put", "put_nowait"})
AWAITED_GETS = frozenset({"get"})  # `await self.q.get()`: an asyncio.Queue, filled without awaiting only by put_nowait
QUEUE_SET = "put_nowait"
TASK_DONE = "task_done"  # what ends a Queue.join(): one task_done() per item got
GETS = frozenset({"get", "get_nowait"})  # a queue's getters (who makes room for a blocked put)
NEW_LOOP = "new_event_loop"
POST_CALL = "call_soon_threadsafe"
POST_CORO = "run_coroutine_threadsafe"
# Calls that run a function on another thread: the argument that names it (a keyword, or a position).
THREAD_STARTS: dict[str, tuple[str, int]] = {"Thread": ("target", 99), "Timer": ("function", 1), "submit": ("", 0),
                                             "to_thread": ("", 0), "run_in_executor": ("", 1),
                                             "start_new_thread": ("", 0)}

Scope = tuple[int, int, str, str]  # first line, last line, qualified name, enclosing class ("" at none)
MODULE: Scope = (1, 10**9, "<module>", "")


class _Parsed:
    """One file's functions, its waits and sets on named objects, and its Ray calls."""

    def __init__(self) -> None:
        self.scopes: list[Scope] = []
        self.waits: list[tuple[int, int, str]] = []  # first line, last line of the call, object waited on
        self.sets: list[tuple[int, str, Scope]] = []  # line, object set, the function that sets it
        self.remote: list[tuple[int, str, Scope]] = []  # line, function or method called `.remote(`, caller
        self.awaits: list[tuple[int, str, Scope]] = []  # line, object awaited (`await x.wait()`, `await x`), awaiter
        self.puts: list[tuple[int, str, Scope]] = []  # line, queue put into (`x.put(...)`, `x.put_nowait(...)`), putter
        self.gets: list[tuple[int, str, Scope]] = []  # line, queue taken from (`x.get(...)`, `x.get_nowait()`), getter
        self.loops: list[tuple[int, str, str, Scope]] = []  # line, target, the line's code, for `x = new_event_loop()`
        self.posts: list[tuple[int, str, Scope]] = []  # line, loop posted to (`x.call_soon_threadsafe`, run_coroutine_threadsafe(c, x))
        self.threads: list[tuple[int, str, str, Scope]] = []  # line, function run on a thread (`self._load`), the call, starter
        self.selfcalls: list[tuple[int, str, Scope]] = []  # line, method called on self (`self._finish()`), caller
        self.set_code: dict[int, str] = {}  # line of a set / put -> its call (`self.loaded.set()`)
        self.resets: list[tuple[int, str, Scope]] = []  # line, object cleared (`x.clear()`) or rebound (`self.x = ...`)
        self.aliases: list[tuple[str, str, Scope]] = []  # local name, what it is bound to (`ev = self.ready`), where
        self.sure: set[int] = set()  # lines of sets reached by every normal return of their function
        self.memo: dict[tuple[str, int], list[str]] = {}  # (what, line) -> the answer already given
        self.joins: list[tuple[int, str, Scope]] = []  # line, queue joined (`await x.join()`), joiner
        self.dones: list[tuple[int, str, Scope]] = []  # line, queue marked (`x.task_done()`), caller
        self.skips: dict[int, str] = {}  # line of a task_done -> what can skip it (`continue:32`, `finally`)
        self.remote_awaits: list[tuple[int, str, Scope]] = []  # line, `await` of a `.remote(` call (a handle's), awaiter
        self.await_sites: list[tuple[int, str, Scope]] = []  # line, each await (`await x`, `async with x:`), awaiter


# Files parsed by this process, by (path, mtime, size). A plain dict, not functools.lru_cache:
# this module is shipped to the nodes by value (node_probe.SHIPPED).
_PARSED: dict[tuple[str, int, int], _Parsed | None] = {}


def _parse(path: str) -> _Parsed | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    if stat.st_size > MAX_SOURCE_BYTES:
        return None
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _PARSED:
        if len(_PARSED) >= MAX_CACHED:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = _read(path)
    return _PARSED[key]


def _read(path: str) -> _Parsed | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            tree = ast.parse(fh.read(MAX_SOURCE_BYTES + 1), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
    out = _Parsed()

    def visit(node: ast.AST, scope: Scope, cls: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner, inner_cls, inner_prefix = scope, cls, prefix
            if isinstance(child, ast.ClassDef):
                inner_cls = inner_prefix = f"{prefix}{child.name}"
                inner_prefix += "."
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = (child.lineno, child.end_lineno or child.lineno, f"{prefix}{child.name}", cls)
                out.scopes.append(inner)
                inner_cls, inner_prefix = "", f"{prefix}{child.name}.<locals>."
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                _call(child, child.func, scope, out)
            elif isinstance(child, ast.Call) and isinstance(child.func, ast.Name) and child.func.id == POST_CORO \
                    and len(child.args) > 1:
                out.posts.append((child.lineno, ast.unparse(child.args[1]), scope))
            if isinstance(child, ast.Call) and (run := _run_on_thread(child)):
                out.threads.append((child.lineno, run, _names(child.func), scope))
            if isinstance(child, ast.Assign):
                _assign(child, scope, out)
            if isinstance(child, ast.Assign) and isinstance(child.value, ast.Call) and _names(child.value.func) == NEW_LOOP:
                out.loops.extend((child.lineno, ast.unparse(t), ast.unparse(child)[:200], scope) for t in child.targets)
            elif isinstance(child, (ast.Await, ast.AsyncWith)):
                _await(child, scope, out)
            visit(child, inner, inner_cls, inner_prefix)

    visit(tree, MODULE, "", "")
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.sure.update(_sure_sets(fn))
            out.skips.update(_done_skips(fn))
    return out


_EXITS = {ast.Continue: "continue", ast.Break: "break", ast.Return: "return", ast.Raise: "raise"}


def _has_done(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == TASK_DONE
               for n in ast.walk(node))


def _done_skips(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, str]:
    """Per `x.task_done()` statement in a loop of `fn`: `finally` when it is in a `finally` (every
    path runs it), else the first `continue`/`break`/`return`/`raise` of the same loop body above
    it on a path that has not called task_done yet (`continue:32`: that path skips it); "" when
    none is seen."""
    walk = _DoneWalk()
    walk.block(fn.body, 0, False, False)
    out: dict[int, str] = {}
    for loop, line, final in walk.dones:
        if loop:
            skip = next((f"{kind}:{at}" for lp, at, kind in sorted(walk.exits, key=lambda e: e[1])
                         if lp == loop and at < line), "")
            out[line] = "finally" if final else skip
    return out


class _DoneWalk:
    """The task_done statements of a function and the exits of its loops, by loop (0: none)."""

    def __init__(self) -> None:
        self.dones: list[tuple[int, int, bool]] = []  # loop, line, in a finally
        self.exits: list[tuple[int, int, str]] = []  # loop, line, kind (on a path with no task_done before it)

    def block(self, stmts: list[ast.stmt], loop: int, done: bool, final: bool) -> None:
        for stmt in stmts:
            done = self.stmt(stmt, loop, done, final)

    def stmt(self, stmt: ast.stmt, loop: int, done: bool, final: bool) -> bool:
        """Walk one statement; whether task_done was called on every path past it."""
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.block(stmt.body, id(stmt), False, False)
            self.block(stmt.orelse, loop, done, final)
        elif isinstance(stmt, ast.If):
            self.block(stmt.body, loop, done, final)
            self.block(stmt.orelse, loop, done, final)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.block(stmt.body, loop, done, final)
            return done or any(_has_done(s) for s in stmt.body) and not any(
                type(n) in _EXITS for s in stmt.body for n in ast.walk(s))
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse):
                self.block(part, loop, done, final)
            self.block(stmt.finalbody, loop, done, True)
            return done or any(_has_done(s) for s in stmt.finalbody)
        elif type(stmt) in _EXITS:
            if loop and not done:
                self.exits.append((loop, stmt.lineno, _EXITS[type(stmt)]))
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _has_done(stmt):
            self.dones.append((loop, stmt.lineno, final))
            return True
        return done


def _assign(node: ast.Assign, scope: Scope, out: _Parsed) -> None:
    """`self.x = ...` outside __init__ rebinds x; `ev = self.x` makes a local alias of it."""
    for target in node.targets:
        text = ast.unparse(target)
        if text.startswith("self.") and not scope[2].endswith(".__init__"):
            out.resets.append((node.lineno, text, scope))
        elif isinstance(target, ast.Name) and isinstance(node.value, ast.Attribute):
            out.aliases.append((target.id, ast.unparse(node.value), scope))


def _sure_sets(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """The lines of `x.set()` statements that every normal return of `fn` passes: in its body
    (or a `with` body, or a `finally`), with no `return` above them and no branch, loop or
    `try` body around them (a raise caught there would skip them)."""
    returns = [n.lineno for n in _own_nodes(fn) if isinstance(n, ast.Return)]
    out: set[int] = set()
    todo: list[list[ast.stmt]] = [fn.body]
    while todo:
        for stmt in todo.pop():
            if isinstance(stmt, (ast.With, ast.AsyncWith)):
                todo.append(stmt.body)
            elif isinstance(stmt, ast.Try):
                todo.append(stmt.finalbody)
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                    and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "set" \
                    and not any(r < stmt.lineno for r in returns):
                out.add(stmt.lineno)
    return out


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function's body, not those of functions or classes nested in it."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            out.append(node)
            todo.extend(ast.iter_child_nodes(node))
    return out


def _await(node: ast.Await | ast.AsyncWith, scope: Scope, out: _Parsed) -> None:
    """An `await x` (what it awaits, the queue it joins, a `.remote(` call) or an `async with x:`, in its function."""
    if isinstance(node, ast.AsyncWith):
        out.await_sites.extend((node.lineno, f"async with {ast.unparse(item.context_expr)}:"[:120], scope)
                               for item in node.items[:1])
        return
    out.await_sites.append((node.lineno, f"await {ast.unparse(node.value)}"[:120], scope))
    out.awaits.extend((node.lineno, text, scope) for text in _awaited(node.value))
    if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "remote"
           for n in ast.walk(node.value)):
        out.remote_awaits.append((node.lineno, ast.unparse(node)[:160], scope))
    for text in _joined(node.value):
        out.joins.append((node.lineno, text, scope))
        out.set_code.setdefault(node.lineno, f"await {text}.join()"[:120])


def _call(call: ast.Call, func: ast.Attribute, scope: Scope, out: _Parsed) -> None:
    if func.attr in WAITS:
        out.waits.append((call.lineno, call.end_lineno or call.lineno, ast.unparse(func.value)))
    elif func.attr in SETS:
        out.sets.append((call.lineno, ast.unparse(func.value), scope))
        out.set_code.setdefault(call.lineno, f"{ast.unparse(func)}()"[:120])
    elif func.attr == "clear":
        out.resets.append((call.lineno, ast.unparse(func.value), scope))
    elif func.attr in PUTS:
        out.puts.append((call.lineno, ast.unparse(func.value), scope))
        out.set_code.setdefault(call.lineno, f"{ast.unparse(func)}()"[:120])
        if func.attr == "put":  # a blocking put also waits (for a get on the same queue)
            out.waits.append((call.lineno, call.end_lineno or call.lineno, "put:" + ast.unparse(func.value)))
    elif func.attr in GETS:
        out.gets.append((call.lineno, ast.unparse(func.value), scope))
    elif func.attr == TASK_DONE:
        out.dones.append((call.lineno, ast.unparse(func.value), scope))
        out.set_code.setdefault(call.lineno, f"{ast.unparse(func)}()"[:120])
    elif func.attr == POST_CALL:
        out.posts.append((call.lineno, ast.unparse(func.value), scope))
    elif func.attr == POST_CORO and len(call.args) > 1:
        out.posts.append((call.lineno, ast.unparse(call.args[1]), scope))
    elif isinstance(func.value, ast.Name) and func.value.id == "self":
        out.selfcalls.append((call.lineno, func.attr, scope))
    if func.attr == "remote":
        target = func.value
        if isinstance(target, ast.Call) and isinstance(target.func, ast.Attribute) and target.func.attr == "options":
            target = target.func.value  # f.options(...).remote()
        name = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) else None
        if name and name != "ray":  # `ray.remote(...)` declares a remote function; it calls none
            out.remote.append((call.lineno, name, scope))


def _run_on_thread(call: ast.Call) -> str:
    """The function a call runs on another thread (`threading.Thread(target=self._load)`,
    `pool.submit(self._load)`, `loop.run_in_executor(None, self._load)`, `asyncio.to_thread(f)`),
    as written; "" when the call starts none."""
    how = THREAD_STARTS.get(_names(call.func))
    if how is None:
        return ""
    keyword, position = how
    arg = next((k.value for k in call.keywords if keyword and k.arg == keyword), None)
    if arg is None and position < len(call.args):
        arg = call.args[position]
    return ast.unparse(arg) if isinstance(arg, (ast.Attribute, ast.Name)) else ""


def _names(func: ast.expr) -> str:
    """The called name of a call's function (`asyncio.new_event_loop` -> `new_event_loop`)."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _awaited(value: ast.expr) -> list[str]:
    """The named objects an `await` waits on: `x` for `await x` (a Future, a Task), and `x` of each
    `x.wait()` inside the awaited expression (`asyncio.wait_for(x.wait(), t)`)."""
    if isinstance(value, (ast.Attribute, ast.Name)):
        return [ast.unparse(value)]
    return [ast.unparse(n.func.value) for n in ast.walk(value)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in WAITS | AWAITED_GETS]


def _joined(value: ast.expr) -> list[str]:
    """`x` of each `x.join()` (no argument: asyncio.Queue.join) in the awaited expression."""
    return [ast.unparse(n.func.value) for n in ast.walk(value)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "join" and not n.args
            and not n.keywords]


def _scope_of(parsed: _Parsed, line: int) -> Scope:
    """The innermost function holding the line (the module when none)."""
    return max((s for s in parsed.scopes if s[0] <= line <= s[1]), key=lambda s: s[0], default=MODULE)


def setters_of(path: str, line: int) -> list[str]:
    """`Class.method:line` of each function of the file that sets or notifies the object the
    frame's line waits on (`self.X.wait()`: the methods of the frame's own class that call
    `self.X.set()`/`notify()`, or call such a method on self; `self.q.put(x)`: those that call
    `self.q.get()`); empty when the line waits on no named object."""
    parsed = _parse(path)
    if parsed is None:
        return []
    if ("setters", line) not in parsed.memo:
        parsed.memo["setters", line] = _setters(parsed, line)
    return parsed.memo["setters", line]


def _setters(parsed: _Parsed, line: int) -> list[str]:
    scope = _scope_of(parsed, line)
    waited = {text for first, last, text in parsed.waits if first <= line <= last and scope[0] <= first <= scope[1]}
    releasers = sorted(parsed.sets) + [(at, "put:" + text, where) for at, text, where in sorted(parsed.gets)]
    out: list[str] = []
    for at, text, where in releasers:
        if text not in waited or (text.removeprefix("put:").startswith("self.") and where[3] != scope[3]):
            continue  # another object, or the same attribute name of another class
        entry = f"{where[2]}:{at}"
        if entry not in out:
            out.append(entry)
        if text.startswith("self."):
            _through_self(parsed, where, out)
    return out[:MAX_SETTERS]


def _through_self(parsed: _Parsed, setter: Scope, out: list[str]) -> None:
    """The methods of the setter's class that call it on self (`self._open()`), and theirs in turn:
    a call of one of them sets the object too (`Class.method:line` of the call)."""
    todo, seen = [setter], {setter}
    while todo and len(out) < MAX_SETTERS:
        name = todo.pop()[2].rsplit(".", 1)[-1]
        for at, attr, caller in sorted(parsed.selfcalls):
            if attr == name and caller[3] == setter[3] and caller not in seen:
                seen.add(caller)
                todo.append(caller)
                if (entry := f"{caller[2]}:{at}") not in out:
                    out.append(entry)


def set_facts(path: str, line: int) -> dict[str, str]:
    """For a frame waiting on `self.X.wait()`: the sets of X in its class that every normal
    return of their method reaches (`sets_always`: `Cls.load:36`), the places that clear or
    rebind X (`resets`: `Cls.reload:30`, a clear through a local alias too), and the method or
    property X names when it is one (`defined`: `Cls._ready:27`), each `; `-joined; {} when the
    line waits on no `self.` object."""
    parsed = _parse(path)
    if parsed is None:
        return {}
    scope = _scope_of(parsed, line)
    waited = {text for first, last, text in parsed.waits if first <= line <= last and scope[0] <= first <= scope[1]
              and text.startswith("self.") and text.count(".") == 1}
    if not waited or not scope[3]:
        return {}
    cls = scope[3]
    aliases = {(name, where) for name, text, where in parsed.aliases if text in waited and where[3] == cls}
    sure = [f"{where[2]}:{at}" for at, text, where in sorted(parsed.sets)
            if text in waited and where[3] == cls and at in parsed.sure]
    resets = [f"{where[2]}:{at}" for at, text, where in sorted(parsed.resets)
              if where[3] == cls and (text in waited or (text, where) in aliases)]
    defined = [f"{s[2]}:{s[0]}" for s in parsed.scopes if s[3] == cls and f"self.{s[2].rsplit('.', 1)[-1]}" in waited]
    out = {"sets_always": "; ".join(sure[:MAX_SETTERS]), "resets": "; ".join(resets[:MAX_SETTERS]),
           "defined": "; ".join(defined[:1])}
    return {k: v for k, v in out.items() if v}


def calls_after(path: str, line: int) -> list[str]:
    """`name:line` of each Ray call (`x.name.remote(...)`, `name.remote(...)`) the frame's own
    function makes after its current line (not those of functions nested in it)."""
    parsed = _parse(path)
    if parsed is None:
        return []
    if ("calls", line) not in parsed.memo:
        scope = _scope_of(parsed, line)
        parsed.memo["calls", line] = [f"{name}:{at}" for at, name, where in sorted(parsed.remote)
                                      if at > line and where == scope][:MAX_CALLS]
    return parsed.memo["calls", line]


def remote_awaits(path: str, cls: str) -> list[dict[str, object]]:
    """The awaits of a `.remote(...)` call (a Serve DeploymentHandle's, an actor's) in the methods of
    class `cls` in the file, in line order: [{"method": "Cls.m", "file", "line", "code"}] (at most
    MAX_CALLS). An awaiting request handler has no frame; these are the lines it can be awaiting at."""
    parsed = _parse(path)
    if parsed is None:
        return []
    return [{"method": where[2], "file": path, "line": line, "code": code}
            for line, code, where in sorted(parsed.remote_awaits)
            if where[3] and where[3].rsplit(".", 1)[-1] == cls][:MAX_CALLS]


def awaited_in(path: str, cls: str, method: str) -> dict[str, object] | None:
    """What method `method` of class `cls` in the file awaits and who sets it: {"method":
    "Cls.method", "file", "line" (of the first await on a `self.` object that the class sets),
    "awaits": ["self.X"], "setters": ["Cls.m:line"]}; None when the file has no such method or
    it awaits no `self.` object a method of its class sets."""
    parsed = _parse(path)
    if parsed is None:
        return None
    scope = next((s for s in parsed.scopes if s[3] and s[3].rsplit(".", 1)[-1] == cls
                  and s[2] == f"{s[3]}.{method}"), None)
    if scope is None:
        return None
    every = [(at, text) for at, text, where in sorted(parsed.awaits) if where == scope]
    awaited = [(at, text) for at, text in every if text.startswith("self.")]
    setters: list[str] = []
    found: list[str] = []
    first = 0
    puts = [(line, obj, where) for line, obj, where in parsed.puts if parsed.set_code.get(line, "").endswith(f".{QUEUE_SET}()")]
    for at, text in awaited:
        mine = [f"{where[2]}:{line}" for line, obj, where in sorted(parsed.sets + puts)
                if obj == text and where[3] == scope[3]]
        if mine and text not in found:
            found.append(text)
            first = first or at
            setters.extend(entry for entry in mine if entry not in setters)
    handoff = _handoff(parsed, scope, every)
    joined = _joins(parsed, scope)
    if not found and not handoff and not joined:
        return None
    out: dict[str, object] = {"method": scope[2], "file": path,
                              "line": first or handoff.get("line", 0) or joined.get("line", 0),
                              "awaits": found[:MAX_AWAITS], "setters": setters[:MAX_SETTERS]}
    out.update((k, v) for k, v in handoff.items() if k != "line")
    out.update((k, v) for k, v in joined.items() if k != "line")
    if threaded := _from_threads(parsed, scope[3], setters):
        out["threads"] = threaded
    return out


MAX_AWAIT_DEPTH = 3


def await_site(path: str, cls: str, method: str) -> dict[str, object] | None:
    """The first await of method `method` of class `cls`, followed into the methods of the class it
    awaits (`await self._guarded(k)` -> `_guarded`'s first await), at most MAX_AWAIT_DEPTH deep:
    {"method": "Cls.m", "file", "line", "code": "await self.sem.acquire()", "via": ["Cls.f:47"]}.
    A suspended coroutine is on no stack: this is where its source first awaits, not a reading of
    where it is suspended. None when the method is not in the file or awaits nothing."""
    parsed = _parse(path)
    if parsed is None:
        return None
    via: list[str] = []
    found: dict[str, object] | None = None
    for _depth in range(MAX_AWAIT_DEPTH):
        scope = next((s for s in parsed.scopes if s[3] and s[3].rsplit(".", 1)[-1] == cls
                      and s[2] == f"{s[3]}.{method}"), None)
        if scope is None:
            break
        sites = sorted((at, code) for at, code, where in parsed.await_sites if where == scope)
        if not sites:
            break
        at, code = sites[0]
        found = {"method": scope[2], "file": path, "line": at, "code": code, "via": list(via)}
        callee = code.removeprefix("await ").split("(", 1)[0]
        if not code.startswith("await self.") or callee.count(".") != 1 or "(" not in code:
            break
        via.append(f"{scope[2]}:{at}")
        method = callee.split(".", 1)[1]
    return found


def _joins(parsed: _Parsed, scope: Scope) -> dict[str, object]:
    """A method that awaits `self.Q.join()`: the join (`self.Q:43 await self.Q.join()`) and each
    `self.Q.task_done()` of its class, with what can skip it (`Cls._consume:35 self.Q.task_done()
    skipped by continue:32`, `... in finally`, or no suffix: none seen). A join returns only once
    every item got was marked done. Empty when the method awaits no join of a `self.` queue."""
    joins = [(at, text) for at, text, where in sorted(parsed.joins) if where == scope and text.startswith("self.")]
    if not joins:
        return {}
    queues = {text for _at, text in joins}
    dones: list[str] = []
    for at, text, where in sorted(parsed.dones):
        if text in queues and where[3] == scope[3]:
            skip = parsed.skips.get(at, "")
            how = " in finally" if skip == "finally" else f" skipped by {skip}" if skip else ""
            dones.append(f"{where[2]}:{at} {parsed.set_code.get(at, 'task_done()')}{how}")
    return {"line": joins[0][0], "joins": [f"{text}:{at} {parsed.set_code.get(at, '')}".rstrip()
                                           for at, text in joins][:MAX_AWAITS],
            "task_done": dones[:MAX_SETTERS]}


def _from_threads(parsed: _Parsed, cls: str, setters: list[str]) -> list[str]:
    """Which of the setters (`Cls.m:line`) run on a thread the class starts: `m` passed to
    threading.Thread / an executor / to_thread in the class, or called (`self.m()`) by such a
    function. `Cls._load:37 self.loaded.set() via Thread:31` (the set, and the call that starts it)."""
    started = {text.split(".", 1)[1]: (at, how) for at, text, how, where in sorted(parsed.threads)
               if where[3] == cls and text.startswith("self.") and text.count(".") == 1}
    for _at, name, where in sorted(parsed.selfcalls):
        runner = where[2].rsplit(".", 1)[-1]
        if where[3] == cls and runner in started and name not in started:
            started[name] = started[runner]
    out: list[str] = []
    for entry in setters:
        qualname, _, line = entry.rpartition(":")
        method = qualname.rsplit(".", 1)[-1]
        if method in started and line.isdigit():
            at, how = started[method]
            out.append(f"{entry} {parsed.set_code.get(int(line), 'set()')} via {how}:{at}")
    return out[:MAX_SETTERS]


def _handoff(parsed: _Parsed, scope: Scope, every: list[tuple[int, str]]) -> dict[str, object]:
    """A method that puts into a `self.` queue and then awaits a plain name (`await fut`): the
    work handed to another thread of its class, which completes what it awaits. Kept: the puts
    (`self.Q:line`), the awaits (`fut:line`), the class's loops made with new_event_loop()
    (`Cls.__init__:30 self._loop = asyncio.new_event_loop()`) and its posts to them
    (`Cls._callback:38 self._loop`): where the wake-up goes. Empty when not such a method."""
    puts = [(at, text) for at, text, where in sorted(parsed.puts) if where == scope and text.startswith("self.")]
    pending = [(at, text) for at, text in every if not text.startswith("self.") and "." not in text
               and any(put_at < at for put_at, _t in puts)]
    if not puts or not pending:
        return {}
    cls = scope[3]
    loops = [(at, target, code, where) for at, target, code, where in sorted(parsed.loops)
             if where[3] == cls and target.startswith("self.")]
    made = {target for _at, target, _code, _where in loops}
    posts = [(at, text, where) for at, text, where in sorted(parsed.posts) if where[3] == cls and text in made]
    return {"line": pending[0][0], "puts": [f"{text}:{at}" for at, text in puts][:MAX_AWAITS],
            "pending": [f"{text}:{at}" for at, text in pending][:MAX_AWAITS],
            "loops": [f"{where[2]}:{at} {code}" for at, _target, code, where in loops][:MAX_AWAITS],
            "posts": [f"{where[2]}:{at} {text}" for at, text, where in posts][:MAX_SETTERS]}
