"""Lookup drafters (n-gram prompt lookup, history lookup): what they propose, and that the target's
greedy output comes out unchanged through tree verification."""

import random

import pytest

from specviz.drafters.history import HistoryDrafter
from specviz.drafters.ngram import NgramDrafter
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix_index import KEY_LENGTH, MATCH_CAP
from specviz.engine import generate
from specviz.events import generated_ids
from specviz.settings import Settings

# heavy repetition, a repeated phrase, no repetition at all, a single token
PROMPTS = ["w5 w5 w5 w5 w5 w5 w9 w8 w7", "w1 w2 w3 w4 w1 w2 w3 w4 w1 w2", "w33 w12 w40 w2 w51 w7", "w10"]


def test_ngram_proposes_what_followed_the_most_recent_longest_match():
    def first(seq, gamma, shortest=1):  # a fresh run each time: the drafter indexes one growing text per start()
        return NgramDrafter(shortest).propose(seq, gamma)

    seq = [1, 2, 3, 9, 1, 2, 3, 8, 5, 1, 2, 3]
    assert first(seq, 2).candidates == ((8, 5),)  # "1 2 3" twice: the most recent wins the tie
    assert first([1, 2, 3, 7, 2, 3], 3).candidates == ((7, 2, 3),)  # the longest match is "2 3"
    assert first([4, 5, 6], 3) is None  # nothing matched: a plain step
    assert first([4, 9, 9], 5).candidates == ((9,),)  # only what exists is proposed
    assert first([7, 1, 8, 9, 6, 1], 8).candidates == ((8, 9, 6, 1),)  # a one-token match copies up to γ
    assert first([1, 2, 3, 4, 5, 6, 7, 1, 2, 3], 8).candidates == ((4, 5, 6, 7, 1, 2, 3),)  # as far as the text goes
    assert first([1, 2, 3, 4, 5, 6, 7, 1, 2, 3], 4).candidates == ((4, 5, 6, 7),)  # γ caps it
    long = [5, 1, 2, 3, 4, 5, 6, 9, 0, 1, 2, 3, 4, 5, 6]  # a 6-token match, past the index's 4-grams
    assert first(long, 8).candidates == ((9, 0, 1, 2, 3, 4, 5, 6),)
    assert first([1, 2, 3, 7, 2, 3], 3, shortest=3) is None  # the longest match is shorter than asked for
    assert first([1, 2, 3, 7, 1, 2, 3], 3, shortest=3).candidates == ((7, 1, 2),)


def test_ngram_says_where_its_draft_came_from():
    d = NgramDrafter()
    d.start([1, 2, 3, 4])
    assert d.propose([1, 2, 3, 4, 2], 2).source.origin == "the prompt"  # "2" followed by "3" in the prompt
    assert d.propose([1, 2, 3, 4, 2, 5, 9, 5], 2).source.origin == "this output"  # "5" followed by "9" in the output


def matches(text, shortest=1, cap=MATCH_CAP):
    """By brute force: (the longest match, every earlier end where the text's end matches that long). An end needs a
    token after it, and a match counts at most `cap` tokens."""
    found = {}
    for end in range(1, len(text)):
        length = 0
        while length < min(cap, end) and text[end - 1 - length] == text[-1 - length]:
            length += 1
        if length:
            found[end] = length
    longest = max(found.values(), default=0)
    return (longest, sorted(e for e, n in found.items() if n == longest)) if longest >= shortest else (0, [])


def scan_ngram(text, gamma, shortest=1):
    """The definition: the longest match's most recent occurrence, continued γ deep (as far as the text goes)."""
    longest, ends = matches(text, shortest)
    if not ends:
        return None
    return text[ends[-1] : ends[-1] + gamma]


def scan_history(output, m, gamma):
    found = []
    for i in range(len(output) - 2, -1, -1):
        follow = output[i + 1 : i + 1 + gamma]
        if output[i] == output[-1] and follow not in found:
            found.append(follow)
    return found[:m] or None


