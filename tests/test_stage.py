"""The stage without defects, read from element geometry in a real browser (chromium on `python app.py` with the tiny
pair) at 1280×720, 1440×900, presenter mode at 1280×720 and a phone's 390×844. After a race, a Grand Prix (its lanes
inside the window, none over another) and a γ sweep:
no chart's legend, titles, tick labels, plot area, bar labels or Gradio's label run into each other or out of the
chart; Figure 1's legend covers no row and cuts no label; every tab of the strip is shown whole (no overflow menu) and
can be clicked; the page never scrolls sideways, a wider table scrolls in its own box; the prompt, Run, Compare all and
Stop can be clicked; the two sides sit side by side, or on a phone one above the other, each about the window's width.
Every defect found is listed; screenshots go to test-artifacts/."""

import contextlib

import pytest
from geometry import Box, boxes, inside, intersects, outside, overlaps
from pages import WAIT, open_page, shot
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from specviz.drafters.registry import kinds

# The smallest common laptop screen, presenter mode on it, and a phone (a larger desktop screen has its first
# screenful and its Grand Prix measured in test_browser.py).
SIZES = {
    "1280x720": (1280, 720, ""),
    "presenter-1280x720": (1280, 720, "?presenter=1"),
    "phone-390x844": (390, 844, ""),
}
NARROW = 768  # px: below this the sides are stacked (Gradio's rows wrap their columns)

CHART_PARTS = {
    "svg": ".main-svg",
    "plot area": ".draglayer .nsewdrag",
    "legend": ".legend rect.bg",
    "title": ".infolayer .gtitle",
    "axis title": ".infolayer text[class$='title']:not(.gtitle)",
    "subplot title": ".infolayer .annotation",
    "tick labels": ".xaxislayer-above, .yaxislayer-above",
    "tick label": ".xtick text, .ytick text",
    "bar label": ".bartext",
    "block label": "[data-testid='block-label']",  # Gradio's name of the chart, laid over its top left corner
}
TITLES = ("title", "axis title", "subplot title")
CHART_CLASHES = [
    *(("legend", part) for part in (*TITLES, "tick labels", "plot area")),
    *((a, b) for i, a in enumerate(TITLES) for b in TITLES[i:]),
    *((title, part) for title in TITLES for part in ("tick labels", "plot area")),
    ("tick label", "tick label"),
    *(("block label", part) for part in (*TITLES, "legend", "tick labels", "plot area")),
]
# (the tab it is in, its chart, what the chart must show for its geometry to mean anything)
CHARTS = {
    "race": ("tokens/s", "#sv-race-chart", ("legend", "axis title")),
    "why": ("Why this speedup", "#sv-time-chart", ("legend", "axis title", "bar label")),
    "position": ("Why this speedup", "#sv-position-chart", ("legend", "axis title", "subplot title", "bar label")),
    "compare": ("Compare drafters", "#sv-compare-chart", ("axis title", "bar label")),
    "sweep": ("γ sweep", "#sv-sweep-chart", ("legend", "axis title", "subplot title")),
}
STRIP = "#sv-tabs > .tab-wrapper"
# A chart drawn at the width of its block (not still at the width it had while its tab was hidden).
FITTED_JS = """(root) => {
  const plot = document.querySelector(root + ' .js-plotly-plot'), svg = plot && plot.querySelector('.main-svg');
  return !!svg && plot.clientWidth > 0 && Math.abs(svg.getBoundingClientRect().width - plot.clientWidth) < 1;
}"""
TABLES = "#sv-metrics table, #sv-compare-table table, #sv-workload-table table"
# Each element a selector names, as the box a reader can bring it into: itself, or where an ancestor scrolls sideways
# (overflow-x auto or scroll) the box of that ancestor, which shows all of it in turn.
REACHABLE_JS = """(selector) => [...document.querySelectorAll(selector)].map((e) => {
  let shown = e;
  for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
    if (['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) { shown = a; break; }
  }
  const b = shown.getBoundingClientRect();
  return {x: b.x, y: b.y, width: b.width, height: b.height, label: (e.textContent || '').trim().slice(0, 40)};
})"""
# The centre of each element that a selector names, scrolled into view: does a click there land on it?
CLICKABLE_JS = """(selector) => [...document.querySelectorAll(selector)].map((e) => {
  e.scrollIntoView({block: 'center', inline: 'center'});
  const b = e.getBoundingClientRect();
  const hit = document.elementFromPoint(b.x + b.width / 2, b.y + b.height / 2);
  return [(e.textContent || e.id).trim().slice(0, 30), !!hit && (e === hit || e.contains(hit))];
})"""


