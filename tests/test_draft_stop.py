"""Draft length decided while drafting: with adaptive γ, a draft model stops where its own probabilities, calibrated
on the run's verdicts, say one more token would not pay for its drafting and verification. Greedy output stays the
target's, sampling keeps the target's law, and a draft that lets its confidence pick the token fails that test."""

import pytest
import torch
from laws import REFUSED, chain
from test_adaptive import _adaptive

from specviz.engine import generate
from specviz.engine.adaptive import Calibration, GammaController
from specviz.engine.sampling import choose as honest_choose
from specviz.events import generated_ids
from specviz.settings import Settings


def settled(**over) -> GammaController:
    """A controller with measured costs: V(1) = 1 s, a draft token 0.05 s, verifying k tokens 1 + 0.02·(k − 1) s."""
    return GammaController(8, draft_per_token=0.05, forward_1=1.0, slope=0.02, stops_early=True, **over)


def test_confident_drafts_go_on_and_unsure_ones_stop():
    controller = settled()
    assert controller.keep_drafting([0.95, 0.9, 0.92])
    assert not controller.keep_drafting([0.95, 0.9, 0.05])
    assert not controller.keep_drafting([0.9] * 8)  # the ceiling
    assert controller.next_gamma() == 8  # γ is only the ceiling when the drafter stops early


def test_a_costly_verify_stops_drafting_sooner():
    cheap, dear = settled(), GammaController(8, draft_per_token=0.05, forward_1=1.0, slope=0.5, stops_early=True)
    assert cheap.keep_drafting([0.6, 0.6]) and not dear.keep_drafting([0.6, 0.6])


def test_the_calibration_learns_how_often_a_confidence_holds():
    calibration = Calibration()
    assert calibration.chance(0.95) == pytest.approx(0.95)  # the prior: the draft's own probability
    for _ in range(50):  # drafts at 0.95 that the target rejects at once
        calibration.observe((0.95, 0.75), 0)
    assert calibration.chance(0.95) < 0.1
    assert calibration.chance(0.75) == pytest.approx(0.75)  # the untested second draft counted nothing
    controller = settled(calibration=calibration)
    assert not controller.keep_drafting([0.95])


@pytest.mark.parametrize("prompt", ["w1 w2 w3 w4", "w5 w5 w5 w5 w5 w5 w9 w8 w7"])
def test_greedy_drafts_of_decided_length_equal_plain(target, drafts, tokenizer, prompt):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=48)))
    events = _adaptive(target, ids, "draft", drafts["partial"])
    assert generated_ids(events) == plain
    lengths = {len(e.proposed) for e in events if e.proposed}
    assert len(lengths) > 1 and max(lengths) <= 8  # the draft stopped at different depths


SAMPLED = Settings(max_new_tokens=3, gamma=3, temperature=1.0, adaptive=True)


def test_sampled_drafts_of_decided_length_keep_the_targets_law(small, draws):
    target, draft, prompt = small
    assert draws.law_p(target, prompt, SAMPLED, chain(target, draft)) > 1e-3


def test_a_draft_whose_confidence_picks_its_token_is_caught(small, draws, monkeypatch):
    """The mutant: where its sampled token looks unsure, the draft offers its argmax instead but keeps q, so the
    token no longer comes from q."""

    def unsure_to_argmax(probs, settings, generator):
        x = honest_choose(probs, settings, generator)
        return torch.where(probs[0, x] < 0.2, probs.argmax(-1), x)

    monkeypatch.setattr("specviz.drafters.draft_model.choose", unsure_to_argmax)
    target, draft, prompt = small
    assert draws.mutant_p(target, prompt, SAMPLED, chain(target, draft)) < REFUSED
