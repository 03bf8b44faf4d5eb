"""Every acceptance rule's law where it lives, in the fast tier: hand-made target and draft distributions, thousands of
verdicts in seconds, no model. The lossless rules (a sampled chain, rejection over a tree's siblings, each row of a
batch on its own, a draft of another tokenizer carried onto the target's ids) must emit tokens distributed exactly as
the target alone samples them; each mutant below, a mistake a careful reader could make, must be refused by the very
same test, and must really change what the rule emits. Typical acceptance is lossy by design: its own stated law is
checked instead (what it keeps, and the token it adds)."""

import math
from collections import Counter
from functools import cache

import pytest
import torch

import specviz.engine.loop as loop
import specviz.engine.verify as verify
from specviz.analysis.stats import chi_square_p
from specviz.drafters.cross_tokenizer import CrossTokenizerDrafter
from specviz.engine.step import Proposal
from specviz.engine.tree import build_tree
from specviz.settings import Settings

V = 5  # tokens 0..4
SAMPLED = Settings(temperature=1.0, max_new_tokens=8)
DRAWS = 6000  # verdicts per law: sees a 0.03 shift of mass between two likely tokens (test_law_power.py)
SOUND, REFUSED = 1e-3, 1e-6  # a sound rule's p-values stay above SOUND; a mutant's smallest falls below REFUSED


@cache
def target_after(prefix: tuple[int, ...]) -> torch.Tensor:
    """The target's next-token law after `prefix` (a step's own tokens): a fixed, spread-out row per prefix, every
    token at least 3% likely, so that which row a rule reads shows in what it emits."""
    seed = 1 + sum((t + 1) * 7**i for i, t in enumerate(prefix))
    row = torch.rand(V, generator=torch.Generator().manual_seed(seed)) + 0.15
    return row / row.sum()


@cache
def draft_after(prefix: tuple[int, ...]) -> torch.Tensor:
    """A draft that disagrees with the target (its own rows), so rejections and residuals are common."""
    row = torch.rand(V, generator=torch.Generator().manual_seed(1000 + len(prefix) * 31 + sum(prefix))) ** 3 + 0.02
    return row / row.sum()


def logits_over(tree, prefix=()) -> torch.Tensor:
    """[1 + nodes, V] logits a verify forward would give: the row after the root, then the row after each node."""
    return _logits(tree.tokens, tree.shape, prefix)


@cache
def _logits(tokens, shape, prefix) -> torch.Tensor:
    rows = [target_after(prefix)] + [
        target_after(prefix + tuple(tokens[n] for n in shape.path_to(i))) for i in range(len(tokens))
    ]
    return torch.stack(rows).log()


def emitted(check) -> tuple[int, ...]:
    return tuple(check.tree.tokens[n] for n in check.verdict.path) + (check.verdict.next_token,)


def law_p(outputs: list[tuple[int, ...]], prefix=()) -> float:
    """The smallest p-value over the step's positions: position i's token, given the i tokens before it in the same
    step, must follow target_after(prefix + those tokens). Conditioning on the tokens before it keeps each test exact
    whatever the rule accepted earlier."""
    by_context: dict[tuple[int, ...], Counter] = {}
    for out in outputs:
        for i, token in enumerate(out):
            by_context.setdefault(out[:i], Counter())[token] += 1
    worst = 1.0
    for context, counts in by_context.items():
        n = sum(counts.values())
        if n >= 200:  # too few to say anything: skipped (the root context always has every draw)
            worst = min(worst, chi_square_p(counts, dict(enumerate(target_after(prefix + context).tolist())), n))
    return worst


# --- the rules, each drawn DRAWS times through the engine's own per-row check ---------------------------------------


def sampled_chain(draws: int = DRAWS, seed: int = 0) -> list[tuple[int, ...]]:
    """A chain of 3 drawn from the draft's q, verified with that q (rejection sampling and its residual)."""
    gen, out = torch.Generator().manual_seed(seed), []
    for _ in range(draws):
        tokens, q = [], []
        for _ in range(3):
            q.append(draft_after(tuple(tokens)))
            tokens.append(int(torch.multinomial(q[-1], 1, generator=gen)))
        proposal = Proposal((tuple(tokens),), torch.stack(q))
        tree = proposal.tree()
        out.append(emitted(loop.check_rows([logits_over(tree)], [tree], [proposal], [gen], SAMPLED)[0]))
    return out


SIBLINGS = ((1, 2), (1, 3), (2,), (3, 1), (0, 4, 2))  # siblings at two depths, a chain of three below token 0


def sibling_tree(draws: int = DRAWS, seed: int = 0) -> list[tuple[int, ...]]:
    """Point masses on a fixed tree (a lookup drafter's proposal): rejection over siblings, no q."""
    gen, out = torch.Generator().manual_seed(seed), []
    proposal = Proposal(SIBLINGS)
    tree = proposal.tree()
    logits = logits_over(tree)
    for _ in range(draws):
        out.append(emitted(loop.check_rows([logits], [tree], [proposal], [gen], SAMPLED)[0]))
    return out


