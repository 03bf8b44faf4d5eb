"""Greedy speculative decoding must reproduce plain greedy decoding token for token (fp32)."""

import threading

import pytest

from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.events import generated_ids, summarize
from specviz.settings import Settings

PROMPTS = ["w1 w2 w3 w4", "w10", "w5 w5 w5 w5 w5 w5 w9 w8 w7", "w33 w12 w40 w2 w2 w51"]


def stream(target, prompt_ids, settings, draft=None, stop=None):
    generator = new_generator(target.device, settings.seed)
    drafter = build_drafter("draft" if draft else "none", settings, generator, target, draft)
    return generate(target, prompt_ids, settings, drafter, generator, stop)


def run(target, prompt_ids, settings, draft=None):
    return list(stream(target, prompt_ids, settings, draft))


# Each draft meets every γ from 1 to 8 over the four prompts (a γ on each prompt that no other prompt takes), so a
# rollback of every length and every cut of a verify meets every kind of agreement.
GAMMAS = {PROMPTS[0]: (1, 4, 7), PROMPTS[1]: (2, 5, 8), PROMPTS[2]: (3, 6), PROMPTS[3]: (1, 3, 8)}


@pytest.mark.parametrize("kind", ["same", "unrelated", "partial", "int8"])
@pytest.mark.parametrize("prompt", PROMPTS)
def test_speculative_greedy_equals_plain(target, drafts, tokenizer, kind, prompt):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(run(target, ids, Settings(max_new_tokens=32)))
    assert len(plain) == 32
    for gamma in GAMMAS[prompt]:
        events = run(target, ids, Settings(max_new_tokens=32, gamma=gamma), drafts[kind])
        assert generated_ids(events) == plain, f"gamma={gamma}"


def test_acceptance_follows_the_draft(target, drafts, tokenizer):
    ids = tokenizer.encode(PROMPTS[0])
    same = summarize(run(target, ids, Settings(max_new_tokens=40, gamma=4), drafts["same"]))
    assert same.acceptance_rate == 1.0 and same.mean_tokens_per_step == 5.0
    assert same.target_forwards == 8 and same.draft_forwards == 32
    unrelated = summarize(run(target, ids, Settings(max_new_tokens=40, gamma=4), drafts["unrelated"]))
    partial = summarize(run(target, ids, Settings(max_new_tokens=40, gamma=4), drafts["partial"]))
    assert unrelated.acceptance_rate < partial.acceptance_rate < 1.0
    int8 = summarize(run(target, ids, Settings(max_new_tokens=40, gamma=4), drafts["int8"]))
    assert unrelated.acceptance_rate < int8.acceptance_rate < 1.0  # int8 weights: mostly the partial draft's guesses


@pytest.mark.parametrize("kind", ["same", "partial", None])
def test_event_invariants(target, drafts, tokenizer, kind):
    ids = tokenizer.encode(PROMPTS[1])
    events = run(target, ids, Settings(max_new_tokens=30, gamma=3), drafts[kind] if kind else None)
    out = generated_ids(events)
    assert tokenizer.decode(out) == " ".join(tokenizer.decode([t]) for e in events for t in e.tokens)
    assert [e.index for e in events] == list(range(len(events)))
    assert [e.finish for e in events] == [None] * (len(events) - 1) + ["length"]
    assert events[0].prefill_s > 0 and all(e.prefill_s == 0 for e in events[1:])
    for e in events:
        assert e.accepted <= len(e.proposed) <= 3 and len(e.p) == len(e.proposed)
        assert e.next_token is not None and e.step_s >= e.draft_s + e.verify_s > 0
        assert e.next_kind == (
            "plain" if not e.proposed else "bonus" if e.accepted == len(e.proposed) else "correction"
        )
        if not e.proposed:  # plain decoding, or the last step of the budget
            assert e.q is None and e.draft_forwards == 0
        else:
            assert len(e.q) == len(e.proposed) and e.draft_forwards == len(e.proposed)
    if kind is not None:
        assert any(e.proposed for e in events)


def test_eos_stops_both_ways_at_the_same_token(target, drafts, tokenizer):
    ids = tokenizer.encode(PROMPTS[0])
    plain = generated_ids(run(target, ids, Settings(max_new_tokens=40)))
    eos = plain[9]  # pretend a token the run produces is EOS
    saved = target.model.generation_config.eos_token_id
    target.model.generation_config.eos_token_id = [saved, eos]
    try:
        expected = plain[: plain.index(eos) + 1]
        for kind in ("same", "partial"):
            for gamma in (1, 4, 7):
                events = run(target, ids, Settings(max_new_tokens=40, gamma=gamma), drafts[kind])
                assert generated_ids(events) == expected and events[-1].finish == "eos"
        events = run(target, ids, Settings(max_new_tokens=40))
        assert generated_ids(events) == expected and events[-1].finish == "eos"
    finally:
        target.model.generation_config.eos_token_id = saved


def test_stop_request_halts_within_one_step(target, drafts, tokenizer):
    stop = threading.Event()
    events = []
    for event in stream(
        target, tokenizer.encode(PROMPTS[0]), Settings(max_new_tokens=100, gamma=3), drafts["partial"], stop
    ):
        events.append(event)
        stop.set()
    assert len(events) == 1 and events[0].finish is None


def test_generation_stops_at_the_context_end(target, tokenizer):
    context = target.context_length
    ids = tokenizer.encode(" ".join(["w3"] * (context - 5)))
    events = run(target, ids, Settings(max_new_tokens=50, gamma=4), target)
    assert len(generated_ids(events)) == 5 and events[-1].finish == "length"


def test_a_draft_cut_at_an_accepted_eos_records_no_correction_and_no_bonus():
    """Nothing after an accepted EOS is emitted or tested: the step has no token of the target's own, and a later
    rejection in the uncut draft is no rejection of the run."""
    from specviz.analysis.theory import per_token_alpha
    from specviz.engine.loop import Checked, _event
    from specviz.engine.step import Verdict
    from specviz.engine.tree import build_tree
    from specviz.events import StepDetail

    tree = build_tree([(5, 2, 7, 8)])  # token 2 is EOS
    for path in ((0, 1, 2), (0, 1, 2, 3)):  # a later draft rejected (a "correction" follows), or all kept (a "bonus")
        verdict = Verdict(path=path, next_token=9, p=(0.9, 0.8, 0.7, 0.6))
        event = _event(0, Checked(None, tree, verdict, StepDetail("greedy", (), ())), eos={2}, room=100)
        assert event.tokens == (5, 2) and event.next_token is None and event.finish == "eos"
        assert event.next_kind == "end" and per_token_alpha([event]) == 1.0, path
