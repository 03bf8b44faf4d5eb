"""Suffix decoding: the shared lookup index against brute force, the tree of frequent continuations, the memory of
earlier runs (bounded, committed tokens only, one per caller), and that the target's output is unchanged: greedy token
for token, sampled in distribution."""

import math
import random
from collections import Counter

import pytest
from laws import REFUSED

import specviz.engine.verify as verify
from specviz.drafters.registry import build_drafter
from specviz.drafters.suffix import SuffixDrafter
from specviz.drafters.suffix_index import (
    EARLIER,
    KEY_LENGTH,
    MATCH_CAP,
    OUTPUT,
    PROMPT,
    RunMemory,
    best_chain,
    draft_depth,
    frequent_tree,
    longest_match,
)
from specviz.engine import generate
from specviz.engine.step import Verdict
from specviz.engine.tree import build_tree
from specviz.events import generated_ids, summarize
from specviz.runs import generate_named
from specviz.settings import Settings

PROMPTS = ["w5 w5 w5 w5 w5 w5 w9 w8 w7", "w1 w2 w3 w4 w1 w2 w3 w4 w1 w2", "w33 w12 w40 w2 w51 w7", "w10"]


# --- the index, by brute force -------------------------------------------------------------------------------------


def brute_occurrences(own, others):
    """Every (serial, end, length, origin) of the longest match of the end of own's text, by scanning every document.
    A document is (serial, tokens, prompt length); an end needs a token after it; a match counts MATCH_CAP at most."""
    text, found = own[1], []
    for serial, tokens, prompt_length in [*others, own]:
        for end in range(1, len(tokens)):
            length = 0
            while length < min(MATCH_CAP, end, len(text)) and tokens[end - 1 - length] == text[-1 - length]:
                length += 1
            origin = EARLIER if serial != own[0] else PROMPT if end < prompt_length else OUTPUT
            if length:
                found.append((serial, end, length, origin))
    longest = max((f[2] for f in found), default=0)
    return [f for f in found if f[2] == longest]


def brute_tree(occurrences, tokens_of, depth, budget):
    """The full trie of continuations with counts and each node's most recent occurrence; its `budget` best nodes
    (more occurrences, then shallower, then more recent); their leaves, depth first, best child first."""
    count, newest = Counter(), {}
    for serial, end, _, origin in occurrences:
        follow = tokens_of[serial][end : end + depth]
        for k in range(1, len(follow) + 1):
            path = tuple(follow[:k])
            count[path] += 1
            newest[path] = max(newest.get(path, (-1, -1, "")), (serial, end, origin))
    ranked = sorted(count, key=lambda p: (-count[p], len(p), -newest[p][0], -newest[p][1]))
    chosen = ranked[:budget]
    assert all(p[:-1] in chosen or len(p) == 1 for p in chosen)  # best-first never picks a child before its parent
    order = {p: i for i, p in enumerate(chosen)}
    leaves = [p for p in chosen if not any(q[:-1] == p for q in chosen)]
    leaves.sort(key=lambda leaf: [order[leaf[:k]] for k in range(1, len(leaf) + 1)])
    return leaves, (newest[leaves[0]][2] if leaves else ""), len(count)


def test_the_index_finds_what_a_full_scan_finds():
    seen_lengths, trees = set(), 0
    for alphabet in (2, 3, 5):  # long matches, then shorter ones
        lengths, found_trees = compare_with_a_full_scan(random.Random(alphabet), alphabet)
        seen_lengths |= lengths
        trees += found_trees
    # matches shorter than the index's longest keys, longer ones (extended backwards), ones beyond the cap; real trees
    assert min(seen_lengths) < KEY_LENGTH < max(seen_lengths) and MATCH_CAP in seen_lengths and trees > 10