@pytest.mark.parametrize("alphabet", [2, 3, 6])
def test_lookup_indexes_follow_a_growing_text_like_a_full_scan(alphabet):
    rng = random.Random(alphabet)
    text = [rng.randrange(alphabet) for _ in range(300)] + [1] * 80 + [rng.randrange(alphabet) for _ in range(60)]
    shortest = rng.choice([1, 2, 3])
    ngram, history = NgramDrafter(shortest), HistoryDrafter(m=4)
    ngram.start(text[:20]), history.start(text[:20])
    lengths = set()
    for end in range(20, len(text), 3):  # one drafter, step after step, as the engine calls it
        gamma = rng.randrange(1, 9)
        a, b = ngram.propose(text[:end], gamma), scan_ngram(text[:end], gamma, shortest)
        assert (None if a is None else list(a.candidates[0])) == b, end
        lengths.add(matches(text[:end])[0])
        h = history.propose(text[:end], 4)
        assert (None if h is None else [list(c) for c in h.candidates]) == scan_history(text[20:end], 4, 4)
    # matches shorter than the index's longest keys, longer ones (extended backwards), and ones beyond the cap
    assert min(lengths) < KEY_LENGTH and any(KEY_LENGTH < n < MATCH_CAP for n in lengths) and MATCH_CAP in lengths


def test_the_index_forgets_a_text_it_was_not_given():
    """A text that parts from the indexed one (a drafter reused without start()) is indexed from where they part."""
    rng = random.Random(7)
    d = NgramDrafter()
    for _ in range(30):
        text = [rng.randrange(4) for _ in range(rng.randrange(1, 60))]
        for end in range(1, len(text) + 1, 5):
            a = d.propose(text[:end], 5)
            assert (None if a is None else list(a.candidates[0])) == scan_ngram(text[:end], 5), (text, end)


def test_history_candidates_come_from_earlier_occurrences_of_the_last_token_in_the_output():
    d = HistoryDrafter(m=3)
    d.start([7, 7, 7])  # prompt: never searched
    out = [4, 1, 5, 4, 2, 6, 4, 1, 5, 9, 4]
    proposal = d.propose([7, 7, 7] + out, 3)
    assert proposal.q is None and proposal.candidates == ((1, 5, 9), (2, 6, 4), (1, 5, 4))  # most recent first
    assert proposal.source.origin == "this output"
    assert HistoryDrafter(m=1).propose(out, 2).candidates == ((1, 5),)
    d.start([])
    assert d.propose([3, 4], 3) is None  # the last token never occurred before


def test_history_random_choice_is_seeded():
    out = [1, 2, 1, 3, 1, 4, 1, 5, 1, 6, 1]
    a = HistoryDrafter(m=2, choice="random", seed=1).propose(out, 1).candidates
    b = HistoryDrafter(m=2, choice="random", seed=1).propose(out, 1).candidates
    assert a == b and len(a) == 2 and all(c[0] in (2, 3, 4, 5, 6) for c in a)


OPTIONS = [("ngram", {"ngram_min": n}) for n in (1, 2, 3)] + [
    ("history", {"candidates": m, "choice": choice}) for m in (1, 2, 3, 4) for choice in ("recent", "random")
]


# Each drafter meets every γ from 1 to 8 over the four prompts, two on each.
GAMMAS = {prompt: (i + 1, i + 5) for i, prompt in enumerate(PROMPTS)}


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("kind, options", OPTIONS, ids=[f"{k}-{'-'.join(map(str, o.values()))}" for k, o in OPTIONS])
def test_lookup_greedy_equals_plain(target, tokenizer, prompt, kind, options):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    for gamma in GAMMAS[prompt]:
        settings = Settings(max_new_tokens=40, gamma=gamma)
        events = list(generate(target, ids, settings, build_drafter(kind, settings, None, target, None, options)))
        assert generated_ids(events) == plain, f"gamma={gamma}"


def test_history_steps_carry_their_candidates_and_the_winner(target, tokenizer):
    settings = Settings(max_new_tokens=60, gamma=4)
    ids = tokenizer.encode(PROMPTS[0])
    events = list(
        generate(target, ids, settings, build_drafter("history", settings, None, target, None, {"candidates": 4}))
    )
    trees = [e for e in events if e.candidates]
    assert trees, "the tiny target repeats itself, so history lookup must find several candidates"
    for e in trees:
        assert len(e.candidates) > 1 and e.proposed == e.candidates[e.winner]
        assert e.accepted <= len(e.proposed) and e.q is None and len(e.p) == len(e.proposed)
        assert "candidates" in e.to_json() and e.to_json()["winner"] == e.winner
    assert sum(e.accepted for e in events) > 0
