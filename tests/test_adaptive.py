"""Adaptive γ: the controller's choices follow the cost model, and adaptive runs stay exact."""

import pytest
from test_medusa_drafter import copying_heads

from specviz.analysis.theory import best_gamma, expected_speedup
from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.engine.adaptive import GammaController
from specviz.engine.step import BaseDrafter, Proposal
from specviz.events import generated_ids
from specviz.settings import Settings


def settled(alpha, draft_per_token, slope=0.0, max_gamma=8):
    """A controller whose estimates are already set: α, d (in units of V(1) = 1 s) and the verify slope."""
    return GammaController(
        max_gamma, accepted=alpha * 1e6, tested=1e6, draft_per_token=draft_per_token, forward_1=1.0, slope=slope
    )


@pytest.mark.parametrize("alpha,c", [(0.9, 0.05), (0.8, 0.3), (0.6, 0.1), (0.95, 0.0)])
def test_with_a_flat_verify_cost_it_picks_the_papers_best_gamma(alpha, c):
    chosen = settled(alpha, c).next_gamma()
    assert chosen == best_gamma(alpha, c, range(1, 9))
    assert expected_speedup(alpha, chosen, c) > 1


def test_a_verify_cost_that_grows_with_k_shortens_the_draft():
    flat, steep = settled(0.8, 0.05).next_gamma(), settled(0.8, 0.05, slope=0.15).next_gamma()
    assert steep < flat


def test_when_speculation_cannot_pay_it_decodes_plainly_and_probes():
    controller = settled(0.2, 0.5)  # E(1) = 1.2 tokens for 1.5 forwards: a loss
    choices = [controller.next_gamma() for _ in range(60)]
    assert choices[:8] == [0] * 8 and choices[8] == 1  # eight plain steps, then a probe at the best γ > 0
    assert choices[9:25] == [0] * 16 and choices[25] == 1  # the probe did not pay: the next waits twice as long
    assert choices[26:58] == [0] * 32 and choices[58] == 1


def test_observed_steps_move_the_estimates():
    controller = GammaController(8)
    for _ in range(20):  # plain steps of 1.0 s, then steps of γ 4 verifying 5 tokens in 1.4 s, all accepted
        controller.observe(0, 1, 0, False, 0.0, 1.0)
    for _ in range(40):
        controller.observe(4, 5, 4, False, 0.2, 1.4)
    assert controller.forward_1 == pytest.approx(1.0)
    assert controller.slope == pytest.approx(0.1, rel=0.01)
    assert controller.draft_per_token == pytest.approx(0.05)
    assert controller.alpha > 0.98
    for _ in range(40):  # now every first draft is rejected
        controller.observe(4, 5, 0, True, 0.2, 1.4)
    assert controller.alpha < 0.1 and controller.next_gamma() == 0


def test_a_tree_that_verifies_more_nodes_per_gamma_costs_more():
    controller = GammaController(8)
    controller.observe(0, 1, 0, False, 0.0, 1.0)
    controller.observe(2, 9, 1, True, 0.0, 1.4)  # 8 nodes for γ 2
    assert controller.nodes_per_gamma > 1.0


def _adaptive(target, ids, kind, draft=None, options=None, max_new_tokens=48):
    settings = Settings(max_new_tokens=max_new_tokens, gamma=8, adaptive=True)
    generator = new_generator(target.device, 0)
    drafter = build_drafter(kind, settings, generator, target, draft, options)
    return list(generate(target, ids, settings, drafter, generator))


@pytest.mark.parametrize("prompt", ["w1 w2 w3 w4", "w5 w5 w5 w5 w5 w5 w9 w8 w7"])
@pytest.mark.parametrize("kind", ["same", "partial", "unrelated", "ngram", "history", "medusa"])
def test_adaptive_greedy_equals_plain(target, drafts, tokenizer, prompt, kind):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=48)))
    if kind in drafts:
        events = _adaptive(target, ids, "draft", drafts[kind])
    else:
        options = {"ngram_min": 3, "candidates": 4, "choice": "recent", "medusa": copying_heads(target)}
        events = _adaptive(target, ids, kind, options=options)
    assert generated_ids(events) == plain
    for e in events:
        assert 0 <= e.gamma <= 8 and len(e.proposed) <= max(e.gamma, 1)
        assert e.forward_tokens >= 1 + len(e.proposed)
        if e.gamma == 0:
            assert not e.proposed and e.forward_tokens == 1


