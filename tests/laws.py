"""What the tests of the sampling law share: the target's exact law of its first tokens, thousands of seeded
speculative runs counted by their first tokens (the `draws` fixture; a test that takes it is marked `stats`, and
`slow`), and a drafter that always proposes the same tree."""

from collections import Counter

import torch

from specviz.analysis.stats import chi_square_p
from specviz.drafters.registry import build_drafter
from specviz.engine import generate, new_generator
from specviz.engine.sampling import probabilities
from specviz.engine.step import BaseDrafter, Proposal
from specviz.events import generated_ids
from specviz.settings import Settings

# Seeded runs per sampled law on the `small` pair, unless a test asks for more. Each acceptance rule's law is tested
# where it lives, in the fast tier, with far more draws (test_acceptance_laws.py); a law through the whole engine is
# there for what only the loop can break, and its power is stated in docs/testing.md (test_law_power.py).
RUNS = 1000
# A mutant's test wants its p-value below this: ten times under the bar a sound law must clear (1e-3), on seeded
# runs that give the same counts every time.
REFUSED = 1e-4


def exact_law(target, prompt: list[int], settings: Settings, horizon: int = 2) -> dict[tuple[int, ...], float]:
    """P(first `horizon` tokens) of the target alone, by walking every continuation (an EOS ends one)."""
    law = {}

    def walk(prefix: list[int], prob: float) -> None:
        if len(prefix) == horizon or (prefix and prefix[-1] in target.eos_ids):
            law[tuple(prefix)] = prob
            return
        with torch.no_grad():
            logits = target.next_logits(prompt + prefix)[None]  # whatever runtime computes the target
        for token, p in enumerate(probabilities(logits, settings)[0].tolist()):
            if p > 0:
                walk(prefix + [token], prob * p)

    walk([], 1.0)
    return law


class Draws:
    """Seeded speculative runs counted by their first tokens. Run i of n sets the settings' seed and a fresh generator
    to i and drafts with `drafter(settings, generator)`, so the same call gives the same counts."""

    def __init__(self, runs: int = RUNS):
        self.runs = runs

    def __call__(self, target, prompt, settings, drafter, horizon: int = 2, runs: int | None = None) -> Counter:
        return self.seeded(target, prompt, settings, drafter, horizon, range(runs or self.runs))

    @staticmethod
    def seeded(target, prompt, settings, drafter, horizon: int, seeds) -> Counter:
        counts = Counter()
        for seed in seeds:
            s = Settings(**{**settings.__dict__, "seed": seed})
            generator = new_generator(target.device, seed)
            counts[tuple(generated_ids(generate(target, prompt, s, drafter(s, generator), generator))[:horizon])] += 1
        return counts

    def until_refused(self, target, prompt, settings, drafter, law, horizon, runs, below, every=500) -> float:
        """For a test that must refuse a broken engine: the same seeded runs, `every` at a time, stopping once the
        p-value against `law` falls below `below` (a broken engine usually shows within the first few hundred; a
        sound one runs them all). The p-value where it stopped."""
        counts = Counter()
        for start in range(0, runs, every):
            counts += self.seeded(target, prompt, settings, drafter, horizon, range(start, min(runs, start + every)))
            p = self.p(counts, law)
            if p < below:
                break
        return p

    def law_p(self, target, prompt, settings, drafter, horizon: int = 2) -> float:
        """For a sound law's test: the p-value of all the runs against the target's exact law."""
        return self.p(self(target, prompt, settings, drafter, horizon), exact_law(target, prompt, settings, horizon))

    def mutant_p(self, target, prompt, settings, drafter, horizon: int = 2, below: float = REFUSED) -> float:
        """For a mutant's test: the p-value of the runs against the target's exact law, stopped once it falls below
        `below` (until_refused). The same runs and bar as the sound test, so the mutant is refused as surely."""
        law = exact_law(target, prompt, settings, horizon)
        return self.until_refused(target, prompt, settings, drafter, law, horizon, self.runs, below)

    @staticmethod
    def p(counts: Counter, law: dict) -> float:
        """The chi-square p-value of `counts` against the exact `law`."""
        return chi_square_p(counts, law, sum(counts.values()))


def chain(target, draft):
    """The draft model's chain, as `draws` wants a drafter: built for each run with its settings and generator."""
    return lambda s, generator: build_drafter("draft", s, generator, target, draft)


class SiblingsDrafter(BaseDrafter):
    """Always proposes the same three alternatives (a deterministic tree with siblings at two levels)."""

    def __init__(self, tok):
        a, b, c = tok.convert_tokens_to_ids(["a", "b", "c"])
        self.candidates = [[a, b], [a, c], [b], [c, a]]

    def max_nodes(self, gamma):
        return 6

    def propose(self, tokens, gamma):
        return Proposal(tuple(tuple(c[:gamma]) for c in self.candidates))


def shifted(law: dict, delta: float) -> dict:
    """`law` with `delta` of mass moved from its likeliest outcome to the next likeliest: the hardest shift of that
    size for a goodness-of-fit test to see (both cells are large)."""
    first, second = sorted(law, key=law.get, reverse=True)[:2]
    moved = min(delta, law[first])
    return {**law, first: law[first] - moved, second: law[second] + moved}


def power(law: dict, drawn_from: dict, n: int, below: float, trials: int = 200, seed: int = 0) -> float:
    """How often n draws from `drawn_from` give a p-value against `law` below `below`, with the tests' own statistic
    (chi_square_p): the chance that a test of n draws refuses a rule whose law is `drawn_from`."""
    keys = list(drawn_from)
    probs = torch.tensor([drawn_from[k] for k in keys], dtype=torch.float64)
    generator, refused = torch.Generator().manual_seed(seed), 0
    for _ in range(trials):
        counts = torch.multinomial(probs, n, replacement=True, generator=generator).bincount(minlength=len(keys))
        refused += chi_square_p(Counter(dict(zip(keys, counts.tolist()))), law, n) < below
    return refused / trials


def smallest_shift(law: dict, n: int, below: float = 1e-3, at_least: float = 0.9, step: float = 0.005) -> float:
    """The smallest shift (in steps of `step`, see `shifted`) that n draws refuse at p < `below` at least `at_least`
    of the time: the bias a law test of n draws is sure to see."""
    delta = step
    while power(law, shifted(law, delta), n, below) < at_least and delta < 1:
        delta += step
    return round(delta, 6)
