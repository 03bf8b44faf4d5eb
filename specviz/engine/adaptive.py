"""Adaptive γ: before every step, choose the draft length that maximises the expected tokens per second.

With each draft accepted with probability α, a step of γ drafts yields E(γ) = (1 − α^(γ+1)) / (1 − α) tokens
and costs γ·d (drafting, d per token) + V(k) (one target forward over k tokens; k = 1 + the nodes verified) + b
(the step's bookkeeping: the acceptance rule, the cache rollback, the drafter's update; measured apart from V).
We pick γ* = argmax E(γ) / (γ·d + V(1 + n·γ)) over γ = 0..max, where n is how many nodes a step verifies per
unit of γ (1 for a chain; more for a tree) and γ = 0 is a plain step: 1 token for V(1). Paper: E(γ)/(γc + 1),
the same with V(k) = V(1). When no γ > 0 beats a plain step, decode plainly and probe again later so α can
recover: after 8 plain steps, each probe that did not bring drafting back doubling the wait (up to 64). A
drafter with its own probabilities (a draft model) is also asked after each token whether one more pays
(keep_drafting): its probability for the token, calibrated on the run's verdicts, stands in for α there.
A block drafter (DFlash) pays one pass D whatever γ, and its drafts hold less often the further they sit in the
block: there E(γ) = 1 + Σ_{j≤γ} a_1·…·a_j, with a_j how often position j held when the ones before it did, over
D + V(1 + γ). A copy (a lookup) is not i.i.d. either: once its first tokens hold, the span it copies usually goes
on, so a_j grows with j; it is counted the same way, over γ·d + V(1 + n·γ).
Pure Python: every estimate comes from the step timings the engine already measures.
"""

from dataclasses import dataclass, field

from ..analysis.theory import count_positions, expected_tokens_per_step, held_chance, interpolate, tokens_by_position
from .batch_gamma import LONGEST_PROBE_GAP
from .step import DrafterProfile, FinishedStep, Judges

BINS = 10
COPY_GOES_ON = 0.9  # a copy's next token, once the ones before it held, until the run has measured it: the family
# suite's copy-heavy texts held 0.8-1.0 there (docs/benchmarks.md); a run's own steps replace it within a few


@dataclass
class Calibration:
    """How often a draft token holds, by the draft's own probability for it (ten bins, each starting from the
    probability itself, worth two tests)."""

    held: list = field(default_factory=lambda: [2 * (b + 0.5) / BINS for b in range(BINS)])
    tested: list = field(default_factory=lambda: [2.0] * BINS)

    def chance(self, confidence: float) -> float:
        b = min(int(confidence * BINS), BINS - 1)
        return self.held[b] / self.tested[b]

    def observe(self, confidences: tuple, accepted: int) -> None:
        """Drafts 1..accepted held; the one after them (if any) was the first rejected; later ones were never tested."""
        for j, confidence in enumerate(confidences[: accepted + 1]):
            b = min(int(confidence * BINS), BINS - 1)
            self.tested[b] += 1
            self.held[b] += j < accepted


