"""The Concurrency tab in a real browser on `python app.py` with the tiny pair, at 1280×720 and in presenter mode at
1920×1080: a sweep of three levels fills the charts and the table run by run, every row identical, vLLM's
configuration written out, the progress line saying when a level reads its prompts, each crossover labelled on the
chart, the verdicts and vLLM's lines no smaller than the table in presenter mode, nothing off the screen's width; Stop
ends a long sweep with what ran so far; the downloaded record replays to the same table and its snapshot opens
offline."""

import time

import pytest
from pages import WAIT, fill_kept, open_page, shot
from playwright.sync_api import expect

SIZES = {"1280x720": (1280, 720, ""), "presenter-1920x1080": (1920, 1080, "?presenter=1")}


def start_sweep(page, lanes: str, levels: str, precision: str | None = "float32") -> None:
    if precision:  # presenter mode folds the settings away: the default precision then
        page.get_by_label(precision).check()
    page.get_by_role("tab", name="Concurrency").click()
    fill_kept(page, "#sv-concurrency-lanes input, #sv-concurrency-lanes textarea", lanes)
    fill_kept(page, "#sv-concurrency-levels input, #sv-concurrency-levels textarea", levels)
    page.click("#sv-concurrency-run")


def wait_done(page, seconds: float = 180) -> list[int]:
    """Until the sweep ends: the count of table rows seen on the way."""
    rows, deadline = [], time.time() + seconds
    while not page.locator("#sv-status .sv-status-done:has-text('concurrency')").count():
        assert time.time() < deadline, page.inner_text("#sv-status")
        rows.append(page.locator("#sv-concurrency-table tbody tr").count())
        time.sleep(0.1)
    return rows


# Every count of the table's rows the page showed, and every progress line, in order, recorded by the page itself as
# they change: polling from the test can miss a short-lived one on a busy machine.
RECORD_ROWS = """() => {
  window.svRowCounts = [];
  window.svProgress = [];
  new MutationObserver(() => {
    const n = document.querySelectorAll('#sv-concurrency-table tbody tr').length, seen = window.svRowCounts;
    if (seen[seen.length - 1] !== n) { seen.push(n); }
    const line = document.querySelector('#sv-concurrency-progress .sv-progress-text'), said = window.svProgress;
    if (line && said[said.length - 1] !== line.textContent) { said.push(line.textContent); }
  }).observe(document.body, {childList: true, subtree: true, characterData: true});
}"""

# The PM's sentences and vLLM's lines (selector -> what it is), sized against the table's text.
READ_FROM_AFAR = {
    "#sv-concurrency-table .sv-crossover li": "a lane's verdict",
    "#sv-concurrency-table .sv-rounds": "the one-round warning",
    "#sv-concurrency-vllm li": "a vLLM line",
    "#sv-concurrency-vllm code": "vLLM's flag",
    "#sv-concurrency-vllm small": "a vLLM line's note",
}
FONT_PX = "e => parseFloat(getComputedStyle(e).fontSize)"
FITS = "e => e.scrollWidth <= e.clientWidth + 1 && e.getBoundingClientRect().right <= window.innerWidth + 1"


def check_the_words_read_and_fit(page, presenter: bool) -> None:
    """In presenter mode the verdicts and vLLM's lines are at least the table's size; at any size each fits the
    screen's width; the sweep of one round says that a verdict needs three."""
    table_px = page.locator("#sv-concurrency-table tbody td").first.evaluate(FONT_PX)
    for selector, what in READ_FROM_AFAR.items():
        found = page.locator(selector)
        assert found.count(), f"no {what} on the page"
        for i in range(found.count()):
            words = found.nth(i)
            if presenter:
                assert words.evaluate(FONT_PX) >= table_px, (what, words.evaluate(FONT_PX), table_px)
            assert words.evaluate(FITS), (what, words.bounding_box())
    assert "a verdict needs at least 3 rounds" in page.inner_text("#sv-concurrency-table")
    verdict = page.locator("#sv-concurrency-table .sv-crossover li").first.evaluate(FONT_PX)
    badge = page.locator("#sv-concurrency-table .sv-badge").first.evaluate(FONT_PX)
    assert verdict >= badge, (verdict, badge)  # the verdict is the headline, the badge its proof
    notes = page.locator("#sv-concurrency-vllm small")
    assert all(notes.nth(i).evaluate(FONT_PX) >= 14 for i in range(notes.count()))  # a note read, not fine print


def check_each_crossover_is_labelled(page) -> None:
    """As many labels on the throughput chart as lanes that stop paying, each inside the chart."""
    # a lane's measured verdict, before the theory's ("pays at every level run ...; theory: below plain from 4")
    verdicts = page.locator("#sv-concurrency-table .sv-crossover li").all_inner_texts()
    crossing = sum("below plain from" in words.split("; theory")[0] for words in verdicts)
    labels = page.locator("#sv-concurrency-throughput .annotation-text", has_text="stops paying")
    expect(labels).to_have_count(crossing)
    chart = page.locator("#sv-concurrency-throughput").bounding_box()
    for i in range(crossing):
        box = labels.nth(i).bounding_box()
        assert box and chart["x"] <= box["x"] and box["x"] + box["width"] <= chart["x"] + chart["width"] + 1, box


