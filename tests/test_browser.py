"""A real browser (Debian's chromium through Playwright) on `python app.py` with the tiny pair: the race fits the first
screenful at 1440×900 and 1280×720, a rejected step is explained with p, q and the residual, a Grand Prix of eight
lanes fits 1280×720, 1440×900, presenter mode at 1920×1080 and a phone with no Gradio timer over it, leaves its table
and replays at real pace, a downloaded trace replays to the same screen, its snapshot opens offline, presenter mode and
the keyboard work, and a queued Grand Prix says its place in line. Markup in the prompt stays text throughout.
Screenshots go to test-artifacts/."""

import json
import threading

import pytest
from gradio_client import Client
from pages import WAIT, fill_kept, open_page, shot

from specviz.drafters.registry import kinds

EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
RACE_PARTS = ("#sv-plain", "#sv-spec", "#sv-metrics", "#sv-badge")


def race(page, prompt="w1 w2 w3", temperature=None, done="#sv-badge .sv-badge-ok", chain=False):
    """A race in float32 at a fixed γ (adaptive drafting would rightly choose plain steps for a tiny target, whose
    forward costs about what a draft's does); `chain`: the draft model drafts the textbook sampled chain (its q and the
    residual on screen) instead of its default tree."""
    page.locator("#sv-prompt textarea").fill(prompt)
    page.get_by_label("float32").check()
    page.locator("#sv-adaptive input").uncheck()
    if chain:
        page.get_by_text("draft model: options").click()
        page.locator("#sv-opt-draft-tree").get_by_label("chain").check()
    if temperature is not None:
        page.get_by_label("number input for Temperature").fill(str(temperature))
        page.get_by_label("number input for Temperature").press("Tab")
    page.click("#sv-run")
    page.wait_for_selector(done, timeout=120_000)


@pytest.mark.parametrize("width, height", [(1440, 900), (1280, 720)])
def test_the_race_fits_the_first_screenful(app_server, browser, width, height):
    page = open_page(browser, app_server[0], width, height)
    try:
        race(page, f"w1 w2 w3 {EVIL}")
        assert page.evaluate("window.scrollY") == 0
        for part in RACE_PARTS:  # no scrolling needed to see the race and its verdict
            box = page.locator(part).bounding_box()
            assert box and box["x"] >= 0 and box["y"] >= 0, part
            assert box["x"] + box["width"] <= width and box["y"] + box["height"] <= height, (part, box)
        assert "identical to plain decoding" in page.inner_text("#sv-badge")
        assert "speedup" in page.inner_text("#sv-metrics")
        shot(page, f"race-{width}x{height}.png")
        assert EVIL in page.inner_text("#sv-echo")  # shown as text...
        assert page.evaluate("window.__pwned") is None  # ...and never run
        assert page.locator("#sv-echo img, #sv-echo script, #sv-plain img, #sv-spec script").count() == 0

        rows = page.locator("#sv-fig1 .sv-row")
        assert rows.count() > 3 and page.locator("#sv-fig1 .sv-acc").count() > 0
        struck = page.locator("#sv-fig1 del.sv-rej").first.evaluate("e => getComputedStyle(e).textDecorationLine")
        assert "line-through" in struck
        green = page.locator("#sv-fig1 .sv-acc").first.evaluate("e => getComputedStyle(e).borderTopColor")
        assert green == "rgb(0, 158, 115)"
        page.get_by_role("tab", name="tokens/s").click()
        page.wait_for_selector("#sv-race-chart .js-plotly-plot .legendtext", timeout=30_000)
        assert page.locator("#sv-race-chart .legendtext").all_text_contents() == ["plain", "speculative"]

        # why this speedup: the diagnosis line, where each side's time went, acceptance by draft position
        page.get_by_role("tab", name="Why this speedup").click()
        page.locator("#sv-diagnosis", has_text="predicted").wait_for(timeout=30_000)
        assert "measured" in page.inner_text("#sv-diagnosis")
        page.wait_for_selector("#sv-position-chart .js-plotly-plot .legendtext", timeout=30_000)
        assert any("i.i.d. theory" in t for t in page.locator("#sv-position-chart .legendtext").all_text_contents())
        parts = page.locator("#sv-time-chart .legendtext").all_text_contents()
        assert sorted(parts) == ["draft", "overhead", "prefill", "verify"]
        shot(page, f"why-{width}x{height}.png")
        # the chosen drafter's options fold out below the menu; the others' stay out of the way
        assert not page.get_by_text("n-gram prompt lookup: options").is_visible()
        page.locator("#sv-drafter input").click()
        page.get_by_role("option", name="n-gram prompt lookup").click()
        page.get_by_text("n-gram prompt lookup: options").wait_for(state="visible", timeout=WAIT)
        assert not page.get_by_text("Medusa heads (tree): options").is_visible()
        # and a line under the menu says how the chosen drafter drafts (history lookup: where it pays)
        page.locator("#sv-drafter input").click()
        page.get_by_role("option", name="history lookup (tree)").click()
        page.locator("#sv-drafter-note", has_text="repeats itself").wait_for(timeout=WAIT)
    finally:
        page.close()