@pytest.fixture(scope="module")
def tab_labels():
    """The tabs the layout declares, in order: what the strip must show."""
    from specviz.app.ui.layout import build_app
    from specviz.drafters.registry import kinds

    demo = build_app(object(), ["pair A"], kinds(menu_only=True), ["float32"], 64, "same")
    [tabs] = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "sv-tabs"]
    return [tab.label for tab in tabs.children]


def window(width: int) -> Box:
    """The window's width, at any height (a part below the fold is reached by scrolling down)."""
    return Box(0, -1e6, width, 2e6, "the window")


def unclickable(page, selector: str) -> list[str]:
    return [f"{selector} {label!r} cannot be clicked: something covers it" for label, hit in
            page.evaluate(CLICKABLE_JS, selector) if not hit]  # fmt: skip


def page_width_defects(page, width: int) -> list[str]:
    wide = page.evaluate("document.scrollingElement.scrollWidth")
    return [f"the page is {wide} px wide in a {width} px window"] if wide > width + 1 else []


def table_defects(page, width: int) -> list[str]:
    """A table wider than the window scrolls inside its own box; it never runs off the page's edge."""
    reach = [Box(**b) for b in page.evaluate(REACHABLE_JS, TABLES)]
    return [f"a table runs off the window: {box}" for box in reach if not inside(box, window(width))]


def race_defects(page, width: int) -> list[str]:
    """The page never scrolls sideways, and the two sides are readable: side by side, or stacked on a phone."""
    found = boxes(page, {"side": "#sv-plain, #sv-spec", "lane": ".sv-lane"})
    plain, spec = found["side"]
    problems = page_width_defects(page, width) + table_defects(page, width)
    problems += outside(found, ["side"], window(width), "the window")
    problems += [f"a side's text is cut: {lane}" for lane in found["lane"] if lane.cut()]
    if width < NARROW:
        problems += [
            f"a side is narrower than 3/4 of the window: {s}" for s in (plain, spec) if s.width < width * 3 / 4
        ]
        problems += [] if spec.y >= plain.bottom - 1 else [f"the sides are not stacked: {plain}, {spec}"]
    elif intersects(plain, spec):
        problems.append(f"the sides overlap: {plain}, {spec}")
    return problems


def open_tab(page, name: str) -> bool:
    """Open a tab of the strip by its label; False when the strip does not show it."""
    tab = page.locator(STRIP).get_by_role("tab", name=name, exact=True)
    if not tab.is_visible():
        return False
    tab.click()
    return True


def tab_defects(page, width: int, labels: list[str]) -> list[str]:
    """Every tab is in the strip, whole, clickable and inside the window; no overflow menu hides any."""
    found = boxes(page, {"strip": STRIP, "tab": f"{STRIP} [role=tab]", "overflow": f"{STRIP} .overflow-menu"})
    shown = [tab.label for tab in found["tab"]]
    problems = [] if shown == labels else [f"the strip shows {shown}, not {labels}"]
    problems += [f"an overflow menu is shown: {menu}" for menu in found["overflow"]]
    problems += outside(found, ["tab"], found["strip"][0], "the strip") + outside(
        found, ["strip"], window(width), "the window"
    )
    problems += [f"a tab's label is cut: {tab}" for tab in found["tab"] if tab.cut()]
    problems += overlaps(found, [("tab", "tab")])
    return problems + unclickable(page, f"{STRIP} [role=tab]")


def figure1_defects(page, width: int) -> list[str]:
    """Figure 1's legend, its first rows scrolled into view: the legend covers none of them and shows every label
    whole inside itself and the window."""
    if not open_tab(page, "Figure 1"):
        return ["the Figure 1 tab is not in the strip"]
    page.evaluate("document.querySelectorAll('#sv-fig1, #sv-fig1 *').forEach((e) => { e.scrollTop = 0; })")
    found = boxes(page, {"legend": ".sv-legend", "item": ".sv-legend .sv-tok", "row": "#sv-fig1 .sv-row"})
    [legend], rows = found["legend"], found["row"][:3]
    problems = [f"the legend {legend} covers row {row}" for row in rows if intersects(legend, row)]
    problems += [f"the legend's labels are wider than it: {legend}"] if legend.cut() else []
    problems += outside(found, ["item"], legend, "the legend")
    problems += outside(found, ["legend", "row"], window(width), "the window")
    return problems + [f"a legend label is cut: {item}" for item in found["item"] if item.cut()]