@pytest.mark.parametrize("size", list(SIZES))
def test_a_sweep_fills_the_charts_and_table_level_by_level_and_fits_the_screen(app_server, browser, size):
    width, height, query = SIZES[size]
    page = open_page(browser, app_server[0], width, height, query)
    page.evaluate(RECORD_ROWS)
    start_sweep(page, "draft@2, ngram", "1, 2, 4", None if query else "float32")
    wait_done(page)
    seen = page.evaluate("window.svRowCounts")
    assert len(set(seen)) >= 3, seen  # the table grew run by run, not all at once
    # three lanes at three levels; the status can say done a moment before the last rows are drawn
    expect(page.locator("#sv-concurrency-table tbody tr")).to_have_count(9, timeout=WAIT)
    table = page.inner_text("#sv-concurrency-table")
    assert "parted" not in table and "every row (" in table  # every greedy row equals its prompt alone
    assert "crossover" not in table or "below plain" in table or "pays at every level" in table
    assert "num_speculative_tokens_per_batch_size" in page.inner_text("#sv-concurrency-vllm")
    said = page.evaluate("window.svProgress")  # between two lanes: the next level's prompts being read, said
    assert any("· round 1/1: reading the" in line for line in said), said
    check_each_crossover_is_labelled(page)
    check_the_words_read_and_fit(page, presenter=bool(query))
    for chart in ("#sv-concurrency-throughput", "#sv-concurrency-latency"):
        assert page.locator(f"{chart} .main-svg").count() >= 1
        box = page.locator(chart).bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1  # nothing off the screen's width
    intro = page.locator("p.sv-note", has_text="Concurrent requests")  # the tab's opening sentence wraps, whole
    fits = "e => e.scrollWidth <= e.clientWidth + 1 && e.getBoundingClientRect().right <= window.innerWidth + 1"
    assert intro.evaluate(fits) and intro.bounding_box()["height"] > 30, intro.bounding_box()
    page.locator("#sv-concurrency-table").scroll_into_view_if_needed()
    shot(page, f"concurrency-{size}.png")
    page.close()


@pytest.mark.budget(120, "a sweep in a browser, stopped once its first level has run")
def test_stop_ends_a_long_sweep_with_the_levels_run_so_far(app_server, browser):
    page = open_page(browser, app_server[0], 1280, 720)
    page.get_by_label("float32").check()
    # 400 tokens: the first level's rows come in seconds, and the levels after it take far longer than a stop
    page.get_by_label("number input for Max new tokens").fill("400")
    page.get_by_label("number input for Max new tokens").press("Tab")
    start_sweep(page, "draft@2", "1, 2, 4, 8, 16, 32")
    deadline = time.time() + 120
    while page.locator("#sv-concurrency-table tbody tr").count() < 1:
        assert time.time() < deadline
        time.sleep(0.1)
    page.click("#sv-stop")
    wait_done(page, 60)
    assert "stopped" in page.inner_text("#sv-concurrency-progress")
    assert page.locator("#sv-concurrency-table tbody tr").count() < 12
    page.close()


def test_the_downloaded_sweep_replays_to_the_same_table_and_its_snapshot_opens_offline(app_server, browser, tmp_path):
    page = open_page(browser, app_server[0], 1280, 720)
    start_sweep(page, "draft@2", "1, 3")
    wait_done(page)
    table = page.inner_text("#sv-concurrency-table")
    files = {}
    page.wait_for_selector("#sv-concurrency-vllm li")  # the last update, which also sets the downloads, has landed
    for button in ("#sv-concurrency-record", "#sv-concurrency-snapshot"):
        with page.expect_download(timeout=60_000) as got:
            page.click(button)
        files[button] = tmp_path / got.value.suggested_filename
        got.value.save_as(files[button])
    page.reload()
    page.wait_for_selector("#sv-run")
    page.get_by_role("tab", name="Concurrency").click()
    page.locator("#sv-concurrency-upload input[type=file]").set_input_files(str(files["#sv-concurrency-record"]))
    page.click("#sv-concurrency-replay")
    deadline = time.time() + 60
    while page.locator("#sv-status .sv-status-done:has-text('concurrency')").count() == 0:
        assert time.time() < deadline
        time.sleep(0.1)
    assert page.inner_text("#sv-concurrency-table") == table
    # the fields read what the replayed sweep ran, not the defaults the reload left
    fields = {"#sv-concurrency-lanes": "draft@2", "#sv-concurrency-levels": "1, 3"}
    for field, value in fields.items():
        expect(page.locator(f"{field} input, {field} textarea")).to_have_value(value)
    page.close()
    offline = browser.new_context(offline=True)
    opened = offline.new_page()
    opened.goto(files["#sv-concurrency-snapshot"].as_uri())
    assert opened.locator("script, script[src], link[href^=http], img[src^=http]").count() == 0
    assert opened.locator("svg").count() == 2 and "draft@2" in opened.inner_text("table")
    offline.close()
