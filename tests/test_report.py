"""The workload report: its numbers are the view's, its CSV reads back the same, it carries every output and stays
small, and in a real browser (Debian's chromium through Playwright) it opens with nothing fetched, runs nothing a
prompt, a token or a note smuggled in, and draws charts whose labels neither overlap nor leave their chart."""

import csv
import io
import itertools
import os
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specviz.errors import SpecvizError
from specviz.events import PLAIN, StepEvent
from specviz.render.report import report_csv, report_html, write_report
from specviz.trace import Divergence, RunModels
from specviz.workload.run import run_workload
from specviz.workload.view import Cell, Contender, WorkloadView

ROOT = Path(__file__).resolve().parent.parent
SHOTS = Path(os.environ.get("SPECVIZ_SCREENSHOTS", ROOT / "test-artifacts"))
EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
FAST, SLOW, BROKEN, ABSENT = "alpha-drafter", "beta-drafter", "delta-drafter", "gamma-drafter"
EVIL_TOKEN = 13  # its text is EVIL
WHEN = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def plain_steps(n: int, s: float = 0.02) -> list[StepEvent]:
    """Plain decoding: one token per forward, `s` seconds each (the first after a prefill)."""
    return [StepEvent(k, (), 0, 10 + k % 8, "plain", (), None, 0.0, s, s, prefill_s=0.1 * (k == 0)) for k in range(n)]


def spec_steps(n: int, accept: int, gamma: int = 3, s: float = 0.03) -> list[StepEvent]:
    """Steps that each draft `gamma` tokens and accept the first `accept`, then add the target's own, until `n`."""
    events, written = [], 0
    while written < n:
        proposed = tuple(10 + (written + j) % 8 for j in range(gamma))
        kind = "bonus" if accept == gamma else "correction"
        p = tuple(0.9 if j < accept else 0.1 for j in range(gamma))
        events.append(StepEvent(len(events), proposed, accept, 12, kind, p, None, s / 3, s / 2, s, gamma=gamma))
        written += accept + 1
    return events


def fake_side(i: int, side: str, plain_tokens):
    """Plain writes 12 tokens at 50 tok/s; FAST 3 per 0.03 s step (2×), SLOW 1 (0.67×) and parting from plain on
    prompt 0; BROKEN fails on prompt 1 with a hostile message."""
    if side == PLAIN:
        yield from plain_steps(12)
    elif side == FAST:
        yield from spec_steps(12, accept=2)
    elif side == SLOW:
        yield from spec_steps(12, accept=0)
        if plain_tokens is not None and i == 0:
            yield Divergence(4, " w4", " w5", ((" w4", 0.5), (" w5", 0.49)))
    elif side == BROKEN:
        if i == 1:
            raise SpecvizError(f"the heads refused {EVIL}")
        yield from spec_steps(12, accept=3)


def text_of(token: int) -> str:
    return EVIL if token == EVIL_TOKEN else f" w{token}"


def finished(n: int):
    """A stop once `n` runs have finished."""
    return lambda view: sum(c.done for c in view.cells.values()) >= n


def workload(greedy: bool = True, stop=None, prompts=None, note: str = "") -> WorkloadView:
    """Three prompts (one hostile) run by `fake_side`, with a drafter that is not available; `stop(view)`: whether
    to stop now."""
    contenders = [
        Contender(FAST, "draft model, chain; lossless"),
        Contender(SLOW, "a lookup; lossless"),
        Contender(BROKEN, "heads; lossless"),
        Contender(ABSENT, "an EAGLE-like head", note or f"not available: no head for {EVIL}"),
    ]
    view = WorkloadView(
        prompts=prompts or ["Write a SQL query.", f"Summarise {EVIL}", "List three\nprimes."],
        contenders=contenders,
        greedy=greedy,
        setting="γ = 3, fixed",
        max_new_tokens=12,
        text_of=text_of,
        models=RunModels(target=f"tiny {EVIL}", draft="tiny-draft", precision="float32", device="cpu"),
    )
    stopped = (lambda: False) if stop is None else (lambda: stop(view))
    for _ in run_workload(view, fake_side, stopped, clock=itertools.count(0, 0.25).__next__):
        pass
    return view


