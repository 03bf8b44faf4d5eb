"""Traffic on the Concurrency tab in a real browser on `python app.py` with the tiny pair, at 1280×720 and in presenter
mode at 1920×1080: requests at two rates for plain and two lanes fill the verdict, three charts and the table (every
request identical to its prompt alone, the simulator's figure and its error beside each measured one), then vLLM's
lines; the verdict no smaller than the table in presenter mode, nothing off the screen's width; the downloaded record
replays to the same table and its snapshot opens offline; the /traffic endpoint answers a client."""

import time

import pytest
from pages import fill_kept, open_page, shot
from playwright.sync_api import expect
from test_traffic_app import call_traffic

SIZES = {"1280x720": (1280, 720, ""), "presenter-1920x1080": (1920, 1080, "?presenter=1")}
FONT_PX = "e => parseFloat(getComputedStyle(e).fontSize)"
FITS = "e => e.scrollWidth <= e.clientWidth + 1 && e.getBoundingClientRect().right <= window.innerWidth + 1"


def start_traffic(page, lanes: str, rates: str, requests: int, precision: str | None = "float32") -> None:
    if precision:  # presenter mode folds the settings away: the default precision then
        page.get_by_label(precision).check()
    page.get_by_role("tab", name="Concurrency").click()
    fill_kept(page, "#sv-concurrency-lanes input, #sv-concurrency-lanes textarea", lanes)
    fill_kept(page, "#sv-traffic-rates input, #sv-traffic-rates textarea", rates)
    fill_kept(page, "#sv-traffic-requests input", str(requests))
    fill_kept(page, "#sv-traffic-rows input", "3")
    page.locator("#sv-traffic-run").scroll_into_view_if_needed()
    page.click("#sv-traffic-run")


def wait_done(page, seconds: float = 240) -> None:
    deadline = time.time() + seconds
    while not page.locator("#sv-status .sv-status-done:has-text('traffic')").count():
        assert time.time() < deadline, page.inner_text("#sv-status")
        time.sleep(0.1)


# Traffic's words in presenter mode: the drawn size of a chart's text (its font scaled as the SVG is drawn), and the
# size a concurrency sweep's table takes there, read off a probe table of the sweep's classes put in the same place.
TRAFFIC_PARTS = {
    "verdict": "#sv-traffic-verdict li",
    "table": "#sv-traffic-table td",
    "caption": "#sv-traffic-charts figcaption",
}
SIZES_JS = """(parts) => {
  const px = (e) => parseFloat(getComputedStyle(e).fontSize);
  const sizes = Object.fromEntries(Object.entries(parts).map(([name, sel]) => [name, px(document.querySelector(sel))]));
  const svgs = [...document.querySelectorAll('#sv-traffic-charts svg')];
  const drawn = (s) => px(s.querySelector('text')) * s.getBoundingClientRect().width / s.viewBox.baseVal.width;
  sizes.chart = Math.min(...svgs.map(drawn));
  const probe = document.createElement('table');
  probe.className = 'sv-metrics sv-concurrency';
  probe.innerHTML = '<tbody><tr><td>1</td></tr></tbody>';
  document.querySelector('#sv-traffic-table').appendChild(probe);
  sizes.sweep_table = px(probe.querySelector('td'));
  probe.remove();
  return sizes;
}"""


def check_presenter_enlarges_traffic(page) -> None:
    """In presenter mode the chart text as drawn and the table are no smaller than a sweep's table there, the
    table fills the width, and every part is larger than with presenter mode off (read again on the same page)."""
    presented = page.evaluate(SIZES_JS, TRAFFIC_PARTS)
    assert presented["chart"] >= presented["sweep_table"] and presented["table"] >= presented["sweep_table"], presented
    table, column = (page.locator(s).bounding_box() for s in ("#sv-traffic-table table", "#sv-traffic-table"))
    assert table["width"] >= 0.95 * column["width"], (table, column)
    page.locator("#sv-presenter input").uncheck()
    page.wait_for_function("!document.body.classList.contains('sv-presenter')")
    normal = page.evaluate(SIZES_JS, TRAFFIC_PARTS)
    assert all(presented[k] > normal[k] for k in (*TRAFFIC_PARTS, "chart")), (presented, normal)


def table_rows(page) -> list[list[str]]:
    return page.locator("#sv-traffic-table tr").evaluate_all(
        "rows => rows.slice(1).map(r => [...r.querySelectorAll('td')].map(c => c.innerText))"
    )


