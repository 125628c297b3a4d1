"""graph.svg: the wait-for graph drawn by the package itself (pure Python, no Graphviz, no fonts
or scripts fetched): one box per process or folded group, victims above, culprits below and
marked, each arrow labelled with what is waited on, arrows that close a cycle drawn apart.

Every text from the cluster is redacted, then escaped for XML (`untrusted.html_text`), so that a
name or a frame can add no element, script or attribute; the SVG holds no script and no link.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from debug_hang.redact import redact
from debug_hang.report.graph_view import Arrow, Box, GraphView, build_view
from debug_hang.untrusted import html_attr, html_text

if TYPE_CHECKING:
    from debug_hang.analyse.diagnosis import Diagnosis

BOX_W = 300
LINE_H = 16
GAP_X = 48
GAP_Y = 84
MARGIN = 24
HEAD_H = 58
CHARS = 38  # characters of a box line at 12px monospace
LABEL_CHARS = 36
CULPRIT = "#c62828"
CYCLE = "#ad1457"
STATE_FILL = {"blocked": "#fff8e1", "busy": "#ffebee", "idle": "#eceff1", "dead": "#ffcdd2", "pending": "#e3f2fd",
              "restarting": "#fce4ec", "infeasible": "#e3f2fd", "starved": "#e3f2fd"}


def esc(text: object, limit: int | None = None) -> str:
    """Cluster text for the SVG: secrets redacted first (escaping would hide them from the
    writer's pass), then escaped; cut to `limit` characters."""
    return html_text(redact(str(text)), limit)


def _height(box: Box) -> int:
    return LINE_H * (len(box.lines) + 1) + 14 + (LINE_H if box.culprit else 0)


def _positions(view: GraphView) -> tuple[dict[str, tuple[int, int]], int, int]:
    """Top-left corner of each box; the picture's width and height."""
    pos: dict[str, tuple[int, int]] = {}
    widest = max((len(layer) for layer in view.layers), default=1)
    width = max(2 * MARGIN + widest * BOX_W + (widest - 1) * GAP_X + 160, 900)
    y = MARGIN + HEAD_H + 16 * len(view.notes)
    for layer in view.layers:
        span = len(layer) * BOX_W + (len(layer) - 1) * GAP_X
        x = (width - 160 - span) // 2
        tallest = max((_height(b) for b in layer), default=0)
        for box in layer:
            pos[box.id] = (x, y)
            x += BOX_W + GAP_X
        y += tallest + GAP_Y
    return pos, width, y - GAP_Y + MARGIN


def render_svg(diag: Diagnosis) -> str:
    """The whole graph.svg document."""
    return _svg(diag, build_view(diag))


def _svg(diag: Diagnosis, view: GraphView) -> str:
    pos, width, height = _positions(view)
    heights = {b.id: _height(b) for b in view.boxes}
    arrows, reach = _arrows(view, pos, heights)
    width = max(width, reach + LABEL_CHARS * 7 + MARGIN)
    out = [_open(diag, width, height), "<defs>",
           '<marker id="dh_arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
           '<path d="M0,0 L10,5 L0,10 z" fill="#455a64"/></marker>',
           f'<marker id="dh_arrow_cycle" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse">'
           f'<path d="M0,0 L10,5 L0,10 z" fill="{CYCLE}"/></marker>',
           "</defs>", f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           *_header(diag, view, width), *arrows]
    for box in view.boxes:
        out += _box(box, *pos[box.id])
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _open(diag: Diagnosis, width: int, height: int) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'font-family="DejaVu Sans Mono, Menlo, Consolas, monospace" font-size="12" role="img" '
            f'aria-label="{html_attr("wait-for graph of job " + str(diag.job_id))}">')


def _header(diag: Diagnosis, view: GraphView, width: int) -> list[str]:
    cycles = any(a.back for a in view.arrows)
    lines = [f'<text x="{MARGIN}" y="{MARGIN + 6}" font-size="15" font-weight="bold">'
             f'Wait-for graph — job {esc(diag.job_id, 40)}: {esc(diag.verdict)}</text>',
             f'<text x="{MARGIN}" y="{MARGIN + 26}" fill="#455a64">A → B: A waits on B. Victims above, culprits below '
             f'(red, “CULPRIT”).{" Dashed arrows close a cycle (a deadlock)." if cycles else ""}</text>',
             f'<text x="{MARGIN}" y="{MARGIN + 44}" fill="#455a64">{len(view.boxes)} box(es) for '
             f'{sum(len(b.keys) for b in view.boxes):,} graph node(s); a box “Name × N” folds N alike.</text>']
    for i, note in enumerate(view.notes):
        lines.append(f'<text x="{MARGIN}" y="{MARGIN + 62 + 16 * i}" fill="{CULPRIT}">{esc(note, 160)}</text>')
    return lines


