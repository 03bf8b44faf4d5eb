"""The race scheduler, request parsing, and the speedup theory: pure Python, no model needed."""

import pytest

from specviz.analysis.theory import best_gamma, cost_ratio, expected_speedup, expected_tokens_per_step, per_token_alpha
from specviz.app.request import read_request
from specviz.app.shelf import ModelShelf, PairPreset
from specviz.errors import InvalidRequest
from specviz.events import StepEvent
from specviz.settings import Settings
from specviz.views.race import Lane, interleave
from specviz.views.sweep import SweepView


def step(i, seconds, proposed=(), accepted=0, kind="plain", draft_s=0.0, finish=None, prefill=0.0):
    return StepEvent(
        index=i,
        proposed=tuple(proposed),
        accepted=accepted,
        next_token=9,
        next_kind=kind,
        p=tuple(0.5 for _ in proposed),
        q=None,
        draft_s=draft_s,
        verify_s=seconds - draft_s,
        step_s=seconds,
        prefill_s=prefill,
        finish=finish,
    )


def side(seconds: list[float], prefill=0.0):
    last = len(seconds) - 1
    return iter(
        [
            step(i, s, finish="length" if i == last else None, prefill=prefill if i == 0 else 0.0)
            for i, s in enumerate(seconds)
        ]
    )


def test_the_side_behind_on_its_own_clock_always_runs_next():
    lanes = {"a": Lane("a"), "b": Lane("b")}
    for name in interleave({"a": side([1.0] * 4), "b": side([0.4] * 6, prefill=0.5)}, lanes):
        other = lanes["b" if name == "a" else "a"]
        last = lanes[name].events[-1]
        before = lanes[name].clock_s - last.prefill_s - last.step_s
        assert other.done or before <= other.clock_s, f"{name} ran at {before} while the other was behind"
    assert len(lanes["a"].events) == 4 and len(lanes["b"].events) == 6
    assert lanes["a"].clock_s == pytest.approx(4.0) and lanes["b"].clock_s == pytest.approx(2.9)
    assert lanes["a"].done and lanes["b"].done


def test_order_follows_own_clocks_exactly():
    lanes = {"plain": Lane("plain"), "spec": Lane("spec")}
    order = list(interleave({"plain": side([1.0, 1.0, 1.0]), "spec": side([1.5, 1.5])}, lanes))
    # clocks before each turn: p0 s0 -> p; p1 s0 -> s; p1 s1.5 -> p; p2 s1.5 -> s; p2 s3 -> p; then p alone
    assert order == ["plain", "spec", "plain", "spec", "plain"]


def test_stop_halts_between_steps():
    lanes = {"a": Lane("a"), "b": Lane("b")}
    turns = interleave(
        {"a": side([1.0] * 50), "b": side([1.0] * 50)},
        lanes,
        stopped=lambda: sum(len(lane.events) for lane in lanes.values()) >= 3,
    )
    assert len(list(turns)) == 3


def test_request_values_from_a_browser_are_checked():
    shelf = ModelShelf([PairPreset("pair", "no-target", "no-draft")], "cpu")  # nothing loads before the check
    ask = dict(pair="pair", drafter="draft", dtype="float32", prompt="hi")
    ok = read_request(ask | dict(gamma=4.0, max_new="16", top_k=0.0), shelf).settings
    assert ok.gamma == 4 and ok.max_new_tokens == 16 and ok.top_k == 0
    for bad, words in [
        (dict(gamma=2.5), "gamma"),
        (dict(gamma=0), "gamma"),
        (dict(max_new_tokens="lots"), "max new"),
        (dict(top_p=0), "top-p"),
        (dict(temperature=float("nan")), "temperature"),
        (dict(prompt="  "), "empty"),
    ]:
        with pytest.raises(InvalidRequest, match=words):
            read_request(ask | bad, shelf)


def test_expected_speedup_matches_the_paper_formula():
    # (1 - a^(g+1)) / ((1 - a)(g c + 1))
    assert expected_speedup(0.8, 3, 0.0) == pytest.approx((1 - 0.8**4) / 0.2)
    assert expected_speedup(0.8, 3, 0.1) == pytest.approx((1 - 0.8**4) / (0.2 * 1.3))
    assert expected_tokens_per_step(1.0, 5) == 6
    assert expected_speedup(0.0, 4, 0.2) == pytest.approx(1 / 1.8)  # nothing accepted: pure overhead
    # high acceptance and cheap drafts favour long drafts; low acceptance favours short ones
    assert best_gamma(0.9, 0.02, range(1, 9)) > best_gamma(0.5, 0.2, range(1, 9))


def test_alpha_counts_only_tested_drafts():
    events = [step(0, 1.0, (1, 2, 3, 4), 1, "correction"), step(1, 1.0, (1, 2, 3, 4), 4, "bonus")]
    # tested: 1 accepted + 1 rejection, then 4 accepted -> 5 / 6 (accepted / proposed would say 5 / 8)
    assert per_token_alpha(events) == pytest.approx(5 / 6)
    assert per_token_alpha([step(0, 1.0)]) is None


def test_cost_ratio_is_draft_time_per_token_over_a_target_forward():
    plain = [step(i, 0.2) for i in range(5)]
    spec = [step(0, 0.5, (1, 2, 3, 4), 2, "correction", draft_s=0.2)]
    assert cost_ratio(spec, plain) == pytest.approx(0.05 / 0.2)


def test_sweep_view_points_and_theory():
    view = SweepView(gammas=(1, 2))
    view.plain = [step(i, 0.2) for i in range(8)]  # 5 tok/s
    view.runs[1] = [step(i, 0.25, (1,), 1, "bonus", draft_s=0.05) for i in range(4)]  # 2 tokens/step: 8 tok/s
    view.runs[2] = [step(i, 0.3, (1, 2), 1, "correction", draft_s=0.1) for i in range(4)]
    points = view.points()
    assert [p.gamma for p in points] == [1, 2]
    assert points[0].speedup == pytest.approx(8 / 5) and points[1].tokens_per_step == pytest.approx(2.0)
    theory = view.theory()
    assert theory.alpha == pytest.approx((4 + 4) / (4 + 4 + 4)) and theory.c == pytest.approx(0.05 / 0.2)
    assert theory.speedups[0] == pytest.approx(expected_speedup(theory.alpha, 1, theory.c))
    assert view.best_measured() == 1 and view.progress() == 1.0


def test_a_sampled_adaptive_run_says_a_seed_does_not_repeat_it():
    from specviz.settings import mode_text

    said = "the same seed need not repeat a sampled run"
    assert said in mode_text("draft model", Settings(temperature=0.8, adaptive=True))
    assert said not in mode_text("draft model", Settings(temperature=0.8))
    assert said not in mode_text("draft model", Settings(adaptive=True))  # greedy: the same at every γ