@pytest.mark.parametrize("size", list(SIZES))
def test_traffic_fills_the_verdict_charts_and_table_and_fits_the_screen(app_server, browser, size):
    width, height, query = SIZES[size]
    page = open_page(browser, app_server[0], width, height, query)
    start_traffic(page, "draft@2, ngram", "10, 20", 5, None if query else "float32")
    wait_done(page)
    expect(page.locator("#sv-traffic-vllm li").first).to_be_visible()  # the last update has landed
    rows = table_rows(page)
    lanes = ("plain", "draft@2", "ngram")
    assert [(r[0], r[1]) for r in rows] == [(lane, rate) for lane in lanes for rate in ("10", "20")]
    for r in rows:
        assert r[8] == "yes", r  # every greedy request wrote what its prompt writes alone
        assert "%" in r[9], r  # each rate predicted from the other, its error beside it
    assert page.locator("#sv-traffic-charts svg").count() == 3
    verdict = page.locator("#sv-traffic-verdict li")
    expect(verdict).to_have_count(3)
    assert all(w in page.inner_text("#sv-traffic-verdict") for w in ("SLO", "req/s", "one round"))
    assert "turn speculation off" in page.inner_text("#sv-traffic-vllm") or "paid at every rate run" in (
        page.inner_text("#sv-traffic-vllm")
    )
    table_px = page.locator("#sv-traffic-table td").first.evaluate(FONT_PX)
    for i in range(verdict.count()):
        if query:  # read from the back of the room: no smaller than the table
            assert verdict.nth(i).evaluate(FONT_PX) >= table_px
        assert verdict.nth(i).evaluate(FITS), verdict.nth(i).bounding_box()
    for part in ("#sv-traffic-charts svg", "#sv-traffic-table .sv-traffic-scroll"):
        for i in range(page.locator(part).count()):
            box = page.locator(part).nth(i).bounding_box()
            assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (part, box)
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1  # nothing off the screen's width
    page.locator("#sv-traffic-charts").scroll_into_view_if_needed()
    shot(page, f"traffic-{size}.png")
    if query:
        check_presenter_enlarges_traffic(page)
    page.close()


def test_the_downloaded_traffic_replays_to_the_same_table_and_its_snapshot_opens_offline(app_server, browser, tmp_path):
    page = open_page(browser, app_server[0], 1280, 720)
    start_traffic(page, "draft@2", "20", 4)
    wait_done(page)
    page.wait_for_selector("#sv-traffic-vllm li")  # the last update, which also sets the downloads, has landed
    table = page.inner_text("#sv-traffic-table")
    files = {}
    for button in ("#sv-traffic-record", "#sv-traffic-snapshot"):
        with page.expect_download(timeout=60_000) as got:
            page.click(button)
        files[button] = tmp_path / got.value.suggested_filename
        got.value.save_as(files[button])
    page.reload()
    page.wait_for_selector("#sv-run")
    page.get_by_role("tab", name="Concurrency").click()
    page.locator("#sv-traffic-upload input[type=file]").set_input_files(str(files["#sv-traffic-record"]))
    page.locator("#sv-traffic-speed").get_by_label("at once").check()
    page.click("#sv-traffic-replay")
    expect(page.locator("#sv-status .sv-status-done", has_text="traffic")).to_have_count(1, timeout=60_000)
    assert page.inner_text("#sv-traffic-table") == table
    # the fields read what the replayed run ran (the reload left the defaults: 0.5, 1, 2 and 16 requests)
    fields = {"#sv-concurrency-lanes": "draft@2", "#sv-traffic-rates": "20", "#sv-traffic-requests": "4"}
    for field, value in (fields | {"#sv-traffic-rows": "3"}).items():
        expect(page.locator(f"{field} input, {field} textarea").first).to_have_value(value)
    page.close()
    offline = browser.new_context(offline=True)
    opened = offline.new_page()
    opened.goto(files["#sv-traffic-snapshot"].as_uri())
    assert opened.locator("script, script[src], link[href^=http], img[src^=http]").count() == 0
    assert opened.locator("svg").count() == 3 and "draft@2" in opened.inner_text("table")
    offline.close()


def test_the_traffic_endpoint_answers_a_client_and_refuses_a_bad_rate_in_one_line(app_server):
    url, pair = app_server
    given = dict(pair=pair, dtype="float32", concurrency_names="ngram", rates="40", requests=3, max_new=8)
    answer = call_traffic(url, **given)
    assert "sv-traffic-table" in answer and ">yes<" in answer and ">NO<" not in answer
    answer = call_traffic(url, **(given | dict(rates="-2")))
    assert "a request rate" in answer and "sv-status-error" in answer