# At 1280×720: the Grand Prix button's words on one line, the default pair's whole name in the pair menu (its width in
# the menu's own font, measured, against the room the menu leaves beside its arrow), the example prompt whole in its
# box. The test app serves the tiny pair, so the offline pair's name is measured, not chosen.
CONTROLS_JS = """(name) => {
  const button = document.querySelector('#sv-compare');
  const lines = (e) => {
    const range = document.createRange();
    range.selectNodeContents(e);
    return new Set([...range.getClientRects()].map((b) => Math.round(b.top))).size;
  };
  const menu = document.querySelector('#sv-pair input'), style = getComputedStyle(menu);
  const pen = document.createElement('canvas').getContext('2d');
  pen.font = style.font;
  const room = menu.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const prompt = document.querySelector('#sv-prompt textarea');
  return {button_lines: lines(button), name_px: pen.measureText(name).width, room_px: room,
          prompt: [prompt.scrollHeight, prompt.clientHeight]};
}"""


def test_the_first_screenfuls_controls_show_their_whole_words_at_1280x720(app_server, browser):
    from specviz.app.shelf import OFFLINE_QWEN

    page = open_page(browser, app_server[0], 1280, 720)
    try:
        page.wait_for_timeout(500)  # the prompt box sizes itself to its text once drawn
        seen = page.evaluate(CONTROLS_JS, OFFLINE_QWEN.label)
        assert seen["button_lines"] == 1, seen
        assert seen["name_px"] <= seen["room_px"], seen
        assert seen["prompt"][0] <= seen["prompt"][1] + 1, seen
    finally:
        page.close()


@pytest.mark.parametrize("width, height", [(1280, 720), (1440, 900)])
def test_each_drafters_note_is_read_whole_in_the_sidebar(app_server, browser, width, height):
    """The line under the drafter menu says how the chosen drafter drafts: every drafter's line wraps inside the
    sidebar, none is cut at its edge, and nothing in the sidebar is scrolled sideways to show it."""
    page = open_page(browser, app_server[0], width, height)
    try:
        cut = []
        for kind in kinds(menu_only=True):
            page.locator("#sv-drafter input").click()
            page.get_by_role("option", name=kind.listing.label, exact=True).click()
            note = page.locator("#sv-drafter-note")
            note.get_by_text(kind.listing.summary[1:20]).wait_for(timeout=WAIT)
            wide = note.evaluate("n => [n.scrollWidth, n.clientWidth]")
            sidebar = page.locator("#sv-sidebar").evaluate(
                "s => [s, ...s.querySelectorAll('*')].some(e => e.scrollLeft > 0)"
            )
            if wide[0] > wide[1] + 1 or sidebar:
                cut.append(f"{kind.name}: note {wide[0]} px in {wide[1]}, sidebar scrolls sideways: {sidebar}")
        shot(page, f"drafter-note-{width}x{height}.png")
        assert not cut, cut
    finally:
        page.close()


def test_an_example_sets_the_drafter_and_gamma_measured_best_for_its_kind(app_server, browser):
    from specviz.app.ui.examples import EXAMPLE_KINDS
    from specviz.paths import ASSETS

    example = next(e for e in EXAMPLE_KINDS if e.key == "summarization")
    prompt = json.loads((ASSETS / "prompts.json").read_text())["summarization"][0]
    page = open_page(browser, app_server[0])
    try:
        page.locator("#sv-examples").get_by_text("Example prompts").click()
        page.get_by_text(example.title()).wait_for(timeout=WAIT)
        page.locator("#sv-examples").get_by_text(prompt[:40]).first.click()
        page.wait_for_function("document.querySelector('#sv-prompt textarea').value.length > 1000", timeout=WAIT)
        assert page.locator("#sv-prompt textarea").input_value() == prompt
        assert page.locator("#sv-drafter input").input_value() == "suffix decoding (across runs)"
        assert page.get_by_label("number input for γ (draft length)").input_value() == str(example.gamma)
        assert page.locator("#sv-adaptive input").is_checked() == example.adaptive
        page.get_by_text("suffix decoding (across runs): options").wait_for(state="visible", timeout=WAIT)
    finally:
        page.close()


