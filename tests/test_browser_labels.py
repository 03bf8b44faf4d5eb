"""The words a chart writes beside its lines, measured as chromium draws them: each "stops paying" label clear of
every line of data, of every other label and of the legend, in the traffic charts (the app's and the snapshot's SVG)
and in the concurrency sweep's charts (the app's Plotly and the snapshot's SVG). Drafters that stop paying at the
same rate, at the first and at the last rate, with a lane's line running high through where a label would sit."""

import pytest
from test_concurrency import _rounds_view

from specviz.events import PLAIN
from specviz.render.concurrency_charts import concurrency_chart
from specviz.render.concurrency_page import svg_concurrency_chart
from specviz.render.traffic_page import CHARTS, svg_traffic_chart
from specviz.traffic.latency import RequestTiming
from specviz.traffic.rates_view import TrafficView
from specviz.traffic.results import News, TrafficRun
from specviz.traffic.traffic_plan import Slo

# Each label's box against every other text's box and against points sampled along every line drawn (each point
# taken to the page's coordinates): what a person would see as words crossed or covered.
CLASHES_JS = """([labels, lines, texts]) => {
  const box = (e) => e.getBoundingClientRect();
  const meet = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const own = (e) => [...e.childNodes].filter((n) => n.nodeType === 3).map((n) => n.textContent).join("");
  const words = (e) => own(e) || e.textContent;
  const found = [];
  for (const label of document.querySelectorAll(labels)) {
    const r = box(label);
    for (const other of document.querySelectorAll(texts)) {
      if (other !== label && !other.contains(label) && !label.contains(other) && meet(r, box(other)))
        found.push(`"${words(label)}" over "${words(other)}"`);
    }
    for (const line of document.querySelectorAll(lines)) {
      const length = line.getTotalLength(), ctm = line.getScreenCTM();
      for (let at = 0; at <= length; at += 1) {
        const p = line.getPointAtLength(at).matrixTransform(ctm);
        if (p.x > r.left + 1 && p.x < r.right - 1 && p.y > r.top + 1 && p.y < r.bottom - 1) {
          found.push(`"${words(label)}" crossed by a line`);
          break;
        }
      }
    }
  }
  return found;
}"""
SVG_PARTS = ['svg text[fill^="#"]', "svg polyline, svg line[stroke-dasharray]", "svg text"]  # labels, lines, texts


def _request(rate: float, i: int, tpot: float) -> RequestTiming:
    arrival = i / rate
    return RequestTiming(0, arrival, arrival, arrival + 0.2, arrival + 0.2 + 9 * tpot, 10)


def traffic_view(tpots: dict[str, tuple[float, ...]]) -> TrafficView:
    """A traffic run whose lanes took these median TPOTs at rates 0.5, 1 and 2."""
    view = TrafficView((0.5, 1.0, 2.0), tuple(tpots), Slo(5.0, 0.5))
    for lane, per_rate in tpots.items():
        for rate, tpot in zip(view.rates, per_rate):
            timings = tuple(_request(rate, i, tpot) for i in range(4))
            run = TrafficRun(lane, rate, 0, 4, timings, ((1,) * 10,) * 4, (), ())
            view.hear(News("run", lane=lane, run=run, same=(True,) * 4))
    return view


STOPS = {  # where the drafters stop paying
    "both at the first rate": {PLAIN: (0.10, 0.12, 0.2), "draft@2": (0.11, 0.13, 0.3), "ngram": (0.12, 0.2, 0.4)},
    "both at the last rate": {PLAIN: (0.10, 0.12, 0.2), "draft@2": (0.05, 0.06, 0.3), "ngram": (0.06, 0.07, 0.4)},
    "first and last": {PLAIN: (0.10, 0.12, 0.2), "draft@2": (0.11, 0.06, 0.3), "eagle@a10": (0.06, 0.07, 0.4)},
}


def clashes(page, parts: list[str]) -> list[str]:
    return page.evaluate(CLASHES_JS, parts)


@pytest.mark.parametrize("case", list(STOPS))
def test_the_traffic_charts_keep_each_stop_paying_label_clear(browser, case):
    view = traffic_view(STOPS[case])
    assert all(view.stops_paying(lane) is not None for lane in view.lanes[1:]), case
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content("<body>" + "".join(svg_traffic_chart(view, what) for what in CHARTS) + "</body>")
    labels = page.locator("svg text", has_text="stops paying")
    assert labels.count() == 3 * (len(view.lanes) - 1)
    found = clashes(page, SVG_PARTS)
    page.close()
    assert not found, found


def test_the_concurrency_charts_keep_each_crossover_label_clear_of_a_line_running_high(browser):
    """n-gram's line at its highest where the labels sit: the data is drawn below the band of words."""
    view = _rounds_view({PLAIN: [(10, 20, 40)], "draft@2": [(15, 21, 30)], "ngram": [(60, 65, 35)]})
    assert view.crossover("draft@2") == view.crossover("ngram") == 4
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.set_content("<body>" + svg_concurrency_chart(view) + "</body>")
    found = clashes(page, SVG_PARTS)
    # as wide as the app draws it beside its twin at 1280 px
    html = concurrency_chart(view).to_html(include_plotlyjs=True, full_html=True, default_width="420px")
    page.set_content(html)
    page.wait_for_selector(".annotation-text")
    assert page.locator(".annotation-text").count() == 2
    texts = ".annotation-text, .legendtext, .gtitle, .xtick text, .ytick text, .g-xtitle text, .g-ytitle text"
    plotted = [".annotation-text", ".scatterlayer path.js-line, .shapelayer path", texts]
    found += clashes(page, plotted)
    page.close()
    assert not found, found