ROW_PREFIXES = ((2,), (4, 4))  # two rows of a batch, each after its own text


def batch_rows(draws: int = DRAWS // 2, seed: int = 0) -> list[list[tuple[int, ...]]]:
    """Two rows verified in one batch, each with its own chain, q, logits and generator: per row, its own law."""
    gens = [torch.Generator().manual_seed(seed + r) for r in range(2)]
    per_row = [[], []]
    for _ in range(draws):
        proposals, trees, logits = [], [], []
        for r, prefix in enumerate(ROW_PREFIXES):
            tokens, q = [], []
            for _ in range(2):
                q.append(draft_after(prefix + tuple(tokens)))
                tokens.append(int(torch.multinomial(q[-1], 1, generator=gens[r])))
            proposals.append(Proposal((tuple(tokens),), torch.stack(q)))
            trees.append(proposals[-1].tree())
            logits.append(logits_over(trees[-1], prefix))
        for r, check in enumerate(loop.check_rows(logits, trees, proposals, gens, SAMPLED)):
            per_row[r].append(emitted(check))
    return per_row


def batch_p(per_row) -> float:
    return min(law_p(outputs, prefix) for outputs, prefix in zip(per_row, ROW_PREFIXES))


# The draft of another tokenizer: its ids 0..6 spell the target's 0..4 as below (ids 5 and 6 spell the target's 1 and
# 3 again, as a character and its byte-fallback piece do; id 7 spells nothing the target has).
DRAFT_TO_TARGET = (0, 1, 2, 3, 4, 1, 3, -1)


def bridge() -> CrossTokenizerDrafter:
    """The cross-tokenizer drafter's translation alone: its map between the vocabularies, no model."""
    drafter = CrossTokenizerDrafter.__new__(CrossTokenizerDrafter)
    drafter.to_target = torch.tensor(DRAFT_TO_TARGET)
    drafter.shared = drafter.to_target >= 0
    drafter.target = type("Target", (), {"vocab_size": V})()
    return drafter


@cache
def own_draft_after(prefix: tuple[int, ...]) -> torch.Tensor:
    """The other tokenizer's draft: a row over its 8 ids."""
    row = torch.rand(len(DRAFT_TO_TARGET), generator=torch.Generator().manual_seed(50 + sum(prefix))) + 0.1
    return row / row.sum()


def cross_tokenizer(draws: int = DRAWS, seed: int = 0) -> list[tuple[int, ...]]:
    """Chains of 2 drawn in the draft's own ids among the shared ones (q renormalised over them, as the drafter's
    masked probabilities are), carried onto the target's ids with their q, then the usual rejection rule."""
    drafter, gen, out = bridge(), torch.Generator().manual_seed(seed), []
    for _ in range(draws):
        tokens, q = [], []
        for _ in range(2):
            own = own_draft_after(tuple(tokens)).masked_fill(~drafter.shared, 0)
            own = (own / own.sum()).unsqueeze(0)
            x = int(torch.multinomial(own[0], 1, generator=gen))
            q.append(drafter.on_target(own))
            tokens.append(int(drafter.to_target[x]))
        proposal = Proposal((tuple(tokens),), torch.cat(q))
        tree = proposal.tree()
        out.append(emitted(loop.check_rows([logits_over(tree)], [tree], [proposal], [gen], SAMPLED)[0]))
    return out


LAWS = {
    "sampled chain": (sampled_chain, law_p),
    "tree siblings": (sibling_tree, law_p),
    "batch rows": (batch_rows, batch_p),
    "cross-tokenizer": (cross_tokenizer, law_p),
}


# --- the mutants: each a plausible mistake in one rule --------------------------------------------------------------


def _other_rows_proposal(original):
    def check_rows(logits, trees, proposals, generators, settings, explain=False):  # row r reads row r+1's draft
        shifted = proposals[1:] + proposals[:1]
        return original(logits, [p.tree() for p in shifted], shifted, generators, settings, explain)

    return check_rows


def _parts_not_summed(self, probs):  # a target id spelled by two draft ids gets the q of one of them
    out = torch.zeros(1, self.target.vocab_size)
    return out.index_copy_(1, self.to_target[self.shared], probs[:, self.shared])


MUTANTS = {
    "residual ignores q": ("sampled chain", lambda mp: mp.setattr(verify, "residual", lambda p, q: p)),
    "acceptance ignores q": ("sampled chain", lambda mp: mp.setattr(verify, "passes", lambda p_x, q_x, u: u < p_x)),
    "accepted prefix one too long": (
        "sampled chain",
        lambda mp: mp.setattr(
            verify, "accepted_prefix", lambda passed: min(len(passed), 1 + int(passed.int().cumprod(0).sum()))
        ),
    ),
    "a rejected sibling keeps its mass": (
        "tree siblings",
        lambda mp: mp.setattr(verify, "remove", lambda dist, x: dist),
    ),
    "a node reads the row before its own": (
        "tree siblings",
        lambda mp: mp.setattr(verify, "row_after", lambda node: max(node, 0)),
    ),
    "a row reads another row's draft": (
        "batch rows",
        lambda mp: mp.setattr(loop, "check_rows", _other_rows_proposal(loop.check_rows)),
    ),
    "a merged token's q is one part's": (
        "cross-tokenizer",
        lambda mp: mp.setattr(CrossTokenizerDrafter, "on_target", _parts_not_summed),
    ),
}


@pytest.mark.parametrize("law", LAWS)
def test_each_lossless_rule_follows_the_targets_law(law):
    draw, p_of = LAWS[law]
    assert p_of(draw()) > SOUND


def refused(draw, p_of, every: int = 1000) -> float:
    """The law's p-value over up to DRAWS verdicts drawn `every` at a time, stopping once it falls below REFUSED (a
    broken rule shows early; a sound one would run them all)."""
    outputs = None
    for seed in range(DRAWS // every):
        more = draw(draws=every, seed=seed)
        outputs = more if outputs is None else _joined(outputs, more)
        if (p := p_of(outputs)) < REFUSED:
            break
    return p


def _joined(a, b):
    return [x + y for x, y in zip(a, b)] if a and isinstance(a[0], list) else a + b  # batch_rows: a list per row


@pytest.mark.parametrize("mutant", MUTANTS)
def test_each_mutant_is_refused_by_its_rules_test(monkeypatch, mutant):
    law, apply = MUTANTS[mutant]
    apply(monkeypatch)
    assert refused(*LAWS[law]) < REFUSED, mutant


@pytest.mark.parametrize("mutant", MUTANTS)
def test_each_mutant_really_changes_what_its_rule_emits(monkeypatch, mutant):
    law, apply = MUTANTS[mutant]
    draw = LAWS[law][0]
    sound = draw(draws=300, seed=7)
    apply(monkeypatch)
    assert draw(draws=300, seed=7) != sound, mutant


# --- typical acceptance: lossy by design, held to its own law -------------------------------------------------------


def bar(row: torch.Tensor, epsilon: float = 0.09, delta: float = 0.3) -> float:
    """Typical acceptance's bar as Medusa states it, computed here on its own: min(ε, δ·exp(−H(p)))."""
    entropy = -float((row * row.log()).sum())
    return min(epsilon, delta * math.exp(-entropy))


def typical_breaches(cases: int = 400) -> int:
    """How many of `cases` random trees and targets the typical rule handles against its own law: every kept token's
    probability clears the bar at its parent, no child below the kept path does, and the added token is the
    target's argmax where the path ends."""
    gen, breaches = torch.Generator().manual_seed(3), 0
    for _ in range(cases):
        tree = build_tree([torch.randint(0, V, (3,), generator=gen).tolist() for _ in range(3)])
        sharp = 0.3 + 4 * float(torch.rand((), generator=gen))  # confident and flat targets both
        p = torch.softmax(torch.randn(1 + len(tree.tokens), V, generator=gen, dtype=torch.float64) * sharp, dim=-1)
        v = verify.verify_typical(p, tree, epsilon=0.09, delta=0.3)
        row_of = [verify.row_after(tree.parents[n]) for n in range(len(tree.tokens))]
        kept_clear = all(p[row_of[n], tree.tokens[n]] > bar(p[row_of[n]]) for n in v.path)
        end = v.path[-1] if v.path else verify.ROOT
        below = verify.row_after(end)
        none_below = all(p[below, tree.tokens[c]] <= bar(p[below]) for c in tree.children(end))
        breaches += not (kept_clear and none_below and v.next_token == int(p[below].argmax()))
    return breaches


TYPICAL_MUTANTS = {
    "a bar without the entropy": lambda probs, epsilon, delta: epsilon,
    "a bar without ε's cap": lambda probs, epsilon, delta: float(
        delta * torch.exp((probs * probs.clamp_min(1e-30).log()).sum())
    ),
}


def test_typical_acceptance_keeps_what_clears_its_bar_and_adds_the_argmax():
    assert typical_breaches() == 0


@pytest.mark.parametrize("mutant", TYPICAL_MUTANTS)
def test_a_wrong_typical_bar_breaks_its_law(monkeypatch, mutant):
    monkeypatch.setattr(verify, "typical_threshold", TYPICAL_MUTANTS[mutant])
    assert typical_breaches() > 0, mutant


def test_typical_threshold_is_epsilon_capped_and_falls_with_entropy():
    flat, sharp = torch.full((V,), 1 / V), torch.tensor([0.96, 0.01, 0.01, 0.01, 0.01])
    assert verify.typical_threshold(flat, 0.09, 0.3) == pytest.approx(0.3 * math.exp(-math.log(V)))
    assert verify.typical_threshold(sharp, 0.09, 0.3) == pytest.approx(0.09)  # capped by ε
    assert verify.typical_threshold(flat, 0.09, 0.3) < verify.typical_threshold(sharp, 0.09, 0.3)
