"""Adaptive γ for a batch: which rows draft this step and how far, chosen from what the whole batch's step would cost.

A step of B rows drafts γ tokens for the rows D that draft and verifies them in one packed target forward over
T = B + Σ_{b∈D} n_b tokens (n_b: the nodes row b sends, γ for a chain; each row takes only its own positions). Row b
yields E_b(γ) tokens: (1 − α_b^(γ+1)) / (1 − α_b) for a drafter whose drafts hold independently with its own α_b, or
1 + Σ_{j≤γ} a_1·…·a_j for a copy (positions held in runs), and a row that does not draft one. So

    rate(γ, D) = (Σ_{b∈D} E_b(γ) + B − |D|) / (γ·d_|D| + V(T) + b_B),   rate(0) = B / (V(B) + b_B)   (a plain step)

and the step takes the best: for each γ the rows ranked by what drafting adds to them, every count of the best
priced (d_k: a drafted position's seconds when k rows draft). A row the draft is behind on (its whole text before it
first drafts, or what plain steps wrote since it last did: `behind` from the drafting) costs the draft a read of those
tokens first, at r seconds a token; the read serves the rest of the row's life, so a step is charged the share of it
that one step of the row's remaining steps (its tokens left over E_b) takes: catch-up = r · Σ_{b∈D} behind_b ·
min(1, E_b / left_b). Coming back to drafting after plain steps, or letting rows that joined draft, then pays exactly
what the reading costs against what the row has left to gain. A batch that drafts on also reads every row that joins
it later: that flow (the tokens of rows joining a batch that decodes on, per step, a moving average, read as what
the steps so far measured rather than diluted by the zeros it started from) is charged to
drafting steps in the share of rows that draft, so under steady arrivals drafting is priced at what it costs in the
long run, each row's read spread over its life, not only at the step it joins. V(T) is the target's forward over T
tokens as measured (ForwardCosts keeps what every run on the model measured, by T): cheap while the device is
memory-bound, so γ stays long for a small batch; once T makes the forward compute-bound V grows with it, and fewer
rows draft, down to none, plain decoding, as the batch grows, and come back as finished rows leave. When plain steps
win, after `probe_after` plain steps one row drafts, so its α can recover: each in turn of the rows with the fewest
tokens unread by the draft (a probe drafts once, so a whole text read for it is never repaid); each probe that did
not bring drafting back doubles the wait before the next at that batch size or larger (up to LONGEST_PROBE_GAP),
kept for the next run. Where not even drafts that all held would pay, there is no probe, and the next look waits as
long again.

What a drafted position costs (d_k, by the rows drafting) and what a token read costs (r) are kept with the forward
costs, by drafter, so a run starts from what earlier runs of its drafter on the model measured. d_k is learnt from
steps where no row was behind by more than its last draft (the steady feed); r from the others, as the draft's
seconds over γ·d_k per token read, once d_k is known. Until a read was measured it is priced as nothing. How often
the drafter's drafts held, over all the rows it drafted for, is kept there too: a row's α_b starts from it, so a row
new to the batch is priced as the drafter's rows were, not as a fixed guess, until its own drafts are judged. A row
left out while others draft learns nothing new, so what its drafts said ages back toward that, step by step: one
rejected draft does not keep a row plain for its whole life, the batch's straggler. In a batch no row joins (the
flow is nil) the step also looks past itself: the batch ends with its last row, so a row left plain with more tokens
to go than the drafting rows have steps drafts too, where the step still beats a plain one (`with_last_rows`).
"""

import math
import statistics
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING

from ..analysis.theory import count_positions, expected_tokens_per_step, interpolate, tokens_by_position

if TYPE_CHECKING:  # the pricing is pure Python: the simulator runs it without torch
    from .step import DrafterProfile, FinishedStep

PRIOR_ALPHA = 0.7
PRIOR_DRAFTS = 2.0  # what a prior α weighs: as many drafts judged
PRIOR_SLOPE = 0.05  # until two widths are measured: one more token costs this share of a row's share of V(B)
RECENT = 5  # timings per width whose median is its cost
LONGEST_PROBE_GAP = 8  # times probe_after: the longest wait for a probe after probes that failed
READ_MEMORY = 0.9  # the weight of what earlier steps said of a token read's cost, against each new one
HELD_MEMORY = 0.98  # the weight of the drafter's earlier verdicts, against each row's new one: about the last 50