def test_a_rejected_step_is_explained_with_p_q_and_the_residual(app_server, browser):
    page = open_page(browser, app_server[0])
    try:
        race(page, temperature=1, done="#sv-badge .sv-badge-info", chain=True)
        rejected = page.locator("#sv-fig1 .sv-row", has=page.locator("del.sv-rej")).first
        step = int(rejected.get_attribute("data-step")) + 1
        rejected.click()  # a click on a Figure-1 row opens its explanation
        explain = page.locator("#sv-explain")
        explain.get_by_text(f"Step {step}").wait_for(timeout=WAIT)
        for part in (".sv-bar-p", ".sv-bar-q", ".sv-bar-r"):
            assert explain.locator(part).count() > 0, part
        text = explain.inner_text()
        assert "min(1, p/q)" in text and "norm(max(0, p − q))" in text and "rejected" in text and "u = " in text
        shot(page, "explain.png", full=True)
        page.locator("body").click(position={"x": 5, "y": 5})
        page.keyboard.press("ArrowRight")  # the keyboard steps through Figure 1
        explain.get_by_text(f"Step {step + 1}").wait_for(timeout=WAIT)
        page.keyboard.press("ArrowLeft")
        explain.get_by_text(f"Step {step}").wait_for(timeout=WAIT)
    finally:
        page.close()


def test_a_tree_step_is_drawn_as_a_tree_that_fits_the_explanation(app_server, browser):
    page = open_page(browser, app_server[0], 1280, 720)
    try:
        race(page)  # the draft model drafts its default tree
        tree_row = page.locator("#sv-fig1 .sv-row", has=page.locator("details.sv-alts")).first
        tree_row.locator(".sv-step").click()
        explain = page.locator("#sv-explain")
        drawing = explain.locator("svg.sv-tree-svg")
        drawing.wait_for(timeout=WAIT)
        assert drawing.locator("g[data-state='root']").count() == 1
        assert drawing.locator("g[data-state='accepted'], g[data-state='rejected']").count() > 0
        box, svg = explain.locator(".sv-tree-box").bounding_box(), drawing.bounding_box()
        assert svg["width"] <= box["width"] and box["x"] + box["width"] <= 1280  # drawn whole, no sideways scroll
        drawing.scroll_into_view_if_needed()
        shot(page, "explain-tree-1280x720.png")
    finally:
        page.close()


@pytest.mark.parametrize("width, height", [(1440, 900), (1280, 720)])
def test_a_sampled_step_is_replayed_and_a_broken_rule_fails_on_screen(app_server, browser, width, height):
    from specviz.analysis.rule_replay import CHAIN_RULES

    page = open_page(browser, app_server[0], width, height)
    try:
        race(page, temperature=1, done="#sv-badge .sv-badge-info", chain=True)
        page.locator("#sv-fig1 .sv-row", has=page.locator("del.sv-rej")).first.click()
        page.locator("#sv-replay-rule input:not([disabled])").wait_for(timeout=WAIT)
        page.click("#sv-replay-step")
        verdict = page.locator("#sv-replay-verdict")
        verdict.get_by_text("follow the target's p").wait_for(timeout=WAIT)
        assert "10,000 replays" in verdict.inner_text()
        page.wait_for_selector("#sv-replay-chart .js-plotly-plot .legendtext", timeout=30_000)
        legend = page.locator("#sv-replay-chart .legendtext").all_text_contents()
        assert legend == ["emitted in 10,000 replays", "target's p", "drafter's q"]
        broken = list(CHAIN_RULES)[1]
        page.locator("#sv-replay-rule input").click()
        page.get_by_role("option", name=broken).click()
        page.click("#sv-replay-step")
        verdict.get_by_text("do not follow the target's p").wait_for(timeout=WAIT)
        page.locator("#sv-replay-chart").scroll_into_view_if_needed()
        box = page.locator("#sv-replay-chart").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        shot(page, f"replay-{width}x{height}.png")
    finally:
        page.close()


