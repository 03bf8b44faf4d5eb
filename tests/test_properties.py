"""Properties of the engine over inputs Hypothesis draws, not ones a person chose: the acceptance rules' output law
computed exactly (every random draw of the rule enumerated, not sampled), the greedy walk, the token trie and its
mask, the cache after any accepts and rejections, and adaptive γ's choice.

Each property runs a bounded number of examples in the fast tier and many more in the slow one (the `thorough`
fixture); examples are derandomized, so a run in CI draws what a run here drew."""

import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specviz.engine import verify as rules
from specviz.engine.adaptive import GammaController
from specviz.engine.cached_lm import CachedLM
from specviz.engine.tree import ROOT, build_tree, row_after, tree_mask, tree_positions
from specviz.settings import Settings

FAST, MANY = 100, 1000  # examples per property: fast tier, slow tier


def fast(test):
    return settings(max_examples=FAST)(test)


def thorough(test):
    return settings(max_examples=MANY)(test)


# A distribution over a small vocabulary: ordinary weights, zeros, one-hot, near-ties.
weight = st.one_of(st.just(0.0), st.floats(0.01, 1.0), st.sampled_from([0.5, 0.5 + 1e-9, 1e-6]))


@st.composite
def distribution(draw, vocab: int) -> tuple[float, ...]:
    style = draw(st.sampled_from(["weights", "one-hot", "uniform"]))
    if style == "one-hot":
        hot = draw(st.integers(0, vocab - 1))
        return tuple(float(i == hot) for i in range(vocab))
    if style == "uniform":
        return (1.0 / vocab,) * vocab
    values = draw(st.lists(weight, min_size=vocab, max_size=vocab).filter(lambda w: sum(w) > 0))
    return tuple(v / sum(values) for v in values)


@st.composite
def language(draw, vocab: int, longest: int) -> dict[tuple[int, ...], tuple[float, ...]]:
    """A model over `vocab` tokens: its next-token distribution after every prefix of up to `longest` tokens."""
    prefixes = [p for n in range(longest + 1) for p in itertools.product(range(vocab), repeat=n)]
    return {p: draw(distribution(vocab)) for p in prefixes}


class Enumerated:
    """torch as an acceptance rule sees it, with its random draws taken from a script: each uniform draw lands inside
    the region the script names (below or above the threshold the rule reports for it), and a draw from a
    distribution records the distribution instead. Unscripted uniform draws return 0 and are counted as new."""

    def __init__(self, script: list[tuple[bool, float]]):
        self.script, self.used, self.drawn_from = script, 0, None

    def __getattr__(self, name):
        return getattr(torch, name)

    def rand(self, *size, generator=None, device=None, dtype=None):
        shape = tuple(size[0]) if size and isinstance(size[0], (tuple, list)) else size
        count, values = math.prod(shape), []
        for _ in range(count):
            below, threshold = self.script[self.used] if self.used < len(self.script) else (True, 0.0)
            values.append(threshold / 2 if below else (1 + threshold) / 2)
            self.used += 1
        return torch.tensor(values, dtype=torch.float64).reshape(shape)

    def multinomial(self, dist, n, generator=None):
        self.drawn_from = dist.clone()
        return torch.zeros(n, dtype=torch.long)


def outcomes(run, threshold_of) -> list[tuple[float, tuple[int, ...], torch.Tensor]]:
    """Every way the rule's random draws can go, with its chance: (chance, the drafts kept, the distribution the next
    token is drawn from). `run()` runs the rule once and returns its Verdict; `threshold_of(verdict, i)` is the chance
    that uniform draw i falls below what it is compared with, as the verdict's trials report it."""
    found, pending = [], [[]]
    while pending:
        script = pending.pop()
        torch_seen = Enumerated(script)
        saved, rules.torch = rules.torch, torch_seen
        try:
            verdict = run()
        finally:
            rules.torch = saved
        if torch_seen.used > len(script):  # a draw the script did not decide: learn its threshold, try both ways
            t = threshold_of(verdict, len(script))
            pending += [script + [(True, t)], script + [(False, t)]]
            continue
        chance = math.prod(t if below else 1 - t for below, t in script)
        if chance > 0:
            found.append((chance, tuple(verdict.path), torch_seen.drawn_from))
    return found


