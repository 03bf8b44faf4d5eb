"""Figures the physics forbids (specviz/analysis/physics.py): a speedup beyond τ, a batch's plain step outside what the
smaller batches allow; a concurrency sweep that flags them, leaves them out of its verdict, and calls a lane below
plain at one level and above at a larger one mixed; and the same check on the γ sweep, the Grand Prix table and
podium, the workload report, traffic and the benchmark report."""

import pytest

from specviz.analysis.physics import SLACK, moved_batches, speedup_forbidden
from specviz.events import PLAIN
from specviz.render.concurrency_page import concurrency_table, crossover_words
from specviz.traffic.levels_view import ConcurrencyView
from specviz.traffic.results import BatchStep, LevelRun


def test_a_speedup_beyond_tau_is_forbidden_and_one_within_it_stands():
    assert speedup_forbidden(4.54, 1.14)  # the sweep that moved: 4.5× from 1.14 tokens a forward
    assert not speedup_forbidden(1.14, 1.14) and not speedup_forbidden(SLACK * 2.0 - 0.01, 2.0)
    assert not speedup_forbidden(None, 1.2) and not speedup_forbidden(1.5, None)


@pytest.mark.parametrize(
    "seconds, moved",
    [
        ({1: 0.10, 2: 0.11, 4: 0.13, 8: 0.2}, set()),  # a batch costs a little more than one row: steady
        ({1: 0.10, 2: 0.33, 4: 0.13}, {2}),  # level 2 slowed 3×: dearer than two single forwards
        ({1: 0.10, 2: 0.11, 4: 0.05}, {4}),  # four rows cheaper than two
        ({1: 0.10, 2: 0.20, 4: 0.40}, set()),  # compute-bound: each row costs a forward, still allowed
    ],
)
def test_a_plain_step_outside_what_smaller_batches_allow_is_the_machine_moving(seconds, moved):
    assert moved_batches(seconds) == moved


def _run(lane: str, rows: int, step_s: float, tokens_a_step: int, steps: int = 10) -> LevelRun:
    """`steps` batch steps of `step_s` seconds, each writing `tokens_a_step` tokens to every row."""
    step = BatchStep(rows, 4 if lane != PLAIN else 0, rows * 5, 0.0, step_s, step_s, 0, 0, rows * tokens_a_step)
    tokens = ((1,) * (steps * tokens_a_step),) * rows
    return LevelRun(lane, rows, (0,) * rows, tokens, (steps * step_s,) * rows, (step,) * steps, 0.0, steps * step_s)


def _sweep(plain_s: dict, lane_s: dict, tokens_a_step: int = 2) -> ConcurrencyView:
    """Plain decoding and draft@4 at each level: plain's step seconds, the lane's, the lane writing `tokens_a_step`."""
    view = ConcurrencyView(tuple(plain_s), (PLAIN, "draft@4"))
    view.fixed = {"draft@4": 4}
    for level in plain_s:
        view.add(_run(PLAIN, level, plain_s[level], 1))
        view.add(_run("draft@4", level, lane_s[level], tokens_a_step))
    return view


def test_a_level_whose_plain_step_slowed_three_times_is_flagged_and_left_out_of_the_verdict():
    steady = {1: 0.10, 2: 0.11, 4: 0.13}
    view = _sweep({**steady, 2: 0.33}, {1: 0.15, 2: 0.17, 4: 0.20})
    moved = view.figures("draft@4", 2)
    assert moved.speedup == pytest.approx(2 * 0.33 / 0.17) and "machine's speed moved" in moved.moved
    assert not view.figures("draft@4", 1).moved and not view.figures("draft@4", 4).moved
    words = crossover_words(view, "draft@4")
    assert words.startswith("pays at every level run: 1.30× at 4 requests (one round)")
    assert "left out: 2 requests (the machine's speed moved: plain decoding's step at 2 requests" in words
    html = concurrency_table(view)
    assert "3.88× ⚠ machine moved" in html and 'class="sv-moved"' in html
    assert view.to_json()["moved_levels"] == [2]
    assert "left out" not in crossover_words(_sweep(steady, {1: 0.15, 2: 0.17, 4: 0.20}), "draft@4")


def test_a_speedup_beyond_its_tau_is_flagged_even_where_plain_looks_steady():
    """The sweep a presenter met: 4.54× at τ 1.14, beside 0.97× at one request: the verdict rests on the one level
    the physics allows, and the flagged level is named."""
    view = _sweep({1: 0.10, 2: 0.11}, {1: 0.103, 2: 0.022}, tokens_a_step=1)
    assert view.figures("draft@4", 2).moved.startswith("the machine's speed moved: 5.00× at τ 1.00")
    words = crossover_words(view, "draft@4")
    assert words.startswith("below plain from 1 request: 0.97× there") and "left out: 2 requests" in words


def test_a_lane_below_plain_at_one_level_and_above_at_a_larger_one_is_mixed():
    view = _sweep({1: 0.10, 2: 0.11}, {1: 0.22, 2: 0.17})  # 0.91× at 1, 1.29× at 2
    assert view.mixed("draft@4") and view.crossover("draft@4") is None
    words = crossover_words(view, "draft@4")
    assert words.startswith("mixed: below plain at 1 request, above at 2 requests")
    assert view.to_json()["mixed"] == ["draft@4"]
    assert not _sweep({1: 0.10, 2: 0.11}, {1: 0.15, 2: 0.25}).mixed("draft@4")  # above, then below: a crossover


# -- the same check on the γ sweep, the Grand Prix table, the workload report and traffic --