# Gradio's own progress: its queue timers ("queue: 1/1 | 15.0s"), bars and ETA. The app's status line tells every wait.
GRADIO_PROGRESS = ".meta-text, .meta-text-center, .progress-text, .eta-bar, .progress-bar, .progress-level"
# What a viewer sees of them: an element with a box, not hidden by itself or by any ancestor's opacity or visibility
# (Gradio keeps a hidden event's tracker in the page at opacity 0).
VISIBLE_PROGRESS_JS = f"""() => [...document.querySelectorAll('{GRADIO_PROGRESS}')].filter((e) => {{
  const b = e.getBoundingClientRect();
  return b.width > 0 && b.height > 0 && e.checkVisibility({{opacityProperty: true, visibilityProperty: true}});
}}).map((e) => e.className + ': ' + (e.textContent || '').trim().slice(0, 40))"""
GP_SIZES = {
    "1280x720": (1280, 720, ""),
    "1440x900": (1440, 900, ""),
    "presenter-1920x1080": (1920, 1080, "?presenter=1"),
    "phone-390x844": (390, 844, ""),
}
EIGHT_LANES = "draft@2, draft@4, hybrid, ngram, history, suffix, medusa"  # and plain decoding: eight lanes


def grand_prix(page, lanes: str, prompt: str = "w5 w5 w5 w9 w5 w5 w5") -> list[str]:
    """A Grand Prix of `lanes` (by name) run to its end from the page; Gradio's progress elements seen on the way."""
    page.get_by_role("tab", name="Compare drafters").click()
    fill_kept(page, "#sv-gp-lanes textarea, #sv-gp-lanes input", lanes)
    page.evaluate("window.scrollTo(0, 0)")
    page.locator("#sv-prompt textarea").fill(prompt)
    page.click("#sv-compare")
    seen = []
    for _ in range(3000):  # every 50 ms, for at most about 150 s
        seen += page.evaluate(VISIBLE_PROGRESS_JS)
        if page.locator("#sv-status .sv-status-done:has-text('Grand Prix')").count():
            return seen
        page.wait_for_timeout(50)
    raise AssertionError("the Grand Prix did not finish")


@pytest.mark.parametrize("size", list(GP_SIZES))
def test_a_grand_prix_of_eight_lanes_fits_the_screen_and_no_gradio_timer_covers_it(app_server, browser, size):
    from geometry import Box, boxes, inside, intersects

    width, height, query = GP_SIZES[size]
    page = open_page(browser, app_server[0], width, height, query)
    try:
        if query or width < 768:  # the page's script folds the sidebar away there
            page.wait_for_function("!document.querySelector('#sv-sidebar.open')", timeout=WAIT)
        seen = grand_prix(page, EIGHT_LANES)
        assert not seen, f"Gradio's progress showed during the race: {sorted(set(seen))[:5]}"
        lanes = boxes(page, {"lane": "#sv-gp .sv-gp-lane"})["lane"]
        assert len(lanes) == 8, lanes
        window = Box(0, 0, width, 1e6)
        assert all(inside(lane, window) for lane in lanes), [str(lane) for lane in lanes]
        assert not [(a, b) for i, a in enumerate(lanes) for b in lanes[i + 1 :] if intersects(a, b)]
        if width >= 768:  # lanes are rows, one under the other, as wide as the race
            assert all(lane.width > width / 2 for lane in lanes)
        else:  # on a phone each lane's parts stack inside a lane the window's width
            assert all(lane.width > width * 3 / 4 for lane in lanes)
        if size == "1280x720":  # the prompt, the buttons and all eight lanes: the first screenful
            assert page.evaluate("window.scrollY") == 0
            assert max(lane.bottom for lane in lanes) <= height, [str(lane) for lane in lanes]
            for part in ("#sv-prompt", "#sv-run", "#sv-compare", "#sv-stop"):
                assert page.locator(part).bounding_box()["y"] >= 0
        if query:  # presenter mode: lane text a projector can show
            sizes = page.locator("#sv-gp .sv-gp-text .sv-text").evaluate_all(
                "texts => texts.map((t) => parseFloat(getComputedStyle(t).fontSize))"
            )
            assert sizes and min(sizes) >= 20, sizes
        same = page.locator("#sv-gp .sv-gp-same").all_inner_texts()
        assert len(same) == 7 and all("= plain" in s for s in same), same  # greedy: each lane is plain's tokens
        assert page.locator("#sv-gp .sv-gp-place").all_inner_texts().count("1st") == 1
        assert not page.locator("#sv-plain").is_visible()  # the lanes take the duel's place
        shot(page, f"grand-prix-{size}.png")
    finally:
        page.close()


