"""Which `with` blocks a frame's current line is inside, or entering: read from its source, on its node.

A thread blocked taking a lock shows no frame for the take: py-spy shows the job's frame at its
`with self._lock:` line. The thread that holds the lock is inside a `with` block on the same
lock, further down its own frame's function. Both are read from the source of the frame's file
(on the node that runs it: a submitted job's files live in that node's runtime working dir) and
kept as facts of the frame: `enters` (the block the line opens) and `with` (the blocks around the
line, outermost first), each the block's expression as written (`self._lock`), `; `-joined.
Only blocks of the function the line is in count: a nested function's body is not run under the
enclosing function's blocks.
"""

from __future__ import annotations

import ast
import os

MAX_SOURCE_BYTES = 2_000_000
MAX_EXPR = 80


Block = tuple[int, int, int, int, int, str]  # function start, function end, header, body, end, expression
Parsed = tuple[tuple[tuple[int, int], ...], tuple[Block, ...]]
MODULE = (1, 10**9)
MAX_CACHED = 64
# Files parsed by this process, by (path, mtime, size). A plain dict, not functools.lru_cache:
# this module is shipped to the nodes by value (node_probe.SHIPPED), and an lru_cache wrapper is
# pickled by reference - a node without debug_hang could not rebuild it.
_PARSED: dict[tuple[str, int, int], Parsed] = {}


def _blocks(path: str, mtime_ns: int, size: int) -> Parsed:
    """The (start, end) lines of every function of the file, and (function start, function end,
    header first line, body first line, block end, expression) of every `with` item in it;
    nothing when the file cannot be read or parsed."""
    key = (path, mtime_ns, size)
    if key not in _PARSED:
        if len(_PARSED) >= MAX_CACHED:
            _PARSED.pop(next(iter(_PARSED)))
        _PARSED[key] = _parse(path)
    return _PARSED[key]


def _parse(path: str) -> Parsed:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            tree = ast.parse(fh.read(MAX_SOURCE_BYTES + 1), filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return (), ()
    functions: list[tuple[int, int]] = []
    found: list[Block] = []

    def visit(node: ast.AST, scope: tuple[int, int]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = (child.lineno, child.end_lineno or child.lineno)
                functions.append(inner)
            if isinstance(child, (ast.With, ast.AsyncWith)) and child.body:
                for item in child.items:
                    text = ast.unparse(item.context_expr)[:MAX_EXPR]
                    found.append((*scope, child.lineno, child.body[0].lineno, child.end_lineno or child.lineno, text))
            visit(child, inner)

    visit(tree, MODULE)
    return tuple(functions), tuple(found)


def with_facts(path: str, line: int) -> dict[str, str]:
    """{"enters": ..., "with": ...} for one frame's line (keys only when there is a block)."""
    try:
        stat = os.stat(path)
    except OSError:
        return {}
    if stat.st_size > MAX_SOURCE_BYTES:
        return {}
    functions, blocks = _blocks(path, stat.st_mtime_ns, stat.st_size)
    # The innermost function holding the line: only its own blocks are held at that line.
    scope = max((f for f in functions if f[0] <= line <= f[1]), default=MODULE)
    inside = [b for b in blocks if (b[0], b[1]) == scope]
    entering = [text for _s, _e, head, body, _end, text in inside if head <= line < body]
    around = sorted((head, text) for _s, _e, head, body, end, text in inside if body <= line <= end)
    out: dict[str, str] = {}
    if entering:
        out["enters"] = "; ".join(entering)
    if around:
        out["with"] = "; ".join(text for _head, text in around)
    return out
