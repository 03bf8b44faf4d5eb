"""Replaying a step's acceptance rule with no model: the correct rule's histogram fits p at the N the app uses, each
broken rule fails the same test, and 10,000 replays take well under a second."""

import pytest

from specviz.analysis.rule_replay import CHAIN_RULES, REPLAYS, REST, TREE_RULES, replay_step, rules_for
from specviz.events import Leading, StepDetail, StepEvent, Trial


def sampled_step(q=(0.10, 0.50, 0.30, 0.05), candidates=None, rule="lossless"):
    """A step at whose first position the target gave p and the drafter q (or, with candidates, a lookup's tree)."""
    lead = Leading(ids=(11, 12, 13, 14), p=(0.40, 0.30, 0.10, 0.05), q=None if candidates else q)
    proposed = (candidates or (12,))[:1]
    return StepEvent(
        index=0,
        proposed=proposed,
        accepted=0,
        next_token=11,
        next_kind="correction",
        p=(0.3,),
        q=None if candidates else (0.5,),
        draft_s=0.0,
        verify_s=0.0,
        step_s=0.0,
        candidates=tuple((c,) for c in candidates) if candidates else None,
        winner=0 if candidates else None,
        detail=StepDetail(rule, (Trial(1, proposed[0], 0.3, 0.5, False, 0.9),), (lead,)),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_rule_fits_p_and_every_broken_rule_fails(seed):
    for event, rules in ((sampled_step(), CHAIN_RULES), (sampled_step(candidates=(11, 12)), TREE_RULES)):
        assert rules_for(event) is rules
        correct, *broken = rules
        replay = replay_step(event, lambda t: f"w{t}", correct, seed=seed)
        assert replay.n == REPLAYS and replay.labels == ("w11", "w12", "w13", "w14", REST)
        assert replay.p_value > 1e-3, (correct, replay.counts)
        assert replay.seconds < 1.0
        for rule in broken:
            assert replay_step(event, str, rule, seed=seed).p_value < 1e-6, rule


def test_only_a_sampled_lossless_step_is_replayed():
    assert rules_for(sampled_step(rule="typical")) == {} and rules_for(sampled_step(rule="greedy")) == {}
    assert rules_for(None) == {}
    with pytest.raises(ValueError):
        replay_step(sampled_step(rule="greedy"), str, next(iter(CHAIN_RULES)))


def test_the_replay_takes_the_position_where_the_draft_was_rejected():
    sure = Leading(ids=(11, 12), p=(1.0, 0.0), q=(1.0, 0.0))  # position 1: both sure of 11, nothing to see
    torn = Leading(ids=(11, 12, 13, 14), p=(0.40, 0.30, 0.10, 0.05), q=(0.10, 0.50, 0.30, 0.05))
    event = StepEvent(
        index=3,
        proposed=(11, 12),
        accepted=1,
        next_token=13,
        next_kind="correction",
        p=(1.0, 0.3),
        q=(1.0, 0.5),
        draft_s=0.0,
        verify_s=0.0,
        step_s=0.0,
        detail=StepDetail("lossless", (), (sure, torn)),
    )
    replay = replay_step(event, str, list(CHAIN_RULES)[1])  # always keep the draft: q, not p, at position 2
    assert replay.position == 2 and replay.p == (0.40, 0.30, 0.10, 0.05, pytest.approx(0.15))
    assert replay.p_value < 1e-6