def compare_with_a_full_scan(rng, alphabet):
    """Earlier runs in a memory and a growing text; after each growth, the index's answers against brute force."""
    memory, tokens_of, docs = RunMemory(max_runs=3), {}, []
    for i in range(5):  # five earlier runs: the oldest two are evicted
        prompt = [rng.randrange(alphabet) for _ in range(rng.randrange(1, 30))]
        run = memory.begin(prompt)
        run.extend([rng.randrange(alphabet) for _ in range(150 if i == 4 else rng.randrange(0, 90))])
        tokens_of[run.serial] = run.tokens
        docs.append((run.serial, run.tokens, run.prompt_length))
    prompt = docs[4][1][60:70]  # a prompt found whole deep inside an earlier run: a match as long as the text
    own = memory.begin(prompt)
    assert [r.serial for r in memory.runs] == [2, 3, 4, 5]
    tokens_of[own.serial] = own.tokens
    text, seen_lengths, trees, copied_once, limit = list(prompt), set(), 0, False, 3
    while True:
        found = longest_match(own, memory.earlier(own, limit))
        expected = brute_occurrences((own.serial, text, len(prompt)), docs[5 - limit :] if limit else [])
        assert sorted((o.document.serial, o.end, o.length, o.origin) for o in found) == sorted(expected)
        if found:
            longest = found[0].length
            seen_lengths.add(longest)
            gamma, factor, budget = rng.randrange(1, 12), rng.choice([0.5, 1, 2, 3]), rng.randrange(1, 20)
            depth = draft_depth(longest, factor, gamma)
            assert depth == min(gamma, math.ceil(factor * longest))
            chain, origin = best_chain(found, depth)
            newest = max(expected, key=lambda f: (f[0], f[1]))
            assert (list(chain), origin) == (tokens_of[newest[0]][newest[1] : newest[1] + depth], newest[3])
            candidates, origin = frequent_tree(found, depth, budget)
            leaves, first_origin, trie_size = brute_tree(expected, tokens_of, depth, budget)
            assert (candidates, origin) == (tuple(leaves), first_origin)
            assert len(build_tree(candidates).tokens) == min(budget, trie_size)  # the budget, or the whole trie
            assert all(len(c) <= depth for c in candidates)
            trees += len(candidates) > 1
        if len(text) >= 260:
            return seen_lengths, trees
        text += [rng.randrange(alphabet) for _ in range(rng.randrange(1, 4))]
        if rng.random() < 0.2:  # now and then a long copy of an earlier run
            source = rng.choice(docs[2:])[1]
            start = rng.randrange(len(source))
            text += source[start : start + rng.randrange(5, 80)]
        copied = len(text) >= 130 and not copied_once  # once, a copy longer than any match counts
        if copied:
            text += docs[4][1][:100]
            copied_once = True
        own.follow(text)
        limit = 3 if copied else rng.randrange(0, 4)


def test_a_tree_is_picked_best_first_by_how_often_each_continuation_followed():
    memory = RunMemory()
    for follow in ([5, 6, 7], [5, 6, 8], [5, 6, 7], [5, 9], [4]):
        memory.begin([1, 2, 3]).extend(follow)
    own = memory.begin([1, 2, 3])
    found = longest_match(own, memory.earlier(own, 16))
    assert {o.length for o in found} == {3} and len(found) == 5
    # 5 (4 of 5 runs), 5 6 (3 of 5), 5 6 7 (2 of 5), then those seen once, shallower first: 4, 5 9, 5 6 8
    assert frequent_tree(found, 3, 2) == (((5, 6),), EARLIER)
    assert frequent_tree(found, 3, 3) == (((5, 6, 7),), EARLIER)
    assert frequent_tree(found, 3, 4) == (((5, 6, 7), (4,)), EARLIER)
    assert frequent_tree(found, 3, 5) == (((5, 6, 7), (5, 9), (4,)), EARLIER)
    assert frequent_tree(found, 3, 9) == (((5, 6, 7), (5, 6, 8), (5, 9), (4,)), EARLIER)  # the whole trie: 6 nodes
    assert frequent_tree(found, 1, 7) == (((5,), (4,)), EARLIER)  # no deeper than asked


def test_draft_depth_grows_with_the_match():
    assert [draft_depth(n, 2, 8) for n in (1, 2, 3, 4, 9)] == [2, 4, 6, 8, 8]
    assert [draft_depth(n, 0.5, 64) for n in (1, 2, 3)] == [1, 1, 2]


# --- the memory ----------------------------------------------------------------------------------------------------


def test_the_memory_keeps_the_most_recent_runs_and_evicts_the_oldest():
    memory = RunMemory(max_runs=2)
    runs = [memory.begin([10 * i + 1, 10 * i + 2]) for i in range(4)]
    for i, run in enumerate(runs):
        run.extend([10 * i + 3])
    assert list(memory.runs) == runs[1:]  # two earlier runs beside the newest
    drafter = SuffixDrafter(memory=memory, runs=16)
    drafter.start([])  # a fifth run: the second one goes
    assert list(memory.runs) == [*runs[2:], drafter.run]
    for i in range(4):
        proposal = drafter.propose([10 * i + 1], 4)
        assert (proposal is None) == (i < 2), i
        if proposal:
            assert proposal.candidates == ((10 * i + 2, 10 * i + 3),) and proposal.source.origin == EARLIER


def test_a_drafter_searches_only_as_many_earlier_runs_as_asked():
    memory = RunMemory()
    for follow in (7, 8, 9):
        memory.begin([1, 2]).extend([follow])
    drafter = SuffixDrafter(memory=memory)
    drafter.start([1, 2])
    drafted = {}
    for runs in (0, 1, 3):
        drafter.runs = runs
        proposal = drafter.propose([1, 2], 4)
        drafted[runs] = proposal and set(proposal.candidates)
    assert drafted == {0: None, 1: {(9,)}, 3: {(7,), (8,), (9,)}}