def test_a_useless_draft_falls_back_to_plain_steps_and_probes(target, drafts, tokenizer):
    events = _adaptive(target, tokenizer.encode("w1 w2 w3 w4"), "draft", drafts["unrelated"], max_new_tokens=60)
    gammas = [e.gamma for e in events]
    assert gammas.count(0) > len(gammas) / 2, gammas
    assert any(g > 0 for g in gammas[10:]), gammas  # probes keep coming after the fall-back


def test_no_probe_where_even_drafts_that_all_held_would_lose():
    """A draft dearer than what its verify saves (llama.cpp's Q4 verify of 2 tokens costs 1.6 plain steps here, its
    0.5B draft 0.6), by costs measured on the device before the run: no acceptance could make it pay, so the
    controller never pays for a probe. Priced by costs the run learns, it goes on probing (the test above)."""
    controller = GammaController(8, draft_per_token=0.6, forward_1=1.0, curve={1: 1.0, 2: 1.6, 4: 2.9, 8: 5.0})
    assert not controller.could_pay()
    assert [controller.next_gamma() for _ in range(40)] == [0] * 40
    cheap = GammaController(8, draft_per_token=0.0, forward_1=1.0, curve={1: 1.0, 2: 1.6, 4: 2.9, 8: 5.0})
    assert cheap.could_pay()  # a lookup's drafts cost nothing: they pay where long runs of them hold


def test_a_block_drafter_verifies_as_far_as_its_positions_hold():
    """A block drafter pays one pass whatever γ: γ follows how far into the block its drafts hold, and the verify
    forward's cost, not a cost per drafted token."""
    halting = GammaController(15, block=True)
    whole = GammaController(15, block=True)
    for _ in range(30):  # one plain step's worth of V(1), then blocks: the first four positions hold, the fifth never
        halting.observe(0, 1, 0, False, 0.0, 1.0)
        halting.observe(8, 9, 4, True, 0.2, 1.4)
        whole.observe(0, 1, 0, False, 0.0, 1.0)
        whole.observe(15, 16, 15, False, 0.2, 1.75)  # every position held
    assert halting.held_chance(3) > 0.95 and halting.held_chance(4) < 0.1
    assert halting.next_gamma() == 4 and whole.next_gamma() == 15