def _box(box: Box, x: int, y: int) -> list[str]:
    h = _height(box)
    stroke, sw = (CULPRIT, 3) if box.culprit else ((CYCLE, 2) if box.in_cycle else ("#546e7a", 1))
    fill = STATE_FILL.get(box.state, "#ffffff")
    out = [f'<g class="box{" culprit" if box.culprit else ""}">',
           f'<title>{esc(box.title)} — {esc("; ".join(box.lines))}</title>',
           f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{h}" rx="6" fill="{fill}" stroke="{stroke}" stroke-width="{sw}"'
           + (' stroke-dasharray="6 3"' if box.in_cycle and not box.culprit else "") + "/>"]
    ty = y + LINE_H + 2
    if box.culprit:
        out.append(f'<text x="{x + 10}" y="{ty}" fill="{CULPRIT}" font-weight="bold">CULPRIT</text>')
        ty += LINE_H
    out.append(f'<text x="{x + 10}" y="{ty}" font-weight="bold">{esc(box.title, CHARS)}</text>')
    for line in box.lines:
        ty += LINE_H
        out.append(f'<text x="{x + 10}" y="{ty}" fill="#37474f">{esc(line, CHARS)}</text>')
    out.append("</g>")
    return out


def _wrap(text: str, width: int = LABEL_CHARS, lines: int = 3) -> list[str]:
    """A label on at most `lines` lines of `width` characters (the rest cut, with …)."""
    words, out, cur = text.split(" "), [], ""
    for word in words:
        if cur and len(cur) + 1 + len(word) > width:
            out.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    out.append(cur)
    if len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1] + "…"
    return [line[:width] for line in out]


def _label(text: str, x: float, y: float, colour: str) -> list[str]:
    return [f'<text x="{x:.0f}" y="{y + 12 * i:.0f}" font-size="11" fill="{colour}" stroke="#ffffff" stroke-width="3" '
            f'paint-order="stroke">{esc(line)}</text>' for i, line in enumerate(_wrap(text))]


def _cubic(p: list[tuple[float, float]], t: float) -> tuple[float, float]:
    u = 1 - t
    return (u ** 3 * p[0][0] + 3 * u * u * t * p[1][0] + 3 * u * t * t * p[2][0] + t ** 3 * p[3][0],
            u ** 3 * p[0][1] + 3 * u * u * t * p[1][1] + 3 * u * t * t * p[2][1] + t ** 3 * p[3][1])


def _arrows(view: GraphView, pos: dict[str, tuple[int, int]], heights: dict[str, int]) -> tuple[list[str], int]:
    """Every arrow: a curve between layers, around the boxes when it skips layers or closes a
    cycle; labels spread along the curves of one source so that they do not sit on each other."""
    layer_of = {b.id: b.layer for b in view.boxes}
    right = {i: max((pos[b.id][0] + BOX_W for b in layer), default=0) for i, layer in enumerate(view.layers)}
    fan: dict[str, list[Arrow]] = {}
    fan_in: dict[str, int] = {}
    for arrow in view.arrows:
        fan.setdefault(arrow.src, []).append(arrow)
        if not arrow.back:
            fan_in[arrow.dst] = fan_in.get(arrow.dst, 0) + 1
    out: list[str] = []
    around = reach = 0
    for arrow in view.arrows:
        label = arrow.label if arrow.count == 1 else f"×{arrow.count:,}: {arrow.label}"
        (sx, sy), (dx, dy) = pos[arrow.src], pos[arrow.dst]
        span = layer_of[arrow.dst] - layer_of[arrow.src]
        colour, marker, dash = "#455a64", "dh_arrow", ""
        if arrow.back:
            colour, marker, dash = CYCLE, "dh_arrow_cycle", ' stroke-dasharray="7 4"'
        if arrow.back or span > 1:
            # Around the right of every box in between: out of the source's right edge, into the target's.
            around += 1
            x1, y1 = sx + BOX_W, sy + heights[arrow.src] // 2
            x2, y2 = dx + BOX_W, dy + heights[arrow.dst] // 2 + (8 if arrow.src == arrow.dst else 0)
            low, high = sorted((layer_of[arrow.src], layer_of[arrow.dst]))
            bend = max(right[i] for i in range(low, high + 1)) + 100 + 18 * (around % 6)
            d = f"M{x1},{y1} C{bend},{y1} {bend},{y2} {x2},{y2}"
            lx, ly = float(bend + 4), (y1 + y2) / 2
            reach = max(reach, bend)
        else:
            x1, y1 = sx + BOX_W // 2, sy + heights[arrow.src]
            x2, y2 = dx + BOX_W // 2, dy
            mid = (y1 + y2) // 2
            d = f"M{x1},{y1} C{x1},{mid} {x2},{mid} {x2},{y2}"
            # Arrows into one box meet at its top: label them near their sources; arrows out of one
            # box part at its bottom: label them near their targets.
            t = 0.3 if fan_in[arrow.dst] > 1 else (0.72 if len(fan[arrow.src]) > 1 else 0.5)
            lx, ly = _cubic([(x1, y1), (x1, mid), (x2, mid), (x2, y2)], t)
            lx += 6
        out += [f'<g class="arrow{" cycle" if arrow.back else ""}">', f"<title>{esc(label)}</title>",
                f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.6"{dash} marker-end="url(#{marker})"/>',
                *_label(label, lx, ly, colour), "</g>"]
    return out, int(reach)
