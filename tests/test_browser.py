"""A real browser (Debian's chromium through Playwright) loads the page, runs a race, and finds Figure 1
and the charts drawn; markup in the prompt stays text. Saves a screenshot to look at."""

import os
import shutil
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("SPECVIZ_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = Path(os.environ.get("SPECVIZ_SCREENSHOTS", ROOT / "test-artifacts"))
EVIL = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def test_the_page_runs_a_race_and_draws_figure1_and_charts(app_server):
    url, _ = app_server
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(url)
            page.get_by_label("Prompt").fill(f"w1 w2 w3 {EVIL}")
            page.get_by_label("float32").check()
            page.click("#sv-run")
            page.wait_for_selector("#sv-badge .sv-badge-ok", timeout=120_000)
            page.wait_for_selector("#sv-race-chart .js-plotly-plot .legendtext", timeout=30_000)

            rows = page.locator("#sv-fig1 .sv-row")
            assert rows.count() > 3
            assert page.locator("#sv-fig1 .sv-acc").count() > 0 and page.locator("#sv-fig1 del.sv-rej").count() > 0
            struck = page.locator("#sv-fig1 del.sv-rej").first.evaluate("e => getComputedStyle(e).textDecorationLine")
            assert "line-through" in struck
            green = page.locator("#sv-fig1 .sv-acc").first.evaluate("e => getComputedStyle(e).borderTopColor")
            assert green == "rgb(0, 158, 115)"
            assert "identical to plain decoding" in page.inner_text("#sv-badge")
            assert "tokens/s" in page.inner_text("#sv-metrics")
            legend = page.locator("#sv-race-chart .legendtext").all_text_contents()
            assert legend == ["plain", "speculative"]
            assert EVIL in page.inner_text("#sv-echo")  # shown as text...
            assert page.evaluate("window.__pwned") is None  # ...and never run
            assert page.locator("#sv-echo img, #sv-echo script").count() == 0

            # the chosen drafter's options fold out below the menu; the others' stay out of the way
            assert page.get_by_text("draft model: options").count() == 0
            assert not page.get_by_text("n-gram prompt lookup: options").is_visible()
            page.locator("#sv-drafter input").click()
            page.get_by_role("option", name="n-gram prompt lookup").click()
            page.get_by_text("n-gram prompt lookup: options").wait_for(state="visible", timeout=10_000)
            assert not page.get_by_text("Medusa heads (tree): options").is_visible()

            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "app.png"), full_page=True)
            assert (SHOTS / "app.png").stat().st_size > 20_000
        finally:
            browser.close()