def test_the_grand_prix_leaves_its_table_chart_and_texts_and_replays_at_real_pace(app_server, browser):
    page = open_page(browser, app_server[0])
    try:
        page.get_by_label("float32").check()
        seen = grand_prix(page, "")  # every drafter, each at its best
        assert not seen, seen
        page.get_by_role("tab", name="Compare drafters").click()
        rows = page.locator("#sv-compare-table tbody tr")
        names = [rows.nth(i).locator("td").nth(1).inner_text() for i in range(rows.count())]
        assert names == ["plain", *(k.name for k in kinds(menu_only=True))]
        for i in range(rows.count()):  # every drafter ran: a speed, a place and the identity verdict in each row
            cells = rows.nth(i).locator("td").all_inner_texts()
            assert cells[2] != "–" and cells[0] and "yes" in cells[8], cells
            assert i == 0 or rows.nth(i).locator("svg.sv-spark").count() == 1, cells  # α by position, on one line
        heights = rows.evaluate_all("rows => rows.map((r) => r.getBoundingClientRect().height)")
        assert max(heights) < 60, heights  # one line per row
        table = page.locator("#sv-compare-table table").bounding_box()
        assert table["x"] + table["width"] <= 1440  # no column cut at the right edge
        assert page.locator("#sv-compare-chart .js-plotly-plot").count() == 1
        shot(page, "compare.png", full=True)
        page.get_by_label("4×").last.check()
        page.click("#sv-gp-replay")
        page.wait_for_selector("#sv-gp .sv-gp-pace:has-text('own clock')", timeout=30_000)
        page.wait_for_selector("#sv-status .sv-status-done:has-text('Grand Prix done')", timeout=60_000)
        assert page.locator("#sv-gp .sv-gp-lane").count() == 1 + len(kinds(menu_only=True))
        page.click("#sv-run")  # a race empties the lanes: the two sides are back
        page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=120_000)
        assert page.locator("#sv-gp .sv-gp-lane").count() == 0 and page.locator("#sv-plain").is_visible()
    finally:
        page.close()


def test_a_downloaded_trace_replays_to_the_same_screen_and_its_snapshot_opens_offline(app_server, browser, tmp_path):
    page = open_page(browser, app_server[0])
    try:
        race(page, f"w1 w2 w3 {EVIL}")
        lanes = {part: page.inner_text(part) for part in ("#sv-plain", "#sv-spec", "#sv-badge", "#sv-production")}
        production = page.inner_text("#sv-production")  # the drafter in other engines, the prompt as text
        assert all(engine in production for engine in ("transformers", "vLLM", "SGLang")), production
        assert "assistant_model=assistant" in production and "draft_model" in production and "STANDALONE" in production
        assert page.locator("#sv-production img, #sv-production script").count() == 0
        # each block of code keeps its lines whole (scrolling sideways), and its button copies the block's text
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        code = page.locator("#sv-production .sv-prod-code").first
        assert code.evaluate("e => getComputedStyle(e).whiteSpace") == "pre"
        page.locator("#sv-production .sv-prod-copy").first.click()
        page.wait_for_selector("#sv-production .sv-prod-copy:has-text('copied')")
        assert page.evaluate("navigator.clipboard.readText()") == code.evaluate("e => e.textContent")
        page.get_by_role("tab", name="Recorded runs").click()
        files = {}
        for button in ("#sv-download", "#sv-snapshot"):
            with page.expect_download() as got:
                page.click(button)
            files[button] = tmp_path / got.value.suggested_filename
            got.value.save_as(files[button])
    finally:
        page.close()
    page = open_page(browser, app_server[0])  # a fresh visitor, nothing run
    try:
        page.get_by_role("tab", name="Recorded runs").click()
        page.locator("#sv-upload input[type=file]").set_input_files(str(files["#sv-download"]))
        page.wait_for_selector("#sv-upload :text('.json')", timeout=30_000)
        page.get_by_label("4×").check()
        page.click("#sv-replay")
        page.wait_for_selector("#sv-status .sv-status-done:has-text('recorded')", timeout=60_000)
        for part, text in lanes.items():
            assert page.inner_text(part) == text, part
        assert page.evaluate("window.__pwned") is None
        shot(page, "replay.png")
    finally:
        page.close()
    offline = browser.new_context(offline=True)
    try:
        snap = offline.new_page()
        snap.goto(files["#sv-snapshot"].as_uri())
        assert EVIL in snap.inner_text(".sv-echo") and snap.evaluate("window.__pwned") is None
        assert snap.locator("script, img").count() == 0 and snap.locator("svg polyline").count() == 2
        assert "identical to plain decoding" in snap.inner_text(".sv-badge")
        assert "num_speculative_tokens" in snap.inner_text(".sv-production")  # take it to production, offline too
        shot(snap, "snapshot.png", full=True)
    finally:
        offline.close()


