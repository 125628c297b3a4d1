"""graph.svg and report.html: written for every diagnosis, self-contained, inert, readable from 3
processes to 2,000 ranks, and the job's text can never add markup — checked on the page's own
elements, on every recorded real capture, and in a real headless Chromium (tests/browser.py):
it renders without a console error, a blocked fetch or a CSP violation, the culprit is on the
first screen, and a class name holding `<script>` stays text.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import find_chromium, open_page
from hypothesis import given, settings
from hypothesis import strategies as st
from scale_capture import build

from debug_hang.pipeline import load_capture, reanalyse
from debug_hang.report.graph_view import build_view
from debug_hang.report.html import CSP, render_html
from debug_hang.report.svg import render_svg
from debug_hang.report.write import write_outputs
from debug_hang.untrusted import html_attr, html_text

CASES = Path(__file__).resolve().parent / "data" / "cases"
RECORDED = sorted(p for p in CASES.iterdir() if (p / "stacks.json").exists())
MAX_BYTES = 1 << 20  # each file, at 2,000 ranks
# The page's whole vocabulary: what render_html and render_svg write. Anything else is markup a
# text from the cluster added.
ELEMENTS = {"html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "p", "span", "dl", "dt", "dd",
            "a", "div", "ul", "li", "code", "pre", "details", "summary", "b", "svg", "defs", "marker", "path", "rect",
            "g", "text"}
HOSTILE = '<script>alert("debug-hang")</script>'  # in the recorded trainer's class name (examples/secrets_in_the_job.py)


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    return tags


def assert_inert(page: str) -> Tags:
    """Only the page's own elements; no script, no event handler, no link out, no fetch."""
    tags = parse(page)
    assert {t for t, _ in tags.tags} <= ELEMENTS, {t for t, _ in tags.tags} - ELEMENTS
    for tag, attrs in tags.tags:
        assert not [a for a in attrs if a.startswith("on") or a in ("src", "srcset", "action", "formaction")], (tag, attrs)
        if tag == "a":
            assert str(attrs.get("href", "")).startswith("#"), attrs
        assert all("url(" not in str(v) or str(v).startswith("url(#dh_arrow") for v in attrs.values()), (tag, attrs)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(styles) <= 1 and not any("url(" in s or "@import" in s for s in styles)
    return tags


# ---------------------------------------------------------------- the escapers

@pytest.mark.unit
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_html_text_leaves_no_markup_character(text: str) -> None:
    for out in (html_text(text), html_text(text, newlines=True), html_attr(text)):
        assert not re.search(r"[<>\"']", out)
        assert re.fullmatch(r"([^&]|&(amp|lt|gt|quot|#39);)*", out, re.S), out
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]", out)
        out.encode("utf-8")  # no lone surrogate left to break the writer
    assert "\n" not in html_attr(text) and "\n" not in html_text(text)


@pytest.mark.unit
def test_html_text_round_trips_through_a_parser() -> None:
    # GIVEN text that tries every way out of character data and out of a quoted attribute
    hostile = f'{HOSTILE} "><img src=x onerror=alert(1)> \' onmouseover=\'x & &amp; ]]> --> \x1b[2J'
    page = f'<p title="{html_attr(hostile)}">{html_text(hostile)}</p>'
    tags = parse(page)
    # THEN the parser sees one element, its attribute and its text exactly as given (controls gone)
    assert [t for t, _ in tags.tags] == ["p"]
    clean = hostile.replace("\x1b[2J", "")
    assert tags.tags[0][1]["title"] == clean and "".join(tags.text) == clean


# ---------------------------------------------------------------- every recorded capture

@pytest.mark.unit
@pytest.mark.parametrize("case", RECORDED, ids=lambda p: p.name)
def test_every_recorded_diagnosis_has_an_inert_page_and_a_picture(case: Path) -> None:
    diag = reanalyse(case)
    svg = render_svg(diag)
    root = ET.fromstring(svg)  # well-formed XML
    assert root.tag.endswith("svg") and not root.findall(".//{http://www.w3.org/2000/svg}script")
    page = render_html(diag, svg)
    assert f'content="{CSP}"' in page and "<script" not in page
    tags = assert_inert(page)
    text = "".join(tags.text)
    for cause in diag.causes[:1]:
        # the culprit is named in the first screen and marked in the picture
        assert "CULPRIT" in svg and 'class="box culprit"' in svg
        assert cause.culprits[0].name[:30] in text or cause.culprits[0].name[:30] in html_text(text)


@pytest.mark.unit
def test_a_deadlock_cycle_is_drawn_as_one() -> None:
    view = build_view(reanalyse(CASES / "actor_call_cycle"))
    assert sum(a.back for a in view.arrows) == 1 and all(b.culprit for b in view.boxes if b.in_cycle)
    svg = render_svg(reanalyse(CASES / "actor_call_cycle"))
    assert svg.count('class="arrow cycle"') == 1 and "Dashed arrows close a cycle" in svg
    # four alike loaders in one starvation cycle are one box, the cycle two arrows
    view = build_view(reanalyse(CASES / "starvation"))
    titles = sorted(b.title for b in view.boxes)
    assert "ShardLoader × 4" in titles and len(view.boxes) == 3 and sum(a.back for a in view.arrows) == 1