def _plain(n: int, s: float) -> list:
    from test_report import plain_steps

    return plain_steps(n, s)


def test_a_gamma_sweep_point_beyond_its_tau_is_crossed_out_and_never_the_best():
    """Plain at 0.1 s a token; γ 2 accepts 1 of 2 (τ 2) at 0.03 s a step: 6.7×, which no verify allows."""
    from test_report import spec_steps

    from specviz.render.charts import sweep_chart
    from specviz.views.sweep import SweepView

    view = SweepView(gammas=(2, 4))
    view.plain = _plain(12, 0.1)
    view.runs = {2: spec_steps(12, 1, 2, 0.03), 4: spec_steps(12, 3, 4, 0.25)}  # γ 4: τ 4 at 0.25 s, 1.6×
    moved = {p.gamma: p.moved for p in view.points()}
    assert moved == {2: True, 4: False}
    assert view.best_measured() == 4
    names = [trace.name for trace in sweep_chart(view).data]
    assert "best measured γ = 4" in names and any("machine moved" in (n or "") for n in names)


def test_the_grand_prix_table_and_podium_flag_a_speedup_beyond_its_tau():
    from specviz.app.ui.grand_prix_screen import grand_prix_status
    from specviz.render.panels import compare_table
    from specviz.views.grand_prix import CompareRow

    rows = [
        CompareRow(PLAIN, 1.6, None, None, None, 10, True, "", place=2),
        CompareRow("ngram@4", 7.4, 4.54, 0.1, 1.14, 9, True, "", place=1),
        CompareRow("draft@4", 3.0, 1.8, 0.7, 2.9, 4, True, "", place=3),
    ]
    html = compare_table(rows)
    assert "4.54× ⚠ machine moved" in html and "1.80×</td>" in html

    class Finished:
        finished, stopped, wall_s = True, False, 3.0

        def rows(self):
            return rows

    assert "1st ngram@4 4.54× ⚠ machine moved, 2nd plain, 3rd draft@4 1.80×" in grand_prix_status(Finished())


def test_the_report_names_no_winner_whose_speedup_its_tau_forbids():
    from specviz.render.report import _best
    from specviz.render.svg_charts import speedup_bars
    from specviz.workload.view import WorkloadRow

    rows = [
        WorkloadRow(PLAIN, "", 1, 10, 1.6, 1.0, None, 1.0, None),
        WorkloadRow("ngram", "", 1, 10, 7.4, 4.54, 0.1, 1.14, 1),
        WorkloadRow("draft", "", 1, 10, 3.0, 1.8, 0.7, 2.9, 1),
    ]
    assert _best(rows) == "draft"
    bars = speedup_bars(rows)
    assert "4.54× ⚠ machine moved" in bars and "1.80× · 3.0 tok/s ★" in bars


def _traffic_run(lane: str, rate: float, tpot: float, tokens_a_row_step: int):
    from specviz.traffic.latency import RequestTiming
    from specviz.traffic.results import TrafficRun

    timings = tuple(
        RequestTiming(0, i / rate, i / rate, i / rate + 0.2, i / rate + 0.2 + 9 * tpot, 10) for i in range(4)
    )
    step = BatchStep(2, 0 if lane == PLAIN else 4, 10, 0.0, 0.1, 0.1, 0, 0, 2 * tokens_a_row_step)
    return TrafficRun(lane, rate, 0, 4, timings, ((1,) * 10,) * 4, (step,) * 20, ())


def test_a_traffic_rate_where_a_lane_beat_plain_beyond_its_tau_is_flagged_and_left_out_of_where_it_stops_paying():
    """At 1 req/s the lane's TPOT is a third of plain's with 1.2 tokens a row a step: the machine moved there; its
    real stop at 2 req/s stands, and the rate left out is named."""
    from specviz.render.traffic_page import traffic_table
    from specviz.traffic.rates_view import TrafficView
    from specviz.traffic.results import News
    from specviz.traffic.traffic_plan import Slo

    view = TrafficView((0.5, 1.0, 2.0), (PLAIN, "ngram"), Slo(5.0, 1.0))
    per_rate = {PLAIN: ((0.10, 1), (0.30, 1), (0.12, 1)), "ngram": ((0.09, 1.2), (0.10, 1.2), (0.2, 1.2))}
    for lane, figures in per_rate.items():
        for rate, (tpot, tau) in zip(view.rates, figures):
            view.hear(News("run", lane=lane, run=_traffic_run(lane, rate, tpot, tau), same=(True,) * 4))
    assert [view.moved("ngram", r) for r in view.rates] == [False, True, False]
    assert view.stops_paying("ngram") == 2.0  # its own stop stands; the flagged rate is named, not counted
    assert "left out: 1 req/s, where the machine's speed moved" in view.paying_words("ngram")
    assert traffic_table(view).count("⚠ machine moved") == 1


def test_the_benchmark_report_flags_a_cell_whose_speedup_its_tau_forbids():
    from specviz.bench.bench_report import cell_table
    from specviz.bench.rows import BenchRow

    rows = [
        BenchRow("code", "p", 0.0, "ngram", 4, "specviz", 9.0, 3.9, (8.0, 10.0), tau=1.2),
        BenchRow("code", "p", 0.0, "draft", 4, "specviz", 6.0, 1.6, (5.0, 7.0), tau=2.9),
    ]
    flagged = [line for line in cell_table(rows).splitlines() if "machine moved" in line]
    assert len(flagged) == 1 and "| ngram |" in flagged[0] and "3.90x ⚠ machine moved" in flagged[0]