@dataclass
class DraftCosts:
    """What one drafter's drafting costs with the model: d_B by rows (each the median of the last RECENT timings),
    what it costs to read a token it is behind on, how long to wait before a probe at each batch size after probes
    there that failed, and how often its drafts held."""

    per_position: dict[int, float] = field(default_factory=dict)  # rows -> seconds one drafted position costs them all
    timings: dict[int, list] = field(default_factory=dict)  # rows -> the last RECENT timings
    read_seconds: float = 0.0  # decayed draft seconds over γ·d_B of steps where rows were behind
    read_tokens: float = 0.0  # decayed tokens those steps read
    probe_gaps: dict[int, int] = field(default_factory=dict)  # rows -> plain steps before the next probe there
    held: float = 0.0  # decayed drafts held, over every row this drafter drafted for
    tested: float = 0.0  # decayed drafts tested (held, and the one rejected)

    def note_verdict(self, accepted: int, rejected: bool) -> None:
        self.held = HELD_MEMORY * self.held + accepted
        self.tested = HELD_MEMORY * self.tested + accepted + rejected

    def prior_alpha(self) -> float:
        """α for a row not yet drafted for: what the drafter's drafts held for the rows before it, from the fixed
        prior worth two drafts."""
        return (PRIOR_DRAFTS * PRIOR_ALPHA + self.held) / (PRIOR_DRAFTS + self.tested)


@dataclass
class ForwardCosts:
    """Seconds of the target's forward by the tokens it took (T), each the median of the last RECENT timings. Kept by
    the caller for one loaded model, so a run starts from what earlier runs measured. A median, not a mean, and a
    forward read as never dearer than a wider one measured: a stall of the machine (a timing ten times the truth)
    then neither stays in the table nor makes plain steps look dear, which adaptive γ, avoiding them, would never
    measure again. What drafting costs is a drafter's, not the device's: `for_drafter` gives the same forward
    costs with that drafter's DraftCosts (a draft model's position costs a forward of its own, a lookup's nothing)."""

    seconds: dict[int, float] = field(default_factory=dict)
    timings: dict[int, list] = field(default_factory=dict)  # T -> the last RECENT timings
    drafters: dict[str, DraftCosts] = field(default_factory=dict)  # by drafter, shared by every view of these costs
    drafted: DraftCosts = field(default_factory=DraftCosts)  # the drafter this view prices
    worked_out: dict = field(default_factory=dict)  # (T, rows) -> V(T) as `at` last gave it, emptied by each note

    def for_drafter(self, name: str) -> "ForwardCosts":
        """These forward costs (shared: what one notes, all read) with `name`'s drafting costs."""
        mine = self.drafters.setdefault(name, DraftCosts())
        return ForwardCosts(self.seconds, self.timings, self.drafters, mine, self.worked_out)

    @property
    def draft(self) -> dict[int, float]:
        return self.drafted.per_position

    def note_read(self, tokens: int, seconds: float) -> None:
        self.drafted.read_tokens = READ_MEMORY * self.drafted.read_tokens + tokens
        self.drafted.read_seconds = READ_MEMORY * self.drafted.read_seconds + max(0.0, seconds)

    def read_cost(self) -> float:
        """r: seconds the draft spends on each token it reads of a row it is behind on; 0 until measured."""
        d = self.drafted
        return d.read_seconds / d.read_tokens if d.read_tokens else 0.0

    def note(self, tokens: int, seconds: float) -> None:
        _note(self.seconds, self.timings, tokens, seconds)
        self.worked_out.clear()

    def note_draft(self, rows: int, seconds: float) -> None:
        _note(self.drafted.per_position, self.drafted.timings, rows, seconds)

    def draft_at(self, rows: int) -> float | None:
        """d_B as measured at B rows, between and past measured B along the nearest; None before any was."""
        return interpolate(self.draft, rows, rising=True) if self.draft else None

    def at(self, tokens: float, rows: int) -> float | None:
        """V(T): as theory.interpolate reads measured costs (between two widths on the line through them, past the
        ends along the nearest two, never falling), each width no dearer than any wider one; with one width
        measured, a slope of PRIOR_SLOPE per row's share; None before anything was measured."""
        if not self.seconds:
            return None
        if (tokens, rows) not in self.worked_out:  # a step prices every count of rows at every γ: once per timing
            self.worked_out[tokens, rows] = self._forward(tokens, rows)
        return self.worked_out[tokens, rows]

    def _forward(self, tokens: float, rows: int) -> float:
        if len(self.seconds) == 1:
            ((base, seconds),) = self.seconds.items()
            return seconds * (1 + PRIOR_SLOPE * (tokens - base) / max(1, rows))
        capped = {}
        cheapest = float("inf")
        for width in sorted(self.seconds, reverse=True):  # widest first: each the cheapest of it and every wider
            cheapest = capped[width] = min(cheapest, self.seconds[width])
        return interpolate(capped, tokens, rising=True)