@dataclass
class GammaController:
    max_gamma: int
    probe_after: int = 8  # plain steps in a row before a probe step at the best γ > 0
    memory: float = 0.9  # per step, the weight older acceptance counts keep
    smoothing: float = 0.3  # weight of a new timing in the cost averages
    # online estimates (priors until measured; only ratios of times matter)
    accepted: float = 1.4  # decayed counts of accepted / tested drafts: prior α = 0.7 worth 2 tests
    tested: float = 2.0
    draft_per_token: float | None = None  # seconds per drafted token (prior: a tenth of V(1))
    forward_1: float | None = None  # V(1): a target forward over one token
    slope: float = 0.05  # V(k) = V(1)·(1 + slope·(k − 1))
    bookkeeping: float | None = None  # b: seconds per step outside drafting and the verify forward
    nodes_per_gamma: float = 1.0
    plain_run: int = 0  # plain steps chosen in a row
    probe_gap: int | None = None  # plain steps before the next probe: probe_after, doubled by each probe that did not
    # bring drafting back (up to LONGEST_PROBE_GAP times it), as a batch's adaptive γ waits
    calibration: Calibration = field(default_factory=Calibration)
    stops_early: bool = False  # the drafter asks keep_drafting() after each token: γ is then only the ceiling
    block: bool = False  # the drafter fills a block in one pass: drafting costs block_s whatever γ
    copies: bool = False  # the drafter copies spans: acceptance is counted by position, as for a block
    block_s: float | None = None  # seconds per block pass (prior: a tenth of V(1))
    held_at: list = field(default_factory=list)  # by block position: decayed counts held / tested, prior 0.7
    tested_at: list = field(default_factory=list)
    curve: dict | None = None  # V(k) by k as measured for the model before the run: its shape V(k)/V(1) stands in
    # for the slope, each width's updated by the steps that take it

    @classmethod
    def for_drafter(cls, max_gamma: int, profile: DrafterProfile, curve: dict | None = None) -> "GammaController":
        """The controller for a drafter as its profile declares it, priced from the target's measured `curve` (and
        the drafter's measured position cost) where there is one, so the first steps are chosen as the later ones."""
        return cls(
            max_gamma,
            stops_early=profile.stops_early,
            block=profile.drafts_block,
            copies=profile.copies,
            draft_per_token=profile.position_s,
            curve=dict(curve) if curve else None,
            forward_1=curve[1] if curve else None,
        )

    @property
    def alpha(self) -> float:
        return self.accepted / self.tested

    def verify_cost(self, k: float) -> float:
        """V(k) + b: what a step costs besides drafting, when its forward runs over k tokens."""
        shape = interpolate(self.curve, k, rising=True) / self.curve[1] if self.curve else 1.0 + self.slope * (k - 1)
        return (self.forward_1 or 1.0) * shape + (self.bookkeeping or 0.0)

    def held_chance(self, position: int) -> float:
        """How often the draft at `position` (0 = the first) of a block or a copy held when every one before it did."""
        return held_chance(self.held_at, self.tested_at, position)

    def rate(self, gamma: int, perfect: bool = False) -> float:
        """Expected tokens per second of a step with γ drafts (γ = 0: a plain step); `perfect`: as if all held."""
        if gamma == 0:
            return 1.0 / self.verify_cost(1)
        if self.block:
            block_s = 0.1 * self.verify_cost(1) if self.block_s is None else self.block_s
            tokens = gamma + 1.0 if perfect else self._tokens_by_position(gamma)
            return tokens / (block_s + self.verify_cost(1 + gamma))
        d = 0.1 * self.verify_cost(1) if self.draft_per_token is None else self.draft_per_token
        cost = gamma * d + self.verify_cost(1 + self.nodes_per_gamma * gamma)
        if perfect:
            return (gamma + 1.0) / cost
        tokens = self._tokens_by_position(gamma) if self.copies else expected_tokens_per_step(self.alpha, gamma)
        return tokens / cost

    def _tokens_by_position(self, gamma: int) -> float:
        """E(γ) by position. A copy takes a position it never tested to hold as the deepest it tested beyond the
        first: a copy that held so far usually goes on, so its drafts reach as far as they keep holding, instead of
        waiting for probes of one token to learn each position (where every verified token costs a share of a
        forward, only long copies pay)."""
        return tokens_by_position(self.held_at, self.tested_at, gamma, self._untested())

    def _untested(self) -> float:
        """What a position never tested is taken to hold (the first time it is tested, too: its count starts there):
        0.7; for a copy, the chance of the deepest position tested beyond the first, and COPY_GOES_ON until one is.
        Whether a copy starts to hold (the first position) says little about whether it goes on once it did: a copy
        whose first token failed would otherwise start every later one short and lengthen it step by step."""
        if not self.copies:
            return 0.7
        if len(self.tested_at) > 1:
            return held_chance(self.held_at, self.tested_at, len(self.tested_at) - 1)
        return COPY_GOES_ON

    def next_gamma(self, rows: list[int] | None = None) -> int:
        """The γ of the next step (`rows`: the batch's, always the one row here)."""
        best = max(range(1, self.max_gamma + 1), key=self.rate)
        gap = self.probe_gap or self.probe_after
        if self.rate(best) > self.rate(0):
            self.plain_run = 0  # drafting pays: probes, when due, come as first
            self.probe_gap = self.probe_after
            return self.max_gamma if self.stops_early else best
        if self.plain_run >= gap and self.could_pay():  # a probe; the next waits twice as long unless this one pays
            self.plain_run = 0
            self.probe_gap = min(2 * gap, LONGEST_PROBE_GAP * self.probe_after)
            if self.curve is not None:  # priced by a measured curve: the shortest probe, whoever sizes the draft
                return self.probe_gamma(best)
            return self.max_gamma if self.stops_early else best
        self.plain_run = 0 if self.plain_run >= gap else self.plain_run + 1
        return 0

    def probe_gamma(self, best: int) -> int:
        """How far a probe priced by a measured curve drafts (where every token verified costs a share of a forward):
        the shortest draft that could pay at all, so a probe that fails costs least and one that holds still brings
        drafting back."""
        return next((g for g in range(1, best + 1) if self.rate(g, perfect=True) > self.rate(0)), best)

    def could_pay(self) -> bool:
        """Whether drafts that all held would beat a plain step at some γ: if not, no acceptance the run could
        measure would change the choice, and a probe would only cost (a draft model dearer than its verify saves).
        Asked only of costs measured on the device before the run (a curve): costs learnt from a run's first few
        timings are too rough a ground to stop looking for good."""
        if self.curve is None:
            return True
        return any(self.rate(g, perfect=True) > self.rate(0) for g in range(1, self.max_gamma + 1))

    # GammaPolicy (gamma_policy.py): what the decode loop asks, of its one row

    def judges(self) -> Judges:
        """Lent to the drafter: tree_size, keep_drafting to a drafter that stops early, and (priced by a measured
        curve) whether drafts of a given cost could pay at all."""
        could_pay = self.pays_at if self.curve is not None else None
        return Judges(self.tree_size, self.keep_drafting if self.stops_early else None, could_pay)

    def pays_at(self, draft_s: float) -> bool:
        """Whether drafts costing `draft_s` seconds a token, all held, would beat a plain step at some γ."""
        return any(
            (g + 1.0) / (g * draft_s + self.verify_cost(1 + g)) > self.rate(0) for g in range(1, self.max_gamma + 1)
        )

    def next_gammas(self, rows: list[int], behind=None, left=None) -> list[int]:
        """One row's γ; what its drafter reads is inside the draft seconds it measures, and the budget cuts γ."""
        return [self.next_gamma(rows)] * len(rows)

    def learn(self, step: FinishedStep) -> None:
        """The row's step as observe takes it: the depth its longest candidate reached (γ on a plain step), the
        forward's width, what held, and the draft's own probabilities where they decided its length."""
        (row,) = step.checked
        proposal = row.proposal
        tree = row.tree
        verdict = row.verdict
        self.observe(
            gamma=max(map(len, proposal.candidates)) if proposal else step.gamma,
            forward_tokens=1 + len(tree.tokens),
            accepted=verdict.accepted,
            rejected=row.rejected,
            draft_s=step.draft_s,
            verify_s=step.verify_s,
            bookkeeping_s=step.bookkeeping_s,
            confidences=proposal.confidence if proposal else None,
            held=proposal.first_held(tree, verdict) if proposal else 0,
        )

    def keep_drafting(self, confidences: list[float]) -> bool:
        """Decided while drafting: after n drafts with these probabilities (the draft's own), whether drafting on
        raises the step's expected tokens per second. With a_j the calibrated chance that draft j holds, all of the
        first j hold with C_j = a_1·…·a_j; a step of m drafts yields 1 + ΣC_j tokens for m·d + V(1 + m). Drafts
        after the n-th are guessed to hold as often as the n-th: go on if some m > n beats m = n."""
        n = len(confidences)
        if n >= self.max_gamma:
            return False
        held = 1.0
        tokens = 1.0
        for confidence in confidences:
            held *= self.calibration.chance(confidence)
            tokens += held
        d = 0.1 * self.verify_cost(1) if self.draft_per_token is None else self.draft_per_token
        now = tokens / (n * d + self.verify_cost(1 + n))
        a = self.calibration.chance(confidences[-1])
        for m in range(n + 1, self.max_gamma + 1):
            held *= a
            tokens += held
            if tokens / (m * d + self.verify_cost(1 + m)) > now:
                return True
        return False

    def tree_size(self, paths: list[list[float]], depth: int) -> int:
        """How many of a drafted tree's nodes to verify. paths[i]: the draft's probability of each token on the way to
        node i, nodes best first (so the first n always form a tree); node i is on the accepted path with chance c_i,
        the product of those probabilities calibrated, and n nodes yield 1 + Σc_i tokens for depth·d + V(1 + n). The
        n with the most tokens per second (0: the drafting was in vain and the target's own token is all it adds)."""
        d = 0.1 * self.verify_cost(1) if self.draft_per_token is None else self.draft_per_token
        best = 0
        best_rate = 1.0 / (depth * d + self.verify_cost(1))
        tokens = 1.0
        for n, path in enumerate(paths, start=1):
            chance = 1.0
            for probability in path:
                chance *= self.calibration.chance(probability)
            tokens += chance
            rate = tokens / (depth * d + self.verify_cost(1 + n))
            if rate > best_rate:
                best = n
                best_rate = rate
        return best

    def observe(
        self,
        gamma: int,
        forward_tokens: int,
        accepted: int,
        rejected: bool,
        draft_s: float,
        verify_s: float,
        bookkeeping_s: float = 0.0,
        confidences: tuple | None = None,
        held: int = 0,
    ) -> None:
        """One finished step: γ drafted (the depth reached), k tokens verified, how many drafts held, its three
        timings (drafting, the verify forward alone, the rest), and, when the drafter stops early, its probability
        for each token of its first candidate, of which the first `held` were the target's."""
        if confidences:
            self.calibration.observe(confidences, held)
        blend = lambda old, new: new if old is None else (1 - self.smoothing) * old + self.smoothing * new  # noqa: E731
        self.bookkeeping = blend(self.bookkeeping, bookkeeping_s)
        if forward_tokens <= 1:  # nothing was verified beyond the last token: a plain step
            self.forward_1 = blend(self.forward_1, verify_s)
            return
        self.accepted = self.memory * self.accepted + accepted
        self.tested = self.memory * self.tested + accepted + rejected
        self.draft_per_token = blend(self.draft_per_token, draft_s / gamma)
        if self.block:
            self.block_s = blend(self.block_s, draft_s)
        if self.block or self.copies:
            count_positions(self.held_at, self.tested_at, self.memory, accepted, rejected, self._untested())
        self.nodes_per_gamma = blend(self.nodes_per_gamma, (forward_tokens - 1) / gamma)
        if self.curve and self.forward_1:  # the width's point of the curve moves toward what this forward took
            self.curve[forward_tokens] = blend(
                self.curve.get(forward_tokens, interpolate(self.curve, forward_tokens, rising=True)),
                verify_s / self.forward_1 * self.curve[1],
            )
        elif not self.forward_1:  # no plain step timed yet (or timed at 0 s): read V(1) off this one, through the slope
            self.forward_1 = verify_s / (1.0 + self.slope * (forward_tokens - 1))
        else:
            self.slope = max(0.0, blend(self.slope, (verify_s / self.forward_1 - 1.0) / (forward_tokens - 1)))
