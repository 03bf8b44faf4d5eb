"""Lookup drafters (n-gram prompt lookup, history lookup): what they propose, and that the target's
greedy output comes out unchanged through tree verification."""

import pytest

from specviz.drafters.history import HistoryDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.registry import build_drafter
from specviz.engine import generate
from specviz.events import generated_ids
from specviz.settings import Settings

# heavy repetition, a repeated phrase, no repetition at all, a single token
PROMPTS = ["w5 w5 w5 w5 w5 w5 w9 w8 w7", "w1 w2 w3 w4 w1 w2 w3 w4 w1 w2", "w33 w12 w40 w2 w51 w7", "w10"]


def test_ngram_proposes_what_followed_the_most_recent_longest_match():
    def first(seq, gamma):  # a fresh run each time: the drafter indexes one growing text per start()
        return NgramDrafter(max_n=3).propose(seq, gamma)

    seq = [1, 2, 3, 9, 1, 2, 3, 8, 5, 1, 2, 3]
    assert first(seq, 2).candidates == ((8, 5),)  # "1 2 3" last seen before 8 5
    assert first([1, 2, 3, 7, 2, 3], 3).candidates == ((7, 2, 3),)  # falls back to n = 2
    assert first([4, 5, 6], 3) is None  # nothing matched: a plain step
    assert first([4, 9, 9], 5).candidates == ((9,),)  # n = 1; only what exists is proposed


def scan_ngram(tokens, max_n, gamma):
    """The definition, by brute force: the longest suffix's most recent earlier match, with a token after it."""
    for n in range(min(max_n, len(tokens) - 1), 0, -1):
        for start in range(len(tokens) - n - 1, -1, -1):
            if tokens[start : start + n] == tokens[-n:]:
                return tokens[start + n : start + n + gamma]
    return None


def scan_history(output, m, gamma):
    found = []
    for i in range(len(output) - 2, -1, -1):
        follow = output[i + 1 : i + 1 + gamma]
        if output[i] == output[-1] and follow not in found:
            found.append(follow)
    return found[:m] or None


def test_lookup_indexes_follow_a_growing_text_like_a_full_scan():
    import random

    rng = random.Random(0)
    text = [rng.randrange(6) for _ in range(300)]
    ngram, history = NgramDrafter(max_n=3), HistoryDrafter(m=4)
    ngram.start(text[:20]), history.start(text[:20])
    for end in range(20, 300, 3):  # one drafter, step after step, as the engine calls it
        a, b = ngram.propose(text[:end], 4), scan_ngram(text[:end], 3, 4)
        assert (None if a is None else list(a.candidates[0])) == b
        h = history.propose(text[:end], 4)
        assert (None if h is None else [list(c) for c in h.candidates]) == scan_history(text[20:end], 4, 4)


def test_history_candidates_come_from_earlier_occurrences_of_the_last_token_in_the_output():
    d = HistoryDrafter(m=3)
    d.start([7, 7, 7])  # prompt: never searched
    out = [4, 1, 5, 4, 2, 6, 4, 1, 5, 9, 4]
    proposal = d.propose([7, 7, 7] + out, 3)
    assert proposal.q is None and proposal.candidates == ((1, 5, 9), (2, 6, 4), (1, 5, 4))  # most recent first
    assert HistoryDrafter(m=1).propose(out, 2).candidates == ((1, 5),)
    d.start([])
    assert d.propose([3, 4], 3) is None  # the last token never occurred before


def test_history_random_choice_is_seeded():
    out = [1, 2, 1, 3, 1, 4, 1, 5, 1, 6, 1]
    a = HistoryDrafter(m=2, choice="random", seed=1).propose(out, 1).candidates
    b = HistoryDrafter(m=2, choice="random", seed=1).propose(out, 1).candidates
    assert a == b and len(a) == 2 and all(c[0] in (2, 3, 4, 5, 6) for c in a)


OPTIONS = [("ngram", {"ngram_max": n}) for n in (1, 2, 3)] + [
    ("history", {"candidates": m, "choice": choice}) for m in (1, 2, 3, 4) for choice in ("recent", "random")]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("kind, options", OPTIONS, ids=[f"{k}-{'-'.join(map(str, o.values()))}" for k, o in OPTIONS])
def test_lookup_greedy_equals_plain(target, tokenizer, prompt, kind, options):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    for gamma in range(1, 9):
        settings = Settings(max_new_tokens=40, gamma=gamma)
        events = list(generate(target, ids, settings, build_drafter(kind, settings, None, target, None, options)))
        assert generated_ids(events) == plain, f"gamma={gamma}"


def test_history_steps_carry_their_candidates_and_the_winner(target, tokenizer):
    settings = Settings(max_new_tokens=60, gamma=4)
    ids = tokenizer.encode(PROMPTS[0])
    events = list(generate(target, ids, settings, build_drafter("history", settings, None, target, None, {"candidates": 4})))
    trees = [e for e in events if e.candidates]
    assert trees, "the tiny target repeats itself, so history lookup must find several candidates"
    for e in trees:
        assert len(e.candidates) > 1 and e.proposed == e.candidates[e.winner]
        assert e.accepted <= len(e.proposed) and e.q is None and len(e.p) == len(e.proposed)
        assert "candidates" in e.to_json() and e.to_json()["winner"] == e.winner
    assert sum(e.accepted for e in events) > 0