def law_of_steps(steps, tokens_of, target, horizon: int) -> dict[tuple[int, ...], float]:
    """P(first `horizon` tokens): a step's outcomes (with the chance of the draft that made them), then the target's
    own sampling of whatever the step left."""
    law: dict[tuple[int, ...], float] = {}
    for chance, kept, drawn_from in steps:
        for y, py in enumerate(drawn_from.tolist()):
            if py > 0:
                extend(law, (*tokens_of(kept), y), chance * py, target, horizon)
    return law


def extend(law, prefix, chance, target, horizon):
    if len(prefix) >= horizon:
        law[prefix[:horizon]] = law.get(prefix[:horizon], 0.0) + chance
        return
    for y, py in enumerate(target[prefix]):
        if py > 0:
            extend(law, (*prefix, y), chance * py, target, horizon)


def target_law(target, horizon: int, vocab: int) -> dict[tuple[int, ...], float]:
    law = {}
    for seq in itertools.product(range(vocab), repeat=horizon):
        chance = math.prod(target[seq[:i]][t] for i, t in enumerate(seq))
        if chance > 0:
            law[seq] = chance
    return law


def assert_same_law(ours, theirs):
    for key in set(ours) | set(theirs):
        assert ours.get(key, 0.0) == pytest.approx(theirs.get(key, 0.0), abs=1e-9), key


@st.composite
def chain_case(draw):
    vocab, g = draw(st.integers(2, 3)), draw(st.integers(1, 3))
    target = draw(language(vocab, g))
    draft = target if draw(st.booleans()) and draw(st.booleans()) else draw(language(vocab, g - 1))
    return vocab, g, target, draft


def check_chain_law(case):
    """A sampled chain (a draft model's): for any target p and draft q, the tokens the step emits, continued by the
    target, follow the target's own law, token for token, up to one past the draft."""
    vocab, g, target, draft = case
    steps = []
    for x in itertools.product(range(vocab), repeat=g):
        drafted = math.prod(draft[x[:i]][t] for i, t in enumerate(x))
        if drafted == 0:
            continue
        p = torch.tensor([target[x[:i]] for i in range(g + 1)], dtype=torch.float64)
        q = torch.tensor([draft[x[:i]] for i in range(g)], dtype=torch.float64)
        run = lambda: rules.verify_sampled(p, q, torch.tensor(x), None)  # noqa: B023, E731

        def threshold(verdict, i, p=p, q=q, x=x):
            return min(1.0, float(p[i, x[i]] / q[i, x[i]]))

        for chance, kept, drawn_from in outcomes(run, threshold):
            steps.append((drafted * chance, tuple(x[: len(kept)]), drawn_from))
    assert_same_law(law_of_steps(steps, lambda kept: kept, target, g + 1), target_law(target, g + 1, vocab))


@fast
@given(chain_case())
def test_a_sampled_chain_emits_the_targets_law_exactly(case):
    check_chain_law(case)


@thorough
@given(chain_case())
def test_a_sampled_chain_emits_the_targets_law_exactly_thoroughly(thorough, case):
    check_chain_law(case)


@st.composite
def tree_case(draw):
    vocab, depth = draw(st.integers(2, 3)), draw(st.integers(1, 3))
    token = st.integers(0, vocab - 1)
    candidates = draw(st.lists(st.lists(token, min_size=1, max_size=depth), min_size=1, max_size=5))
    return vocab, depth, draw(language(vocab, depth)), candidates


def check_tree_law(case):
    """Point-mass candidates (a lookup's, Medusa's) merged into a tree of any shape, duplicates and shared prefixes
    included: what the step emits, continued by the target, follows the target's law."""
    vocab, depth, target, candidates = case
    tree = build_tree(candidates)
    p = torch.tensor(
        [target[()], *(target[tuple(tree.tokens[n] for n in tree.path_to(i))] for i in range(len(tree.tokens)))],
        dtype=torch.float64,
    )
    steps = outcomes(lambda: rules.verify_tree_sampled(p, tree, None), lambda v, i: v.trials[i].p)
    tokens_of = lambda kept: tuple(tree.tokens[n] for n in kept)  # noqa: E731
    assert_same_law(law_of_steps(steps, tokens_of, target, depth + 1), target_law(target, depth + 1, vocab))