class Clock:
    """The loop's clock, moved only by hand: whatever runs between two readings takes exactly what was added."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class SlowObserver(BaseDrafter):
    """Proposes the last token again, then spends 40 s (of the hand-moved clock) in observe: bookkeeping, not the
    verify forward."""

    def __init__(self, clock: Clock):
        self.clock = clock

    def propose(self, tokens, gamma):
        return Proposal(((tokens[-1],) * gamma,))

    def observe(self, verdict):
        self.clock.now += 40.0


def test_verify_time_is_the_forward_alone_and_adaptive_gamma_learns_the_rest_apart(target, monkeypatch):
    from specviz.engine import loop

    clock = Clock()  # the machine's speed plays no part: only observe moves time
    monkeypatch.setattr(loop, "make_clock", lambda device: clock)
    settings = Settings(max_new_tokens=6, gamma=2, adaptive=True)
    events = list(generate(target, [1, 2, 3], settings, SlowObserver(clock)))
    drafted = [e for e in events if e.proposed]
    assert drafted and all(e.verify_s == 0.0 and e.step_s - e.draft_s - e.verify_s == 40.0 for e in drafted)
    controller = GammaController(4)
    controller.observe(
        gamma=2, forward_tokens=3, accepted=1, rejected=True, draft_s=0.01, verify_s=0.1, bookkeeping_s=0.4
    )
    assert controller.bookkeeping == 0.4 and controller.verify_cost(3) == pytest.approx(0.1 + 0.4)


def test_a_copy_that_holds_in_runs_is_counted_by_position_and_drafted_long():
    """Six copies in ten fail at once, the other four hold for all ten tokens. Taken as i.i.d. draws (α ≈ 0.87) the
    best γ is about 8; counted by position (a_1 = 0.4, then every later token holds) it is the whole copy."""
    iid = GammaController(10, draft_per_token=0.0, forward_1=1.0, slope=0.1)
    copies = GammaController(10, draft_per_token=0.0, forward_1=1.0, slope=0.1, copies=True)
    for controller in (iid, copies):
        for _ in range(12):
            for held in (False, False, False, True, True):
                accepted = 10 if held else 0
                controller.observe(10, 11, accepted, not held, draft_s=0.0, verify_s=2.0)
    assert copies.next_gamma() == 10 and iid.next_gamma() < 10


def test_a_plain_step_timed_at_zero_seconds_leaves_adaptive_gamma_working():
    """Found by tests/test_properties.py: V(1) measured as 0 s made the next drafting step divide by it."""
    controller = GammaController(1)
    controller.observe(gamma=1, forward_tokens=1, accepted=0, rejected=False, draft_s=0.0, verify_s=0.0)
    controller.observe(gamma=1, forward_tokens=2, accepted=0, rejected=True, draft_s=0.0, verify_s=0.0)
    assert 0 <= controller.next_gamma() <= 1


def _copy_run(curve: dict, holds, steps: int = 40, priced: bool = True) -> list[int]:
    """The γ chosen at each step for a copy whose drafts hold `holds(step)` tokens deep, its verify taking what
    `curve` says; `priced`: the controller knows the curve (llama.cpp measures one), else it learns a slope."""
    from specviz.analysis.theory import interpolate

    controller = GammaController(10, forward_1=1.0, draft_per_token=0.0, curve=curve if priced else None, copies=True)
    chosen = []
    for step in range(steps):
        gamma = controller.next_gamma()
        chosen.append(gamma)
        if gamma:
            accepted = min(gamma, holds(step))
            controller.observe(gamma, 1 + gamma, accepted, accepted < gamma, 0.0, interpolate(curve, 1 + gamma))
        else:
            controller.observe(0, 1, 0, False, 0.0, 1.0)
    return chosen


def test_a_copy_on_a_dear_verify_drafts_as_deep_as_it_holds():
    """llama.cpp's Q4 verify here (about 0.6 of a forward per token verified): only long copies pay. A copy whose
    drafts all hold reaches γ at its second step; one that always breaks after two tokens stays at two, one that
    breaks after five at five, and a copy that never holds drafts nothing but a probe of one token now and then."""
    curve = {1: 1.0, 2: 1.7, 4: 3.0, 8: 5.5, 16: 8.5}
    long = _copy_run(curve, lambda step: 99)
    assert long[1:] == [10] * 39 and 0 < long[0] < 10  # the first, unmeasured, is short: a verify here is dear
    assert _copy_run(curve, lambda step: 2)[2:] == [2] * 38
    assert _copy_run(curve, lambda step: 5)[2:] == [5] * 38
    assert max(_copy_run(curve, lambda step: 0)[1:]) <= 1


@pytest.mark.parametrize("priced", [True, False])
def test_a_copy_whose_first_draft_failed_goes_on_at_the_ceiling_when_the_next_holds(priced):
    """AMX's bf16 verify (16 tokens for about 1.5 forwards): a document copied back starts with a token the prompt
    does not predict, then holds for the rest. That first failure says nothing of how far a copy goes on once it
    holds, so the next copies are drafted to γ at once instead of lengthening 5, 7, 9 as positions get tested."""
    curve = {1: 1.0, 2: 0.96, 3: 0.99, 4: 1.0, 5: 1.04, 12: 1.17, 17: 1.46, 25: 1.69, 33: 2.72}
    chosen = _copy_run(curve, lambda step: 0 if step == 0 else 99, steps=8, priced=priced)
    assert chosen == [10] * 8
