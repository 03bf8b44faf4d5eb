"""Why a run's speedup came out as it did: the prediction from α and the measured costs, the term named when
speculation lost, the γ suggested, and that a dearer or cheaper draft moves prediction and measurement alike."""

import random

import pytest

from specviz.analysis.diagnosis import diagnose, time_split
from specviz.events import StepEvent

PLAIN_STEP = 0.1  # seconds per plain step: the unit of every cost


def plain(n=40):
    return [
        StepEvent(
            index=i,
            proposed=(),
            accepted=0,
            next_token=1,
            next_kind="plain",
            p=(),
            q=None,
            draft_s=0.0,
            verify_s=PLAIN_STEP * 0.98,
            step_s=PLAIN_STEP,
            prefill_s=0.5 if i == 0 else 0.0,
        )
        for i in range(n)
    ]


def speculative(alpha=0.8, gamma=4, draft_per_token=0.02, verify=0.11, overhead=0.002, steps=400, seed=0):
    """Steps whose drafts are accepted one by one with probability alpha (i.i.d.), with the given costs in seconds."""
    rng, events = random.Random(seed), []
    for i in range(steps):
        accepted = 0
        while accepted < gamma and rng.random() < alpha:
            accepted += 1
        draft_s = draft_per_token * gamma
        events.append(
            StepEvent(
                index=i,
                proposed=(5,) * gamma,
                accepted=accepted,
                next_token=1,
                next_kind="bonus" if accepted == gamma else "correction",
                p=(0.5,) * gamma,
                q=None,
                draft_s=draft_s,
                verify_s=verify,
                step_s=draft_s + verify + overhead,
                gamma=gamma,
                forward_tokens=gamma + 1,
            )
        )
    return events


def test_a_run_that_paid_is_predicted_within_a_few_percent_and_blames_nothing():
    found = diagnose(plain(), speculative())
    assert found.measured > 1.5 and not found.culprit
    assert found.predicted == pytest.approx(found.measured, rel=0.05)  # i.i.d. acceptance: the model holds
    assert found.alpha == pytest.approx(0.8, abs=0.03) and found.draft == pytest.approx(0.8, rel=0.01)
    assert "lost" not in found.line() and "predicted" in found.line()


@pytest.mark.parametrize(
    "costs, culprit",
    [
        (dict(alpha=0.05), "acceptance"),
        (dict(draft_per_token=0.06), "draft"),
        (dict(verify=0.35, alpha=0.5), "verify"),
        (dict(overhead=0.3, alpha=0.6), "overhead"),
    ],
)
def test_a_run_that_lost_names_the_term_that_lost_it(costs, culprit):
    found = diagnose(plain(), speculative(**costs))
    assert found.measured < 1.0 and found.culprit == culprit, found
    assert "lost to" in found.line()


def test_the_suggested_gamma_follows_the_costs():
    cheap = diagnose(plain(), speculative(alpha=0.9, draft_per_token=0.001, verify=0.1))
    dear = diagnose(plain(), speculative(alpha=0.9, draft_per_token=0.05, verify=0.1))
    hopeless = diagnose(plain(), speculative(alpha=0.05))
    assert cheap.best_gamma > dear.best_gamma >= 1 and cheap.best_predicted > dear.best_predicted
    assert hopeless.best_gamma == 0 and "no γ pays" in hopeless.line()


def test_a_dearer_draft_moves_prediction_and_measurement_the_same_way():
    runs = [diagnose(plain(), speculative(draft_per_token=d)) for d in (0.005, 0.02, 0.04)]
    assert [r.measured for r in runs] == sorted((r.measured for r in runs), reverse=True)
    assert [r.predicted for r in runs] == sorted((r.predicted for r in runs), reverse=True)


def test_nothing_to_say_before_a_step_drafted_and_the_time_split_adds_up():
    assert diagnose(plain(), []) is None and diagnose([], speculative()) is None
    spec = speculative(steps=10)
    split = time_split(spec)
    total = sum(e.step_s + e.prefill_s for e in spec)
    assert split.prefill + split.draft + split.verify + split.overhead == pytest.approx(total)


def test_a_block_drafters_cost_is_counted_once_per_pass():
    """A DFlash step pays one pass whatever γ: c per pass in the theory and the diagnosis, never c × γ."""
    from dataclasses import replace

    from specviz.analysis.theory import cost_ratio, drafts_blocks, expected_speedup

    base = plain()
    per_token = speculative(gamma=8, draft_per_token=0.005)  # 0.04 s of drafting a step
    blocks = [replace(e, block=15) for e in per_token]  # the same steps, each one pass of a 15-position block
    assert drafts_blocks(blocks) and not drafts_blocks(per_token)
    assert cost_ratio(blocks, base) == pytest.approx(8 * cost_ratio(per_token, base))  # per pass, not per token
    assert expected_speedup(0.8, 8, 0.4, block=True) == pytest.approx(expected_speedup(0.8, 8, 0.4 / 8))
    found, usual = diagnose(base, blocks), diagnose(base, per_token)
    assert found.block == 15 and usual.block == 0 and found.c == pytest.approx(8 * usual.c)
    assert found.predicted == pytest.approx(usual.predicted)  # the same costs, counted either way
