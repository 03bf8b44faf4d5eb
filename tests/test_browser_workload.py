"""A product manager's workload in a real browser on `python app.py` with the tiny pair: ten prompts pasted, one
button, the table filling run by run, and the report downloaded and opened with no network."""

import time

from pages import fill_kept, open_page, shot
from test_browser import EVIL

from specviz.drafters.registry import kinds

LOOKUP = [k for k in kinds(menu_only=True) if k.listing.lookup and not k.needs_draft]


def test_ten_pasted_prompts_fill_the_table_and_the_report_opens_offline(app_server, browser, tmp_path):
    prompts = [f"w{i} w{i + 1} w{i + 2} w{i} w{i + 1}" for i in range(9)] + [f"w1 w2 {EVIL}"]
    page = open_page(browser, app_server[0], 1280, 720)
    page.get_by_label("float32").check()
    page.get_by_role("tab", name="Your prompts").click()
    fill_kept(page, "#sv-workload-prompts textarea", "\n".join(prompts))
    for k in kinds(menu_only=True):  # two lookup drafters keep the test short; the others are unticked
        if k not in LOOKUP[:2]:
            page.locator("#sv-workload-drafters").get_by_label(k.listing.label, exact=True).uncheck()
    page.click("#sv-workload-run")
    counts, deadline = set(), time.time() + 300
    while "done;" not in page.inner_text("#sv-workload-progress"):
        assert time.time() < deadline
        counts.add(page.locator("#sv-workload-table .sv-grid td:text-matches('×$')").count())
        time.sleep(0.2)
    assert len(counts) >= 3  # the grid filled in run by run, not all at once
    assert "done; 30 of 30 runs" in page.inner_text("#sv-workload-progress")
    assert page.locator("#sv-workload-table .sv-grid td:text-matches('×$')").count() == 20
    assert EVIL[:30] in page.inner_text("#sv-workload-table") and page.evaluate("window.__pwned") is None
    shot(page, "workload.png", full=True)
    with page.expect_download() as got:
        page.click("#sv-workload-report")
    report = tmp_path / got.value.suggested_filename
    got.value.save_as(report)
    page.close()
    offline = browser.new_context(offline=True)
    opened = offline.new_page()
    opened.goto(report.as_uri())
    assert EVIL in opened.inner_text("body") and opened.evaluate("window.__pwned") is None
    assert opened.locator("script[src], link[href^=http], img[src^=http]").count() == 0
    assert opened.locator("svg").count() >= 2 and opened.locator("table").count() >= 2
    shot(opened, "workload-report.png", full=True)
    offline.close()