def _note(table: dict, timings: dict, key: int, seconds: float) -> None:
    """The median of the last RECENT timings at `key` becomes its cost."""
    recent = timings.setdefault(key, [table[key]] if key in table else [])
    recent[:] = [*recent[-(RECENT - 1) :], seconds]
    table[key] = statistics.median(recent)


@dataclass
class BatchGamma:
    """Adaptive γ for a batch: the γ with the most expected tokens per second for the rows still decoding."""

    max_gamma: int
    costs: ForwardCosts
    copies: bool = False  # the drafter copies spans: acceptance counted by position, shared by the rows
    probe_after: int = 8
    memory: float = 0.9
    smoothing: float = 0.3
    rows: int = 1  # rows decoding now
    draft_per_token: float | None = None  # d_k as the caller fixes it, whatever k (default: as measured)
    bookkeeping: float | None = None
    nodes_per_gamma: float = 1.0
    plain_run: int = 0
    probes: int = 0  # probes so far: which row probes next
    accepted: dict = field(default_factory=dict)  # row -> decayed accepted drafts
    tested: dict = field(default_factory=dict)
    held_at: list = field(default_factory=list)  # by position, for a copy: decayed held / tested, shared by rows
    tested_at: list = field(default_factory=list)
    chosen: list = field(default_factory=list)  # (rows, γ) of every step, for the screen
    behind: dict = field(default_factory=dict)  # row -> tokens the draft has not read (this step's)
    left: dict = field(default_factory=dict)  # row -> tokens it may still write (this step's)
    seen: set = field(default_factory=set)  # every row this run decoded
    flow: float = 0.0  # tokens of rows joining a batch that decodes on, per step: a moving average from 0
    flow_steps: int = 0  # steps the flow averaged: what its start at 0 still weighs is memory ** flow_steps
    prior: float | None = None  # α of a row before it drafts (default: as earlier runs of the drafter left it)

    def __post_init__(self):
        if self.prior is None:
            self.prior = self.costs.drafted.prior_alpha()

    @classmethod
    def for_drafter(cls, max_gamma: int, profile: "DrafterProfile", costs: ForwardCosts, rows: int) -> "BatchGamma":
        return cls(max_gamma, costs, copies=profile.copies or profile.drafts_block, rows=rows)

    def alpha(self, row: int) -> float:
        return self.accepted.get(row, PRIOR_DRAFTS * self.prior) / self.tested.get(row, PRIOR_DRAFTS)

    def verify_cost(self, tokens: float) -> float:
        forward = self.costs.at(tokens, self.rows)
        if forward is None:
            forward = 1.0 + PRIOR_SLOPE * (tokens - self.rows) / max(1, self.rows)  # only ratios matter
        return forward + (self.bookkeeping or 0.0)

    def rate(self, gamma: int, rows: list[int], drafting: list[int] | None = None, perfect: bool = False) -> float:
        """Expected tokens per second of a step of `rows` where `drafting` (default: all of them) draft γ and the
        others decode plainly (γ = 0: a plain step); `perfect`: as if every draft held. The forward is packed: each
        row takes its own positions, so a row's γ costs its γ nodes, and the draft feeds only the rows drafting."""
        batch = len(rows)
        drafting = rows if drafting is None else drafting
        if gamma == 0 or not drafting:
            return batch / self.verify_cost(batch)
        made = [self.made(row, gamma, perfect) for row in drafting]
        shares = sum(self.read_share(row, e) for row, e in zip(drafting, made))
        return self.pricer(batch)(gamma, len(drafting), sum(made), shares)

    def pricer(self, batch: int):
        """rate() of a step of `batch` rows as a function of γ, the rows drafting, Σ E_b over them and Σ of the shares
        of their reads the step pays (in tokens), what no choice of the step changes read once."""
        read = self.costs.read_cost()
        joining = self.joining()
        drafted = {}

        def price(gamma: int, drafting: int, made: float, shares: float) -> float:
            if drafting not in drafted:
                drafted[drafting] = self.draft_cost(drafting)
            tokens = made + batch - drafting
            flow = joining * drafting / batch  # a row that joins is read once it drafts: as often as rows do
            reads = read * shares + read * flow
            drafts = gamma * drafted[drafting] + reads  # what no acceptance changes: `perfect` pays it too
            return tokens / (drafts + self.verify_cost(batch + self.nodes_per_gamma * gamma * drafting))

        return price

    def joining(self) -> float:
        """The flow as the steps so far measured it: the moving average less the weight its start at 0 still has (a
        batch's first joins are its flow, not a tenth of it)."""
        return self.flow / (1 - self.memory**self.flow_steps) if self.flow else 0.0

    def best(self, rows: list[int], perfect: bool = False) -> tuple[float, int, list[int]]:
        """The step with the most expected tokens per second: (its rate, γ, the rows drafting). For each γ the rows
        are taken best first, by the tokens drafting adds to a row less what its reading costs the batch (its share
        of the read, in tokens a plain step of the batch writes in that time), and every count of them is priced
        (running sums over that order: a step's price in a handful of operations, so a simulator can afford it)."""
        plain = self.rate(0, rows)
        price = self.pricer(len(rows))
        found = (plain, 0, [])
        read = self.costs.read_cost()
        for gamma in range(1, self.max_gamma + 1):
            made = {r: self.made(r, gamma, perfect) for r in rows}
            spent = {r: self.read_share(r, made[r]) for r in rows}
            judged = {r: self.read_share(r, self.made(r, gamma)) for r in rows} if perfect else spent
            order = sorted(rows, key=lambda r: -(made[r] - 1 - plain * (read * judged[r])))
            sums = zip(accumulate(made[r] for r in order), accumulate(spent[r] for r in order))
            for count, (tokens, shares) in enumerate(sums, start=1):
                rate = price(gamma, count, tokens, shares)
                if rate > found[0]:
                    found = (rate, gamma, order[:count])
        return found if perfect or self.flow else self.with_last_rows(*found, rows, plain)

    def with_last_rows(self, rate: float, gamma: int, drafting: list[int], rows: list[int], plain: float) -> tuple:
        """In a batch no row joins, the batch ends with its last row: a row left to decode plainly with more tokens
        to go than the rows drafting have steps becomes that row and ends the batch alone, each of its steps paying
        a whole forward for a token or a few. So such rows draft too, as long as the step still beats a plain one."""
        if not drafting:
            return rate, gamma, drafting
        steps = max(math.ceil(self.left.get(r, 1) / self.made(r, gamma)) for r in drafting)
        last = [r for r in rows if r not in drafting and self.left.get(r, 1) > steps]
        widened = self.rate(gamma, rows, drafting + last) if last else 0.0
        return (widened, gamma, drafting + last) if widened > plain else (rate, gamma, drafting)

    def made(self, row: int, gamma: int, perfect: bool = False) -> float:
        """E_b(γ): the tokens a step drafting γ for `row` is expected to give it (γ + 1 if every draft held)."""
        if perfect:
            return gamma + 1.0
        if self.copies:
            return tokens_by_position(self.held_at, self.tested_at, gamma)
        return expected_tokens_per_step(self.alpha(row), gamma)

    def read_share(self, row: int, made: float) -> float:
        """The share of the draft's reading of `row` (the tokens it is behind on) that a step making `made` of its
        tokens pays: the read serves the row's remaining steps (tokens left over E_b), so behind_b · E_b / left_b."""
        return self.behind.get(row, 0) * min(1.0, made / max(1, self.left.get(row, 1)))

    def measured_draft_cost(self, drafting: int) -> float | None:
        """d_k for k rows drafting: as fixed, else as this run and earlier ones on the model measured; None before."""
        return self.costs.draft_at(drafting) if self.draft_per_token is None else self.draft_per_token

    def draft_cost(self, drafting: int) -> float:
        """d_k as measured, else a tenth of a plain step of k rows."""
        d = self.measured_draft_cost(drafting)
        return 0.1 * self.verify_cost(drafting) if d is None else d

    def probe_gap(self, rows: int) -> int:
        """Plain steps before a probe of `rows` rows: probe_after, or as probes that failed at the widest batch not
        above it left it (with more rows drafting pays less), in this run or an earlier one of the same drafter."""
        failed = [w for w in self.costs.drafted.probe_gaps if w <= rows]
        return self.costs.drafted.probe_gaps[max(failed)] if failed else self.probe_after

    def next_gamma(self, rows: list[int], behind: list[int] | None = None, left: list[int] | None = None) -> int:
        """The batch's γ for this step (the largest any row drafts; next_gammas says which rows do)."""
        return max(self.next_gammas(rows, behind, left))

    def next_gammas(self, rows: list[int], behind: list[int] | None = None, left: list[int] | None = None) -> list[int]:
        """Each row's γ for this step: γ for the rows whose drafting pays and 0 for the others, or, on a probe, γ for
        one row. No probe where drafts that all held would still not pay: no acceptance measured could change the
        choice; the next look comes after as many plain steps again. `behind`: per row, the tokens the draft would
        read before drafting for it (default none); `left`: the tokens it may still write (default: one, so a read
        is paid by the step that makes it)."""
        self.rows = len(rows)
        self.behind = dict(zip(rows, behind or [0] * len(rows)))
        self.left = dict(zip(rows, left or [1] * len(rows)))
        going_on = self.seen.intersection(rows)  # none: the batch opens, and what it reads is its own backlog
        joined = sum(self.behind[r] for r in rows if r not in self.seen) if going_on else 0
        self.flow = self.memory * self.flow + (1 - self.memory) * joined
        self.flow_steps = self.flow_steps + 1
        self.seen.update(rows)
        _, gamma, drafting = self.best(rows)
        gaps = self.costs.drafted.probe_gaps
        gap = self.probe_gap(len(rows))
        if gamma:
            self.plain_run = 0
            for width in [w for w in gaps if w <= len(rows)]:  # it pays here, so it may with fewer rows
                del gaps[width]
        elif self.plain_run >= gap and not self.best(rows, perfect=True)[1]:
            self.plain_run = 0  # no acceptance could make drafting pay yet: look again after as many plain steps
        elif self.plain_run >= gap:
            unread = {r: max(1, self.behind.get(r, 0)) for r in rows}  # the root and a last draft read alike
            cheapest = [r for r in rows if unread[r] == min(unread.values())]  # a probe drafts once: read little
            drafting = [cheapest[self.probes % len(cheapest)]]
            gamma = max(range(1, self.max_gamma + 1), key=lambda g: self.rate(g, rows, drafting))
            self.plain_run = 0
            self.probes = self.probes + 1
            gaps[len(rows)] = min(2 * gap, LONGEST_PROBE_GAP * self.probe_after)  # unless drafting comes back
        else:
            self.plain_run += 1
        gammas = [gamma if r in drafting else 0 for r in rows]
        self.chosen.append((len(rows), gamma))
        return gammas

    def count(self, row: int, held: float, tested: float) -> None:
        """Drafts of `row` held and tested, over what earlier steps counted (decayed by `memory`)."""
        self.accepted[row] = self.memory * self.accepted.get(row, PRIOR_DRAFTS * self.prior) + held
        self.tested[row] = self.memory * self.tested.get(row, PRIOR_DRAFTS) + tested

    # GammaPolicy (gamma_policy.py): what the decode loop asks, of the whole batch

    def judges(self) -> None:
        """Nothing: in a batch γ is the batch's, so no row's drafter sizes its own draft."""
        return None

    def learn(self, step: "FinishedStep") -> None:
        """The step as observe takes it: each row's nodes sent, drafts held and whether one was rejected."""
        verdicts = [(r, len(c.tree.tokens), c.verdict.accepted, c.rejected) for r, c in zip(step.rows, step.checked)]
        self.observe(step.gamma, verdicts, step.verify_tokens, step.draft_s, step.verify_s, step.bookkeeping_s)

    def observe(
        self, gamma: int, verdicts: list, batch_tokens: int, draft_s: float, verify_s: float, bookkeeping_s: float
    ):
        """One finished step: γ, each row's (row, nodes sent, accepted, whether a draft was rejected), the positions
        the verify forward computed (every row padded to the widest) and the step's three timings."""
        blend = lambda old, new: new if old is None else (1 - self.smoothing) * old + self.smoothing * new  # noqa: E731
        self.costs.note(batch_tokens, verify_s)
        self.bookkeeping = blend(self.bookkeeping, bookkeeping_s)
        drafted = [v for v in verdicts if v[1]]
        if gamma == 0 or not drafted:
            return
        read = sum(self.behind.get(v[0], 0) for v in drafted)
        if read <= len(drafted):  # no row behind by more than its last draft: the draft's seconds are all drafting
            self.costs.note_draft(len(drafted), draft_s / gamma)
        elif (d := self.measured_draft_cost(len(drafted))) is not None:  # the rest read, against a d_B measured
            self.costs.note_read(read, draft_s - gamma * d)
        self.nodes_per_gamma = blend(self.nodes_per_gamma, sum(v[1] for v in drafted) / (gamma * len(drafted)))
        for row in (v[0] for v in verdicts if not v[1]):  # left out while others drafted: what it said ages
            self.count(row, (1 - self.memory) * PRIOR_DRAFTS * self.prior, (1 - self.memory) * PRIOR_DRAFTS)
        for row, _, accepted, rejected in drafted:
            self.count(row, accepted, accepted + rejected)
            self.costs.drafted.note_verdict(accepted, rejected)
            if self.copies:
                count_positions(self.held_at, self.tested_at, self.memory, accepted, rejected)