def test_presenter_mode_from_the_url_and_ctrl_enter_runs(app_server, browser):
    page = open_page(browser, app_server[0], 1280, 720, "?presenter=1")
    try:
        page.wait_for_function("document.body.classList.contains('sv-presenter')", timeout=WAIT)
        assert "open" not in page.locator("#sv-sidebar").get_attribute("class")  # the settings fold away
        page.locator("#sv-prompt textarea").fill("w1 w2 w3")
        page.locator("#sv-prompt textarea").press("Control+Enter")
        page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=120_000)
        box = page.locator("#sv-badge").bounding_box()
        assert box["y"] + box["height"] <= 720
        shot(page, "presenter-1280x720.png")
        page.locator("#sv-presenter input").uncheck()
        page.wait_for_function("!document.body.classList.contains('sv-presenter')", timeout=WAIT)
        assert "presenter" not in page.url
    finally:
        page.close()


# What presenter mode enlarges, and how much at least: read from the back of a hall, the race's words a quarter larger.
PRESENTED = {
    "race text": ("#sv-spec .sv-text", 1.25),
    "metrics": ("#sv-metrics .sv-metrics", 1.25),
    "badge": ("#sv-badge .sv-badge", 1.25),
    "Figure 1": ("#sv-fig1 .sv-fig1", 1.2),
}
SIZES_JS = """(parts) => Object.fromEntries(Object.entries(parts).map(([name, sel]) => {
  const e = document.querySelector(sel);
  return [name, e ? parseFloat(getComputedStyle(e).fontSize) : null];
}))"""


def test_presenter_mode_enlarges_the_race_its_metrics_badge_and_figure_1(app_server, browser):
    """The same page, one race, its sizes read with presenter mode off and then on at 1920×1080: every part named in
    PRESENTED grows by at least its factor (Gradio's scoped copy of a normal rule must not outrank a presenter one)."""
    page = open_page(browser, app_server[0], 1920, 1080)
    try:
        race(page, "w1 w2 w3")
        selectors = {name: sel for name, (sel, _) in PRESENTED.items()}
        normal = page.evaluate(SIZES_JS, selectors)
        assert all(normal.values()), normal
        page.locator("#sv-presenter input").check()
        page.wait_for_function("document.body.classList.contains('sv-presenter')", timeout=WAIT)
        presented = page.evaluate(SIZES_JS, selectors)
        small = {n: (normal[n], presented[n]) for n, (_, k) in PRESENTED.items() if presented[n] < k * normal[n]}
        assert not small, f"not enlarged (normal px, presenter px): {small}"
        shot(page, "presenter-1920x1080.png")
    finally:
        page.close()


def test_a_run_queued_behind_another_visitors_says_what_it_waits_for(app_server, browser):
    url, pair = app_server
    other = Client(url, verbose=False)
    job = other.submit(
        pair,
        "draft",
        "float32",
        "w1 w2 w3",
        3,
        4000,
        0,
        0,
        1,
        0,
        3,
        4,
        "recent",
        "sparse",
        "lossless",
        False,
        api_name="/run",
    )
    started = threading.Event()
    while not job.done() and len(job.outputs()) < 2:
        started.wait(0.05)
    page = open_page(browser, url)
    try:
        page.locator("#sv-prompt textarea").fill("w1 w2 w3")
        page.click("#sv-compare")  # a Grand Prix waits behind the other visitor's race
        page.wait_for_selector("#sv-status:has-text('queued: 1st in line')", timeout=WAIT)
        assert "another visitor's race has the device" in page.inner_text("#sv-status")
        page.wait_for_timeout(2500)  # the line is told again every second: never by Gradio's own timers
        assert not page.evaluate(VISIBLE_PROGRESS_JS) and "queued" in page.inner_text("#sv-status")
        other.predict(api_name="/stop")  # the other visitor stops; ours gets the device
        page.wait_for_selector("#sv-status .sv-status-done:has-text('Grand Prix')", timeout=120_000)
    finally:
        page.close()
        job.result(timeout=60)
