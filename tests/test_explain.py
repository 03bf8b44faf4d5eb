"""What the engine records to explain a step: every tested draft with the draw that decided it, and a bounded
view of p, q and the residual that agrees with the verdict and with the target's own distributions."""

import pytest
import torch
from laws import SiblingsDrafter

from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.engine.step_detail import TOP
from specviz.events import StepEvent
from specviz.settings import Settings


def run(target, ids, settings, drafter_kind="draft", draft=None, drafter=None):
    generator = new_generator(target.device, settings.seed)
    drafter = drafter or build_drafter(drafter_kind, settings, generator, target, draft)
    return list(generate(target, ids, settings, drafter, generator))


def target_probs(target, context):
    with torch.no_grad():
        return torch.softmax(target.model(torch.tensor([context])).logits[0, -1].float(), -1)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_a_sampled_chain_records_each_draw_and_the_residual(target, drafts, tokenizer, temperature):
    ids = tokenizer.encode("w1 w2 w3")
    events = run(
        target, ids, Settings(max_new_tokens=60, gamma=2, temperature=temperature, seed=2), draft=drafts["partial"]
    )
    drafted = [e for e in events if e.proposed]
    assert any(e.next_kind == "correction" for e in drafted) and any(e.next_kind == "bonus" for e in drafted)
    context = list(ids)
    for e in events:
        d = e.detail
        if not e.proposed:
            assert d is None
            context += list(e.tokens)
            continue
        assert d.rule == ("greedy" if temperature == 0 else "lossless")
        assert len(d.trials) == min(e.accepted + 1, len(e.proposed)) and len(d.leading) == e.accepted + 1
        for t in d.trials:  # tried in order; each decided by its own draw (sampling) or the argmax (greedy)
            assert t.token == e.proposed[t.depth - 1] and t.accepted == (t.depth <= e.accepted)
            if temperature:
                assert t.u is not None and t.accepted == (t.u * t.q < t.p)
            else:
                lead = d.leading[t.depth - 1]
                assert t.u is None and t.accepted == (max(zip(lead.p, lead.ids))[1] == t.token)
        for k, lead in enumerate(d.leading):
            assert len(lead.ids) <= 3 * TOP + 2 and len(lead.p) == len(lead.ids)
            emitted = e.tokens[k]
            assert emitted in lead.ids and (k >= len(e.proposed) or e.proposed[k] in lead.ids)
            exact = target_probs(target, context + list(e.tokens[:k]))  # p as the target alone gives it
            assert torch.allclose(torch.tensor(lead.p), exact[list(lead.ids)], atol=1e-4)
            assert (lead.q is not None) == (k < len(e.proposed))
        last = d.leading[-1]
        if temperature and e.next_kind == "correction":  # drawn from norm(max(0, p - q)), not from p
            assert last.r is not None and last.r[last.ids.index(e.next_token)] > 0
            rejected = last.ids.index(e.proposed[e.accepted])
            assert last.r[rejected] == pytest.approx(0.0, abs=1e-6) or last.p[rejected] > last.q[rejected]
            for pr, qr, rr in zip(last.p, last.q, last.r):  # zero where q covered p, else proportional to p - q
                assert (rr == 0) == (pr <= qr + 1e-7) or abs(pr - qr) < 1e-6
        else:
            assert last.r is None
        context += list(e.tokens)


def test_a_tree_step_records_the_siblings_in_the_order_tried(small_vocab):
    target, tok = small_vocab
    events = run(
        target,
        tok.encode("a b a b a"),
        Settings(max_new_tokens=12, gamma=2, temperature=1.0, seed=4),
        drafter=SiblingsDrafter(tok),
    )
    tree_steps = [e for e in events if e.candidates]
    assert tree_steps
    for e in tree_steps:
        trials = e.detail.trials
        depth1 = [t for t in trials if t.depth == 1]
        firsts = list(dict.fromkeys(c[0] for c in e.candidates))  # the root's children, in the trie's order
        assert [t.token for t in depth1] == firsts[: len(depth1)]  # tried in turn...
        assert not any(t.accepted for t in depth1[:-1])  # ...until one is accepted
        assert depth1[-1].accepted or len(depth1) == len(firsts)
        assert all(t.q == 1.0 and t.accepted == (t.u < t.p) for t in trials)  # q is a point mass
        if not any(t.accepted for t in depth1):  # every sibling rejected: the token came from what they left
            assert e.detail.leading[-1].r is not None
            for t in depth1:
                assert e.detail.leading[-1].r[e.detail.leading[-1].ids.index(t.token)] == 0.0


def test_typical_acceptance_records_its_bar(small_vocab):
    target, tok = small_vocab
    events = run(
        target,
        tok.encode("a b a b a"),
        Settings(max_new_tokens=12, gamma=2, temperature=1.0, seed=4, acceptance="typical"),
        drafter=SiblingsDrafter(tok),
    )
    trials = [t for e in events if e.detail for t in e.detail.trials]
    assert trials and all(t.bar is not None and t.u is None for t in trials)
    assert all(t.p > t.bar for t in trials if t.accepted)
    assert all(e.detail.rule == "typical" for e in events if e.detail)


def test_events_with_details_survive_json(target, drafts, tokenizer):
    events = run(
        target,
        tokenizer.encode("w1 w2 w3"),
        Settings(max_new_tokens=20, gamma=3, temperature=1.0, seed=1),
        draft=drafts["partial"],
    )
    events += run(target, tokenizer.encode("w5 w5 w5 w5 w9 w5 w5"), Settings(max_new_tokens=20, gamma=3), "history")
    for e in events:
        assert StepEvent.from_json(e.to_json()) == e


@pytest.fixture(scope="module")
def small_vocab():
    from tiny import loaded, tiny_llama, word_tokenizer

    tok = word_tokenizer(["a", "b", "c", "d", "e", "f"])
    model = tiny_llama(len(tok), seed=11, sharpness=0.1)
    return loaded(model, tok), tok