class Tables(HTMLParser):
    """The text of every cell of every table row, by the row's data-drafter (or its position)."""

    def __init__(self, css_class: str):
        super().__init__()
        self.css_class, self.inside, self.rows, self.cell = css_class, False, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.inside = self.css_class in (attrs.get("class") or "").split()
        elif self.inside and tag == "tr":
            self.rows.append((attrs.get("data-drafter"), attrs.get("class"), []))
        elif self.inside and tag in ("td", "th"):
            self.cell = []
        elif self.inside and tag == "span" and self.cell is not None:
            self.cell.append(" ")

    def handle_endtag(self, tag):
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            self.rows[-1][2].append(" ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell.append(data)


def table(html: str, css_class: str) -> list[tuple[str | None, str | None, list[str]]]:
    parser = Tables(css_class)
    parser.feed(html)
    return parser.rows


def drafter_rows(html: str) -> dict[str, tuple[str | None, list[str]]]:
    return {name: (css, cells) for name, css, cells in table(html, "rp-table") if name}


def shown(value: float | None, pattern: str = "{:.2f}") -> str:
    return "–" if value is None else pattern.format(value)


def test_the_table_shows_each_drafters_totals_as_the_view_counts_them():
    view = workload()
    rows = {r.name: r for r in view.rows()}
    # the fake runs are what they claim: 2× and 0.67× on every prompt, 2.67× on the two the broken one finished
    assert rows[FAST].speedup == pytest.approx(2.0) and rows[SLOW].speedup == pytest.approx(2 / 3)
    assert rows[BROKEN].prompts == 2 and rows[BROKEN].speedup == pytest.approx(8 / 3) and rows[ABSENT].prompts == 0
    found = drafter_rows(report_html(view, WHEN))
    assert list(found) == list(rows)
    for name, r in rows.items():
        css, cells = found[name]
        speedup, alpha, tau = shown(r.speedup, "{:.2f}×"), shown(r.alpha), shown(r.tau)
        assert cells[1:7] == [str(r.prompts), str(r.tokens), shown(r.tokens_per_s), speedup, alpha, tau]
        assert (css == "rp-best") == (name == BROKEN) and ("★ best" in cells[0]) == (name == BROKEN)
    identical = {name: cells[7] for name, (_, cells) in found.items()}
    assert identical == {
        PLAIN: "(reference)",
        FAST: "3/3 identical",
        SLOW: "2/3 identical",
        BROKEN: "2/2 identical",
        ABSENT: "–",
    }
    assert found[BROKEN][1][8] == f"failed: the heads refused {EVIL}"
    assert found[ABSENT][1][8] == f"not available: no head for {EVIL}"


def test_a_sampled_run_claims_no_identity():
    view = workload(greedy=False)
    html = report_html(view, WHEN)
    found = drafter_rows(html)
    assert [cells[7] for _, cells in found.values()] == ["(reference)"] + ["sampled \u2014 n/a"] * 4
    assert "sampled: each output is a draw" in html and "identical to plain" not in html.split("<h2>Outputs")[1]
    assert all(row["identical"] == "" for row in csv.DictReader(io.StringIO(report_csv(view))))


def test_a_stopped_run_is_marked_and_counts_only_what_finished():
    view = workload(stop=finished(5))  # prompt 1 by every side, then prompt 2's plain decoding
    html = report_html(view, WHEN)
    assert view.stopped and "\u26a0 Stopped early: 5 of 12 runs finished" in html and "Complete" not in html
    found = drafter_rows(html)
    assert [found[name][1][1] for name in (PLAIN, FAST, SLOW, BROKEN)] == ["2", "1", "1", "1"]
    matrix = table(html, "rp-matrix")
    assert matrix[2][2][1:] == ["–", "–", "–"] and matrix[3][2][1:] == ["–", "–", "–"]
    assert html.count("not run</div>") == 7  # prompt 2's three drafters, prompt 3's four sides
    assert "\u2714 Complete: 11 of 12 runs finished, 1 failed." in report_html(workload(), WHEN)
    midway = workload(stop=lambda v: len(v.cells.get((1, FAST), Cell()).events) >= 2)  # in prompt 2's 2nd run
    assert "stopped while it ran (not counted)" in report_html(midway, WHEN)
    assert drafter_rows(report_html(midway, WHEN))[FAST][1][1] == "1"
    unfinished = workload()
    unfinished.finished = False
    assert "Still running when saved" in report_html(unfinished, WHEN)


def test_the_matrix_gives_each_prompts_speedup_per_drafter():
    view = workload()
    matrix = table(report_html(view, WHEN), "rp-matrix")
    assert matrix[0][2] == ["prompt", FAST, SLOW, BROKEN]
    for i in range(3):
        cells = matrix[1 + i][2]
        assert cells[0].startswith(f"{i + 1}. ")
        for j, side in enumerate((FAST, SLOW, BROKEN), 1):
            value = view.speedup(i, side)
            assert cells[j].startswith("failed" if value is None else f"{value:.2f}×"), (i, side, cells[j])
    rows = {r.name: r for r in view.rows()}
    assert matrix[4][2] == ["all prompts counted", *(f"{rows[d].speedup:.2f}×" for d in (FAST, SLOW, BROKEN))]
    assert matrix[1][2][3].endswith("★") and not matrix[1][2][1].endswith("★")


def test_every_output_is_there_coloured_by_origin_and_folded_per_prompt():
    view = workload()
    html = report_html(view, WHEN)
    outputs = html.split("<h2>Outputs")[1]
    assert outputs.count('<details class="rp-prompt">') == 3 and outputs.count('class="rp-output"') == 12
    assert "\u2260 parts from plain at token 5" in outputs and "failed: the heads refused" in outputs
    assert "top two there: &#x27; w4&#x27; 0.500 vs &#x27; w5&#x27; 0.490" in outputs  # how near the tie was
    why = html.split("<h2>Charts")[0]  # why outputs can part, and what prevents it
    assert "a near tie can tip either way" in why and "Exact mode (on by default for a bfloat16 target" in why
    assert 'class="sv-acc"' in outputs and 'class="sv-cor"' in outputs and 'class="sv-bonus"' in outputs
    assert "fastest: delta-drafter 2.67×" in outputs and "List three primes." in outputs  # one line in the summary


def test_model_and_user_text_is_escaped_everywhere():
    from html import escape

    for view in (workload(), workload(greedy=False), workload(stop=finished(5))):
        html = report_html(view, WHEN)
        assert "<script" not in html.lower() and "<img" not in html.lower() and 'onerror="' not in html
        assert escape(f"tiny {EVIL}") in html and escape(f"Summarise {EVIL}") in html
        assert f'<span class="sv-plain">{escape(EVIL)}</span>' in html
        assert escape(f"not available: no head for {EVIL}") in html


def test_the_csv_reads_back_as_the_table():
    view = workload()
    text = report_csv(view)
    read = list(csv.DictReader(io.StringIO(text)))
    rows = view.rows()
    assert [row["drafter"] for row in read] == [r.name for r in rows] and text.count("\n") == len(rows) + 1
    for got, r in zip(read, rows):
        assert (int(got["prompts"]), int(got["tokens"])) == (r.prompts, r.tokens)
        for key, value in (
            ("tokens_per_s", r.tokens_per_s),
            ("speedup", r.speedup),
            ("alpha", r.alpha),
            ("tau", r.tau),
        ):
            assert got[key] == "" if value is None else float(got[key]) == pytest.approx(value, abs=1e-3), key
        assert got["identical"] == ("" if r.identical is None else str(r.identical))
        for i in range(len(view.prompts)):
            value = view.speedup(i, r.name)
            assert (
                got[f"speedup_prompt_{i + 1}"] == ""
                if value is None
                else float(got[f"speedup_prompt_{i + 1}"]) == (pytest.approx(value, abs=1e-3))
            )
    by_name = {row["drafter"]: row for row in read}
    assert by_name[FAST]["alpha_by_position"] == "1.0000 1.0000 0.0000" and by_name[FAST]["description"].startswith(
        "draft model"
    )
    assert by_name[BROKEN]["note"] == f"failed: the heads refused {EVIL}" and by_name[ABSENT]["speedup"] == ""


def test_the_csv_holds_no_formula_and_the_files_are_written_side_by_side(tmp_path):
    view = workload(note='=HYPERLINK("http://example.invalid","click")')
    read = {row["drafter"]: row for row in csv.DictReader(io.StringIO(report_csv(view)))}
    assert read[ABSENT]["note"] == "'" + view.contenders[3].note
    page, table_file = write_report(view, tmp_path / "my run.html")
    assert (page, table_file) == (tmp_path / "my run.html", tmp_path / "my run.csv")
    assert "\u2605 best" in page.read_text(encoding="utf-8")
    with table_file.open(encoding="utf-8-sig", newline="") as f:
        assert list(csv.DictReader(f)) == list(read.values())


def big_view(drafters: list[str], prompts: int, tokens: int) -> WorkloadView:
    """A finished view built cell by cell: drafter n accepts n % 4 of 3 drafted tokens per step."""
    view = WorkloadView(
        prompts=[f"Prompt {i}: explain how a hash map grows, with an example. " * 3 for i in range(prompts)],
        contenders=[Contender(name, f"{name}; lossless") for name in drafters],
        greedy=True,
        setting="each drafter's measured best",
        max_new_tokens=tokens,
        text_of=lambda t: f" tok{t}",
        models=RunModels(target="a-target-model", draft="a-draft-model", precision="bfloat16", device="cuda"),
        finished=True,
        wall_s=754.0,
    )
    for i in range(prompts):
        view.cells[i, PLAIN] = Cell(plain_steps(tokens), done=True)
        for n, name in enumerate(drafters):
            view.cells[i, name] = Cell(spec_steps(tokens, accept=n % 4), done=True)
    return view


def test_the_report_stays_small():
    view = big_view([f"drafter-{c}" for c in "abcdef"], prompts=10, tokens=128)
    html = report_html(view, WHEN)
    size = len(html.encode("utf-8"))
    print(f"report for 10 prompts × 6 drafters × 128 tokens: {size:,} bytes")
    assert html.count('class="rp-output"') == 70 and html.count('class="sv-acc"') > 1000
    assert size < 2_000_000


LABEL_BOXES = """() => [...document.querySelectorAll('svg')].map(svg => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {svg: box(svg), texts: [...svg.querySelectorAll('text')].map(t => [t.textContent, box(t)])};
})"""


def label_faults(charts: list[dict], slack: float = 0.5) -> list[str]:
    """Every text of a chart that leaves its svg, and every pair of texts whose boxes overlap (by more than
    `slack` px both ways)."""
    faults = []
    for chart in charts:
        left, top, right, bottom = chart["svg"]
        for words, (x0, y0, x1, y1) in chart["texts"]:
            if x0 < left - slack or y0 < top - slack or x1 > right + slack or y1 > bottom + slack:
                faults.append(f"{words!r} leaves its chart")
        for (one, a), (other, b) in itertools.combinations(chart["texts"], 2):
            if min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack:
                faults.append(f"{one!r} overlaps {other!r}")
    return faults


def open_offline(browser, path: Path):
    """The page at `path` with every request that is not for a local file refused and recorded."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    outside = []

    def route(request_route):
        if request_route.request.url.startswith("file://"):
            request_route.continue_()
        else:
            outside.append(request_route.request.url)
            request_route.abort()

    page.route("**/*", route)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, outside


def test_the_report_opens_offline_runs_nothing_and_its_labels_keep_apart(browser, tmp_path):
    view = workload(stop=finished(9))
    page, outside = open_offline(browser, write_report(view, tmp_path / "report.html")[0])
    try:
        assert outside == [] and page.evaluate("window.__pwned") is None
        assert page.locator("img, script, iframe, object, embed").count() == 0
        assert page.locator(".rp-table tbody tr").count() == len(view.rows())
        assert page.locator(".rp-table tr.rp-best").count() == 1
        assert page.locator("svg.rp-speedup rect").count() == 3 and page.locator("svg.rp-alpha polyline").count() >= 2
        assert page.locator("details.rp-prompt").nth(1).locator(".sv-echo").text_content() == f"Summarise {EVIL}"
        assert "Stopped early" in page.inner_text(".rp-mark")
        charts = page.evaluate(LABEL_BOXES)
        assert len(charts) == 2 and all(len(c["texts"]) > 5 for c in charts)
        assert label_faults(charts) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "report-1280.png"), full_page=True)
        page.evaluate("document.querySelectorAll('details.rp-prompt').forEach(d => d.open = true)")
        page.screenshot(path=str(SHOTS / "report-1280-open.png"), full_page=True)
        assert page.evaluate("window.__pwned") is None and outside == []
    finally:
        page.close()


def test_many_drafters_with_long_names_and_wide_speedups_keep_their_labels_apart(browser, tmp_path):
    names = ["a-drafter-whose-name-is-far-too-long-for-any-column", *(f"drafter-{c}" for c in "bcdefgh")]
    view = big_view(names, prompts=2, tokens=40)
    fastest = [StepEvent(k, (1,) * 9, 9, 2, "bonus", (0.9,) * 9, None, 0.0, 0.02, 0.02, gamma=9) for k in range(4)]
    view.cells[0, names[1]] = view.cells[1, names[1]] = Cell(fastest, done=True)  # 10 tokens per plain step: 10×
    view.cells[0, names[2]] = view.cells[1, names[2]] = Cell(spec_steps(40, 0, s=0.2), done=True)  # 0.05×
    page, outside = open_offline(browser, write_report(view, tmp_path / "wide.html")[0])
    try:
        charts = page.evaluate(LABEL_BOXES)
        assert outside == [] and len(charts) == 2 and label_faults(charts) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280  # wide tables scroll in place
        page.screenshot(path=str(SHOTS / "report-many-drafters.png"), full_page=True)
    finally:
        page.close()


def test_the_label_check_finds_overlaps_and_escapes(browser):
    page = browser.new_page()
    try:
        page.set_content(
            '<svg width="120" height="40"><text x="5" y="20">overlapping</text><text x="12" y="22">words</text>'
            '<text x="100" y="30">outside</text></svg>'
        )
        faults = label_faults(page.evaluate(LABEL_BOXES))
        assert "'overlapping' overlaps 'words'" in faults and "'outside' leaves its chart" in faults
    finally:
        page.close()
