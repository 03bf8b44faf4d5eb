"""Figures the physics forbids (specviz/analysis/physics.py): a speedup beyond τ, a batch's plain step outside what the
smaller batches allow; and a concurrency sweep that flags them, leaves them out of its verdict, and calls a lane below
plain at one level and above at a larger one mixed."""

import pytest

from specviz.analysis.physics import SLACK, moved_batches, speedup_forbidden
from specviz.concurrency.sweep_results import BatchStep, LevelRun
from specviz.concurrency.sweep_view import ConcurrencyView
from specviz.events import PLAIN
from specviz.render.concurrency_page import concurrency_table, crossover_words


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