@fast
@given(tree_case())
def test_a_tree_of_point_masses_emits_the_targets_law_exactly(case):
    check_tree_law(case)


@thorough
@given(tree_case())
def test_a_tree_of_point_masses_emits_the_targets_law_exactly_thoroughly(thorough, case):
    check_tree_law(case)


@st.composite
def greedy_case(draw):
    vocab = draw(st.integers(2, 6))
    candidates = draw(st.lists(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=4), min_size=1, max_size=6))
    tree = build_tree(candidates)
    rows = draw(st.lists(distribution(vocab), min_size=1 + len(tree.tokens), max_size=1 + len(tree.tokens)))
    return tree, torch.tensor(rows, dtype=torch.float64)


def argmax_walk(p, tree) -> tuple[list[int], int]:
    node, path = ROOT, []
    while True:
        best = int(p[row_after(node)].argmax())
        child = next((c for c in tree.children(node) if tree.tokens[c] == best), None)
        if child is None:
            return path, best
        path.append(child)
        node = child


@fast
@given(greedy_case())
def test_the_greedy_rule_walks_the_targets_argmax_down_any_tree(case):
    tree, p = case
    verdict = rules.verify(p, tree, None, Settings(temperature=0.0), None)
    path, best = argmax_walk(p, tree)
    assert list(verdict.path) == path and verdict.next_token == best
    assert tree.candidate(verdict.winner)[: len(path)] == tuple(tree.tokens[n] for n in path)


candidate_lists = st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=5), min_size=1, max_size=8)


@fast
@given(candidate_lists, st.integers(0, 20))
def test_any_candidates_make_a_trie_whose_mask_lets_each_node_see_exactly_its_ancestors(candidates, prefix):
    tree = build_tree(candidates)
    assert tree.candidates == tuple(tuple(c) for c in candidates)
    assert len({(parent, token) for parent, token in zip(tree.parents, tree.tokens)}) == len(tree.tokens)
    assert all(parent < node for node, parent in enumerate(tree.parents))
    mask = tree_mask(tree, prefix, torch.float32)[0, 0]
    sees = mask == 0
    assert sees[:, :prefix].all() and sees[:, prefix].all()  # the cache and the root, for every row
    assert not sees[0, prefix + 1 :].any()  # the root sees no node
    for node in range(len(tree.tokens)):
        assert {int(c) for c in sees[row_after(node), prefix + 1 :].nonzero()} == set(tree.path_to(node))
    assert tree_positions(tree, prefix)[0].tolist() == [prefix, *(prefix + d for d in tree.depths)]


costs = st.floats(0.0, 10.0) | st.sampled_from([0.0, 1e-12, 1e6])


@st.composite
def measured(draw):
    controller = GammaController(
        draw(st.integers(1, 16)),
        stops_early=draw(st.booleans()),
        copies=draw(st.booleans()),
        block=draw(st.booleans()),
    )
    for _ in range(draw(st.integers(0, 12))):
        gamma = draw(st.integers(1, controller.max_gamma))
        width = draw(st.sampled_from([1, 1 + gamma, 1 + 2 * gamma]))
        accepted = draw(st.integers(0, gamma)) if width > 1 else 0
        controller.observe(
            gamma=gamma,
            forward_tokens=width,
            accepted=accepted,
            rejected=accepted < gamma and width > 1,
            draft_s=draw(costs),
            verify_s=draw(costs),
            bookkeeping_s=draw(costs),
        )
    return controller


@fast
@given(measured())
def test_adaptive_gamma_stays_in_bounds_and_never_picks_what_its_model_rates_below_one(controller):
    for _ in range(3):
        gamma = controller.next_gamma()
        assert 0 <= gamma <= controller.max_gamma
        rates = [controller.rate(g) for g in range(controller.max_gamma + 1)]
        assert all(not math.isnan(r) for r in rates)
        if gamma and not controller.stops_early:
            assert rates[gamma] >= rates[1]