def chart_defects(page, width: int, chart: str) -> list[str]:
    """One chart (its tab open): each part inside the chart and the window, no two parts that must stay apart
    intersect, every bar label inside a plot area (where it would otherwise be clipped)."""
    tab, root, needed = CHARTS[chart]
    if not open_tab(page, tab):
        return [f"{chart} chart: its tab {tab!r} is not in the strip"]
    page.locator(f"{root} .cartesianlayer .trace").first.wait_for(timeout=30_000)
    page.wait_for_function(FITTED_JS, arg=root, timeout=WAIT)  # Plotly resizes a chart to its tab once it is shown
    found = boxes(page, CHART_PARTS, root)
    assert all(found[part] for part in ("svg", "plot area", "title", *needed)), (chart, found)
    problems = outside(found, [part for part in CHART_PARTS if part != "svg"], found["svg"][0], "the chart")
    problems += outside(found, ["svg"], window(width), "the window")
    problems += overlaps(found, CHART_CLASHES)
    problems += [
        f"bar label {label} is cut by the plot area"
        for label in found["bar label"]
        if not any(inside(label, area) for area in found["plot area"])
    ]
    return [f"{chart} chart: {problem}" for problem in problems]


def run_race(page) -> None:
    """A race on the tiny pair, to its end."""
    page.locator("#sv-prompt textarea").fill("w5 w5 w5 w9 w5 w5 w5")
    page.click("#sv-run")
    page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=120_000)


def run_grand_prix(page) -> list[str]:
    """A Grand Prix of every drafter on the tiny pair, to its end; its lanes inside the window and apart."""
    page.click("#sv-compare")
    page.wait_for_selector("#sv-status .sv-status-done:has-text('Grand Prix done')", timeout=180_000)
    found = boxes(page, {"lane": "#sv-gp .sv-gp-lane"})
    width = page.viewport_size["width"]
    problems = [] if len(found["lane"]) == 1 + len(kinds(menu_only=True)) else [f"lanes shown: {found['lane']}"]
    return problems + outside(found, ["lane"], window(width), "the window") + overlaps(found, [("lane", "lane")])


def sweep(page) -> bool:
    """A γ sweep on the tiny pair, to its end; False when its tab cannot be opened."""
    if not open_tab(page, "γ sweep"):
        return False
    page.click("#sv-sweep")
    page.wait_for_selector("#sv-status .sv-status-done:has-text('γ sweep')", timeout=180_000)
    return True


def workload(page) -> list[str]:
    """Two prompts of one's own through one lookup drafter, to the end; what keeps that from happening."""
    if not open_tab(page, "Your prompts"):
        return ["the Your prompts tab is not in the strip"]
    page.locator("#sv-workload-prompts textarea").fill("w5 w5 w5 w9 w5 w5\nw1 w2 w1 w2 w1")
    lookup = next(k for k in kinds(menu_only=True) if k.listing.lookup and not k.needs_draft)
    for k in kinds(menu_only=True):
        page.locator("#sv-workload-drafters").get_by_label(k.listing.label, exact=True).set_checked(k == lookup)
    blocked = unclickable(page, "#sv-workload-run")
    if blocked:
        return blocked
    page.click("#sv-workload-run")
    page.wait_for_selector("#sv-workload-progress:has-text('done;')", timeout=180_000)
    return []


@pytest.mark.budget(180, "every tab of the stage laid out and measured in a browser at one screen size")
@pytest.mark.parametrize("size", list(SIZES))
def test_nothing_on_the_stage_overlaps_or_is_cut(app_server, browser, tab_labels, size):
    width, height, query = SIZES[size]
    page = open_page(browser, app_server[0], width, height, query)
    try:
        if query or width < NARROW:  # where the page's script folds the sidebar away (a broken fold is found below)
            with contextlib.suppress(PlaywrightTimeout):
                page.wait_for_function("!document.querySelector('#sv-sidebar.open')", timeout=WAIT)
        page.wait_for_timeout(500)  # the fold's transition
        reach = [
            p for part in ("#sv-prompt textarea", "#sv-run", "#sv-compare", "#sv-stop") for p in unclickable(page, part)
        ]
        assert not reach, "\n".join(reach)
        run_race(page)
        problems = race_defects(page, width) + tab_defects(page, width, tab_labels) + figure1_defects(page, width)
        shot(page, f"stage-{size}.png")
        problems += run_grand_prix(page)
        shot(page, f"stage-{size}-grand-prix.png")
        for chart in ("race", "why", "position", "compare"):
            problems += chart_defects(page, width, chart)
        problems += chart_defects(page, width, "sweep") if sweep(page) else ["the γ sweep tab is not in the strip"]
        problems += workload(page)
        problems += page_width_defects(page, width) + table_defects(page, width)  # nor the comparison's table
        shot(page, f"stage-{size}-full.png", full=True)
    finally:
        page.close()
    assert not problems, f"{len(problems)} defects at {size}:\n" + "\n".join(problems)