def test_a_short_match_verifies_few_tokens_and_a_long_one_many():
    memory = RunMemory()
    for follow in range(10, 20):  # ten earlier runs: "1 2" then ten different continuations of 3 tokens
        memory.begin([1, 2]).extend([follow, follow + 10, follow + 20])
    drafter = SuffixDrafter(memory=memory, depth_per_token=2, nodes=16)
    drafter.start([5, 2])
    short = drafter.propose([5, 2], 8)  # matches "2" only: 2 tokens' worth of tree
    assert len(build_tree(short.candidates).tokens) == 2 and max(map(len, short.candidates)) <= 2
    drafter.start([1, 2])
    long = drafter.propose([1, 2], 8)  # matches "1 2": up to 4 tokens
    assert len(build_tree(long.candidates).tokens) == 4
    drafter.nodes = 3  # the node budget caps what the match length allows
    assert len(build_tree(drafter.propose([1, 2], 8).candidates).tokens) == 3


class Watched:
    """A drafter whose proposals are kept, to see what it sent and where from."""

    def __init__(self, drafter):
        self.drafter, self.proposals = drafter, []

    def __getattr__(self, name):
        return getattr(self.drafter, name)

    def propose(self, tokens, gamma):
        proposal = self.drafter.propose(tokens, gamma)
        if proposal is not None:
            self.proposals.append(proposal)
        return proposal


def run_suffix(target, ids, settings, memory=None, options=None):
    drafter = Watched(build_drafter("suffix", settings, None, target, None, options, memory))
    return list(generate(target, ids, settings, drafter)), drafter


def test_only_committed_tokens_enter_the_memory():
    memory = RunMemory()
    memory.begin([1, 2, 3]).extend([4, 5, 6])
    drafter = SuffixDrafter(memory=memory)
    drafter.start([1, 2, 3])
    assert drafter.propose([1, 2, 3], 3).candidates == ((4, 5, 6),)
    drafter.observe(Verdict(path=(0,), next_token=9))  # 4 held, 5 was rejected, the target wrote 9
    assert drafter.run.tokens == [1, 2, 3, 4, 9]
    assert drafter.propose([1, 2, 3, 4, 9], 3) is None  # "9" never occurred before
    assert drafter.run.tokens == [1, 2, 3, 4, 9]

    memory = RunMemory()
    memory.begin([1, 2, 3]).extend([4, 5, 6])
    drafter = SuffixDrafter(memory=memory, eos_ids=[5])
    drafter.start([1, 2, 3])
    assert drafter.propose([1, 2, 3], 3).candidates == ((4, 5, 6),)
    drafter.observe(Verdict(path=(0, 1, 2), next_token=8))  # all held, but 5 is EOS: the run ends there
    assert drafter.run.tokens == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_memory_holds_each_run_exactly_as_emitted(target, tokenizer, temperature):
    memory = RunMemory()
    ids = tokenizer.encode(PROMPTS[1])
    rejected = 0
    for seed in range(3):
        settings = Settings(max_new_tokens=40, gamma=5, temperature=temperature, seed=seed)
        events, _ = run_suffix(target, ids, settings, memory)
        rejected += sum(e.accepted < len(e.proposed) for e in events)
        assert memory.runs[-1].tokens == ids + generated_ids(events)
    assert rejected > 0  # drafts were turned down, and none of them stayed


def test_a_run_cut_by_an_accepted_eos_ends_there_in_the_memory(target, tokenizer):
    ids = tokenizer.encode(PROMPTS[0])
    memory = RunMemory()
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    run_suffix(target, ids, Settings(max_new_tokens=40, gamma=8), memory)  # a copy that runs past the EOS below
    saved = target.model.generation_config.eos_token_id
    target.model.generation_config.eos_token_id = [saved, plain[12]]
    try:
        events, _ = run_suffix(target, ids, Settings(max_new_tokens=40, gamma=8), memory)
    finally:
        target.model.generation_config.eos_token_id = saved
    out = generated_ids(events)
    assert out == plain[: plain.index(plain[12]) + 1] and events[-1].finish == "eos"
    assert any(e.accepted and e.proposed[e.accepted - 1] == plain[12] for e in events)  # a draft ended the run
    assert memory.runs[-1].tokens == ids + out