@pytest.mark.unit
def test_two_thousand_ranks_on_250_nodes_fold_into_a_few_boxes(tmp_path: Path) -> None:
    # GIVEN 1,998 ranks in one all-reduce and 2 that skipped it, on 250 nodes
    folder = build(tmp_path / "capture", ranks=2000, nodes=250, odd=(2, 1337))
    diag = reanalyse(folder)
    view = build_view(diag)
    # THEN one box holds the 1,998 with their ranks and nodes, each culprit has its own
    titles = {b.title: b for b in view.boxes}
    assert len(view.boxes) == 4, list(titles)
    group = titles["TrainWorker × 1,998"]
    assert "ranks 0–1, 3–1,336, 1,338–1,999" in group.lines and "on 250 nodes" in group.lines
    assert {t for t, b in titles.items() if b.culprit} == {"TrainWorker[rank 2]", "TrainWorker[rank 1337]"}
    assert {(a.count, a.label) for a in view.arrows if a.dst != group.id} >= {(1998, "in all_reduce; TrainWorker rank 2 is not")}
    # AND the files stay far under 1 MB
    write_outputs(diag, tmp_path / "out", load_capture(folder).tasks_after)
    for name in ("graph.svg", "report.html"):
        size = (tmp_path / "out" / name).stat().st_size
        assert size < MAX_BYTES, (name, size)
    assert_inert((tmp_path / "out" / "report.html").read_text())


@pytest.mark.unit
def test_hostile_names_and_log_lines_stay_text() -> None:
    # GIVEN the recorded real run whose trainer class holds a <script> element and whose actor
    # name closes an attribute, and whose loader logs the hub's HTML error page
    diag = reanalyse(CASES / "secrets_in_the_job")
    names = [a.class_name or "" for a in diag.rows.actors] + [a.name or "" for a in diag.rows.actors]
    assert any(HOSTILE in n for n in names), "the recorded case predates the <script> class name"
    page = render_html(diag, render_svg(diag))
    # THEN the page holds them only as text
    tags = assert_inert(page)
    assert HOSTILE in "".join(tags.text)
    assert "<script" not in page and "<img" not in page
    assert not re.search(r"<[^>]*onerror=", page), "an onerror= attribute inside a tag"


# ---------------------------------------------------------------- a real browser

def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        reason = os.environ.get("DEBUG_HANG_NO_BROWSER")
        if reason:  # .ci/run tried to install it and could not: say why
            pytest.skip(f"no Chromium: {reason}")
        pytest.fail("Chromium is not installed: apt-get install -y chromium (.ci/run does it)")
    return exe


FIRST_SCREEN = {
    "culprit": "document.getElementById('culprit') ? document.getElementById('culprit').textContent : null",
    "culprit_top": "document.getElementById('culprit') ? document.getElementById('culprit').getBoundingClientRect().top : -1",
    "viewport": "window.innerHeight",
    "scripts": "document.querySelectorAll('script').length",
    "images": "document.querySelectorAll('img, iframe, object, embed').length",
    "svg_boxes": "document.querySelectorAll('svg g.box').length",
    "text": "document.body.innerText",
    "details": "document.querySelectorAll('details').length",
}


@pytest.mark.integration
@pytest.mark.parametrize("case", ["queue_producer_gone", "actor_call_cycle", "secrets_in_the_job", "scale"])
def test_the_page_renders_in_chromium_with_the_culprit_on_the_first_screen(case: str, tmp_path: Path) -> None:
    exe = chromium()
    folder = build(tmp_path / "capture", ranks=2000, nodes=250, odd=(2, 1337)) if case == "scale" else CASES / case
    out = tmp_path / "out"
    diag = reanalyse(folder, out)
    for name in ("report.html", "graph.svg"):
        seen = open_page(out / name, FIRST_SCREEN if name == "report.html" else {}, exe=exe)
        # THEN no console error, uncaught exception, refused fetch or CSP violation, and no fetch at all
        assert seen.errors == [], (name, seen.errors)
        assert seen.requests == [(out / name).resolve().as_uri()], seen.requests
        assert seen.png.startswith(b"\x89PNG"), name
        (tmp_path / f"{name}.png").write_bytes(seen.png)
    values = seen_page = open_page(out / "report.html", FIRST_SCREEN, exe=exe).values
    # the culprit is named, in red, inside the first screen
    first = diag.proofs[0].culprit
    assert values["culprit"] == first and 0 <= values["culprit_top"] < values["viewport"], values
    assert values["scripts"] == 0 and values["images"] == 0 and values["svg_boxes"] >= 2
    assert values["details"] >= 1 and "Would prove it wrong" in values["text"]
    if case == "secrets_in_the_job":
        # a class name holding <script> is shown, as text
        assert HOSTILE in values["text"], seen_page