@st.composite
def rollbacks(draw, vocab: int):
    prompt = draw(st.lists(st.integers(0, vocab - 1), min_size=2, max_size=6))
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        candidates = draw(st.lists(st.lists(st.integers(0, vocab - 1), min_size=1, max_size=3), min_size=1, max_size=3))
        tree = build_tree(candidates)
        node = draw(st.sampled_from([ROOT, *range(len(tree.tokens))]))
        steps.append((draw(st.integers(0, vocab - 1)), tree, tree.path_to(node) if node != ROOT else []))
    return prompt, steps


def check_cache(model, case):
    """Feed a prompt, then steps of [the last token, a tree] keeping only an accepted path each time: the cache then
    holds exactly what one forward over the committed tokens would hold (entries and their keys and values)."""
    prompt, steps = case
    lm, tokens = CachedLM(model), list(prompt)
    lm.extend(torch.tensor(tokens[:-1]))
    for root_next, tree, path in steps:
        lm.extend_tree(tokens[-1], tree)
        lm.keep(len(tokens), path)
        tokens += [tree.tokens[n] for n in path] + [root_next]
    fresh = CachedLM(model)
    fresh.extend(torch.tensor(tokens[:-1]))
    assert lm.length == fresh.length == len(tokens) - 1
    for ours, theirs in zip(lm.cache.layers, fresh.cache.layers):
        assert ours.keys.shape == theirs.keys.shape and ours.values.shape == theirs.values.shape
        torch.testing.assert_close(ours.keys, theirs.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(ours.values, theirs.values, atol=1e-5, rtol=1e-4)


@settings(max_examples=30)
@given(case=st.data())
def test_after_any_accepts_and_rejections_the_cache_is_one_forward_over_the_committed_tokens(target, case):
    vocab = target.model.config.vocab_size
    check_cache(target.model, case.draw(rollbacks(vocab)))


@settings(max_examples=300)
@given(case=st.data())
def test_after_any_accepts_and_rejections_the_cache_is_one_forward_thoroughly(thorough, target, case):
    vocab = target.model.config.vocab_size
    check_cache(target.model, case.draw(rollbacks(vocab)))


class Checked:
    """A draft model drafter whose own cache is compared after every verdict with one forward over the text it
    should hold: a prefix of the committed tokens (it may lag: it feeds the last ones at its next proposal)."""

    def __init__(self, drafter, check):
        self.drafter, self.check, self.profile = drafter, check, drafter.profile

    def max_nodes(self, gamma):
        return self.drafter.max_nodes(gamma)

    def start(self, prompt_ids, target, judges=None):
        self.drafter.start(prompt_ids, target, judges)

    def propose(self, tokens, gamma):
        self.tokens, self.proposal = list(tokens), self.drafter.propose(tokens, gamma)
        return self.proposal

    def observe(self, verdict):
        self.drafter.observe(verdict)
        kept = self.proposal.tree().candidate(verdict.winner)[: verdict.accepted]
        self.check(self.drafter.lm, [*self.tokens, *kept])


def same_cache(model, lm, committed: list[int]) -> None:
    assert lm.length <= len(committed)
    fresh = CachedLM(model)
    fresh.extend(torch.tensor(committed[: lm.length]))
    for ours, theirs in zip(lm.cache.layers, fresh.cache.layers):
        assert ours.keys.shape == theirs.keys.shape
        torch.testing.assert_close(ours.keys, theirs.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(ours.values, theirs.values, atol=1e-5, rtol=1e-4)


@settings(max_examples=20)
@given(
    prompt=st.lists(st.integers(1, 40), min_size=2, max_size=8),
    gamma=st.integers(1, 5),
    temperature=st.sampled_from([0.0, 0.9]),
    shape=st.sampled_from(["chain", "tree"]),
    seed=st.integers(0, 100),
)
def test_the_draft_models_cache_after_any_verdicts_is_one_forward_over_what_it_holds(
    target, drafts, prompt, gamma, temperature, shape, seed
):
    from specviz.drafters.registry import build_drafter
    from specviz.engine import generate, new_generator

    draft = drafts["partial"]
    settings_ = Settings(max_new_tokens=12, gamma=gamma, temperature=temperature, seed=seed)
    generator = new_generator(target.device, seed)
    drafter = build_drafter("draft", settings_, generator, target, draft, {"draft_tree": shape})
    checked = Checked(drafter, lambda lm, committed: same_cache(draft.model, lm, committed))
    list(generate(target, prompt, settings_, checked, generator))