def test_two_memories_never_share_text(target, tokenizer):
    ours, theirs = RunMemory(), RunMemory()
    ours.begin([1, 2, 3]).extend([4, 5, 6])
    theirs.begin([7, 8]).extend([9])
    assert SuffixDrafter(memory=theirs).propose([1, 2, 3], 4) is None
    assert SuffixDrafter(memory=ours).propose([1, 2, 3], 4).candidates == ((4, 5, 6),)
    ids = tokenizer.encode(PROMPTS[0])
    settings = Settings(max_new_tokens=40, gamma=4)
    for _ in range(2):
        run_suffix(target, ids, settings, ours)
    kept = [list(run.tokens) for run in ours.runs]
    _, alone = run_suffix(target, ids, settings)  # a private memory: this run only
    _, other = run_suffix(target, ids, settings, RunMemory())  # another caller's first run of the same prompt
    assert [p.candidates for p in other.proposals] == [p.candidates for p in alone.proposals]
    assert EARLIER not in {p.source.origin for p in other.proposals}
    assert [run.tokens for run in ours.runs] == kept


# --- through the target ---------------------------------------------------------------------------------------------

RUN_SETTINGS = [
    (1, False, {}),
    (4, False, {}),
    (8, False, {"suffix_nodes": 4, "suffix_factor": 1}),
    (8, True, {}),
    (3, False, {"suffix_nodes": 1, "suffix_factor": 4}),
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_suffix_greedy_equals_plain_in_first_and_later_runs(target, tokenizer, prompt):
    ids = tokenizer.encode(prompt)
    plain = generated_ids(generate(target, ids, Settings(max_new_tokens=40)))
    events, _ = run_suffix(target, ids, Settings(max_new_tokens=40, gamma=4))
    assert generated_ids(events) == plain, "private memory"
    memory = RunMemory()
    run_suffix(target, tokenizer.encode("w7 w7 w3 w1 w7"), Settings(max_new_tokens=40, gamma=4), memory)  # another text
    origins = set()
    for gamma, adaptive, options in RUN_SETTINGS:
        settings = Settings(max_new_tokens=40, gamma=gamma, adaptive=adaptive)
        for attempt in ("first", "again"):
            events, drafter = run_suffix(target, ids, settings, memory, options)
            assert generated_ids(events) == plain, f"gamma={gamma} adaptive={adaptive} {options} {attempt}"
            for proposal in drafter.proposals:
                budget = options.get("suffix_nodes", 16)
                assert len(build_tree(proposal.candidates).tokens) <= min(budget, drafter.max_nodes(gamma))
                assert max(map(len, proposal.candidates)) <= gamma
            origins |= {p.source.origin for p in drafter.proposals}
    assert EARLIER in origins


def test_a_repeated_prompt_is_drafted_from_the_earlier_run(target, tokenizer):
    ids = tokenizer.encode(PROMPTS[1])
    memory = RunMemory()
    settings = Settings(max_new_tokens=64, gamma=8)
    first, _ = run_suffix(target, ids, settings, memory)
    again, drafter = run_suffix(target, ids, settings, memory)
    assert generated_ids(first) == generated_ids(again)
    tau_first, tau_again = (summarize(events).mean_tokens_per_step for events in (first, again))
    assert tau_again > 3 * tau_first and tau_again > 6, (tau_first, tau_again)  # about 1.9, then 8
    assert drafter.proposals[0].source.origin == EARLIER


def populated(target, prompt, runs=8):
    """A memory holding `runs` sampled runs of `prompt`, longer than the ones tested."""
    memory = RunMemory(max_runs=runs)
    for seed in range(runs):
        list(
            generate_named(
                target,
                prompt,
                Settings(max_new_tokens=12, gamma=4, temperature=1.0, seed=seed),
                "suffix",
                memory=memory,
            )
        )
    return memory


SAMPLED = Settings(max_new_tokens=3, gamma=2, temperature=1.0)


def test_suffix_sampling_is_lossless_with_a_populated_memory(small, draws):
    target, _, prompt = small
    memory, trees = populated(target, prompt), []

    def make(settings, generator):
        drafter = Watched(build_drafter("suffix", settings, None, target, memory=memory))
        trees.append(drafter.proposals)
        return drafter

    assert draws.law_p(target, prompt, SAMPLED, make) > 1e-3
    siblings = sum(len(p.candidates) > 1 for proposals in trees for p in proposals)
    assert siblings > draws.runs / 2  # most runs verified a tree with alternatives drawn from earlier runs


def test_the_suffix_sampling_test_catches_a_wrong_residual(small, draws, monkeypatch):
    target, _, prompt = small
    memory = populated(target, prompt)
    monkeypatch.setattr(verify, "remove", lambda dist, x: dist)
    suffix = lambda s, generator: build_drafter("suffix", s, None, target, memory=memory)  # noqa: E731 (one per run)
    assert draws.mutant_p(target, prompt, SAMPLED, suffix) < REFUSED
