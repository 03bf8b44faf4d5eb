"""The app on the llama.cpp runtime in a real browser (Debian's chromium): the tiny pair, each model also a GGUF in its
folder, served with --runtime llama.cpp (the choice said on the screen); the first race (Figure 1, the badge), a step
explained, *Why this speedup* with the runtime and its checked prediction, and a Grand Prix on both runtimes whose
comparison says why the speedups differ and fits the screen. Screenshots go to test-artifacts/."""

import pytest
from pages import WAIT, fill_kept, open_page, shot


@pytest.fixture(scope="module")
def llama_app(launch_app, pair_folders_with_gguf, pair_heads):
    proc, url = launch_app(pair_folders_with_gguf, pair_heads, extra=("--runtime", "llama.cpp", "--dtype", "auto"))
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_the_first_race_figure_1_a_step_explained_and_why_on_llama_cpp(llama_app, browser):
    page = open_page(browser, llama_app, 1440, 900)
    try:
        assert page.locator("#sv-runtime input:checked").get_attribute("value") == "llama.cpp"
        page.locator("#sv-prompt textarea").fill("w1 w2 w3 w1 w2 w3 w1")
        page.locator("#sv-adaptive input").uncheck()  # the tiny draft costs what its target does: adaptive stays plain
        page.click("#sv-run")
        page.wait_for_selector("#sv-badge .sv-badge-ok, #sv-badge .sv-badge-diff", timeout=120_000)
        badge = page.inner_text("#sv-badge")
        assert "identical to plain decoding" in badge or "margin" in badge  # a parting names its near tie
        assert page.locator("#sv-fig1 .sv-row").count() > 2 and page.locator("#sv-fig1 .sv-acc").count() > 0
        page.locator("#sv-fig1 .sv-row").first.click()  # a Figure-1 row opens its explanation
        page.locator("#sv-explain").get_by_text("Step 1").wait_for(timeout=WAIT)
        page.get_by_role("tab", name="Why this speedup").click()
        why = page.locator("#sv-runtime-why")
        why.wait_for(timeout=30_000)
        assert "llama.cpp" in why.inner_text() and "predicted" in why.inner_text()
        shot(page, "llama-why.png", full=True)
    finally:
        page.close()


def test_a_grand_prix_on_both_runtimes_says_why_and_fits_the_screen(llama_app, browser):
    page = open_page(browser, llama_app, 1440, 900)
    try:
        page.get_by_role("tab", name="Compare drafters").click()
        fill_kept(page, "#sv-gp-lanes textarea, #sv-gp-lanes input", "ngram@3, draft@3")
        page.locator("#sv-gp-runtimes input").check()
        page.evaluate("window.scrollTo(0, 0)")
        page.locator("#sv-prompt textarea").fill("w5 w5 w5 w9 w5 w5 w5")
        page.click("#sv-compare")
        page.wait_for_selector("#sv-status .sv-status-done:has-text('Grand Prix')", timeout=300_000)
        page.get_by_role("tab", name="Compare drafters").click()
        compared = page.locator("#sv-runtimes")
        compared.wait_for(timeout=WAIT)
        text = compared.inner_text()
        assert "on llama.cpp" in text and "on transformers" in text and "plain steps" in text
        rows = page.locator("#sv-compare-table table.sv-compare tbody tr")
        names = [rows.nth(i).locator("td").nth(1).inner_text() for i in range(rows.count())]
        assert {"plain", "ngram@3", "plain · transformers", "ngram@3 · transformers", "draft@3 · transformers"} <= set(
            names
        )
        box = page.locator("#sv-runtimes table").bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 1440  # no column cut at the right edge
        shot(page, "llama-both-runtimes.png", full=True)
    finally:
        page.close()
