"""A discrete-event simulator of the scheduler the traffic runs measure, pure Python, calibrated from those runs.

The scheduler is the decode loop's: at each step boundary the requests that have arrived join, up to max_rows, after
their prompts are read; k of the B decoding rows draft γ (all of them at a fixed γ) and the target verifies all rows
in one packed forward, each row's own positions; each row leaves when it has its tokens. A step's seconds and tokens
come from what was measured:

    prefill(P)     = b·P                              P: the tokens of the prompts read together; b the median ratio
    step(B, γ, k)  = draft(k, γ) + r·R + V(B + k·γ) + rest(B)       past what was measured: a least-squares line
    R              = the tokens of the drafting rows' texts the draft has not read yet (a row's whole text the first
                     step it drafts, what plain steps wrote since), which it reads before drafting; r its measured cost
                     a token, draft(k, γ) measured on steps that read nothing more
    tokens(γ)      = the new tokens a drafting row got per step at that γ, on average (a row not drafting gets one)
    γ, k (B)       = the lane's γ for all rows, or vLLM's table's at B rows (the γ it ran most often there), the k
                     rows with the least unread drafting; adaptive: what adaptive γ's own pricing
                     (engine/batch_gamma.py) chooses at each simulated step, given these costs, the α that makes
                     E(α, γ) the measured tokens, each row's unread text and tokens left, and the joins so far: so it
                     answers to the rate as the engine does, drafting while few rows decode and reading joiners only
                     where that pays

V, draft and rest are read between measured points as theory.interpolate reads them (rising, never below 0). So the
simulator says what this device would do at rates and request counts nobody ran, and it is held to the runs it was
not calibrated on: its error is shown beside each figure.
"""

import heapq
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from statistics import fmean, median

from ..analysis.theory import expected_tokens_per_step, interpolate
from ..engine.batch_gamma import BatchGamma, DraftCosts, ForwardCosts
from ..errors import InvalidRequest
from ..settings import parse_lane
from .latency import RateFigures, RequestTiming
from .results import TrafficRun
from .traffic_plan import Slo, poisson_arrivals


@dataclass(frozen=True)
class Calibration:
    """One lane on one device, as measured: what a step and a prefill cost, and what a step yields."""

    verify_s: dict  # forward tokens -> seconds
    draft_s: dict  # (rows drafting, γ) -> seconds, γ > 0, of steps where the draft read nothing of the rows' texts
    rest_s: dict  # rows -> seconds of a step besides its draft and verify
    prefill: tuple[float, float]  # a, b of a + b·tokens (a is 0 as calibrated: the median seconds per token)
    tokens_at: dict  # γ -> mean new tokens per drafting row per step (γ 0: per row)
    gamma_at: dict  # rows -> (γ, rows drafting) the lane chose most often there
    lengths: dict  # prompt -> the tokens a request of it wrote
    prompt_tokens: dict  # prompt -> its tokens
    read_s: float = 0.0  # what the draft spends on each token of a row's text it catches up on
    adapts: int = 0  # adaptive γ's largest draft (0: the lane follows gamma_at)

    @classmethod
    def of(cls, runs: list[TrafficRun], prompt_tokens: dict, device_runs: list[TrafficRun] | None = None, adapts=0):
        """From a lane's runs; the target's own costs (its verify forward, the rest of a step, the prefill), which
        are the device's and no lane's, from `device_runs` where given (every lane's: more steps at more widths).
        `adapts`: the lane is adaptive γ up to that draft length."""
        yields = defaultdict(list)
        chosen = defaultdict(list)
        device_runs = runs if device_runs is None else device_runs
        verify = _voted(device_runs, lambda s: (s.forward_tokens, s.verify_s))
        rest = _voted(device_runs, lambda s: (s.rows, max(0.0, s.step_s - s.draft_s - s.verify_s)))
        steady = lambda s: s.read_tokens <= s.drafting_rows  # noqa: E731 (the root and, after a full hold, a draft)
        draft = _voted(runs, lambda s: ((s.drafting_rows, s.gamma), s.draft_s) if s.gamma and steady(s) else None)
        reading = [s for run in runs for s in run.steps if s.gamma and not steady(s)]
        for run in runs:
            for s in run.steps:
                k = s.drafting_rows
                yields[s.gamma].append((s.new_tokens - (s.rows - k)) / k if k else s.new_tokens / s.rows)
                chosen[s.rows].append((s.gamma, k))
        lengths = {t.prompt: t.tokens for run in runs for t in run.timings}
        typical = round(fmean(lengths.values())) if lengths else 1
        lengths |= {p: typical for p in prompt_tokens if p not in lengths}  # a prompt no calibration run asked
        return cls(
            verify_s=verify,
            draft_s=draft,
            rest_s=rest,
            prefill=(
                0.0,
                median(ratios)
                if (ratios := [p.seconds / p.tokens for run in device_runs for p in run.prefills if p.tokens])
                else 0.0,
            ),
            tokens_at={k: fmean(v) for k, v in yields.items()},
            gamma_at={k: Counter(v).most_common(1)[0][0] for k, v in chosen.items()},
            lengths=lengths,
            prompt_tokens=dict(prompt_tokens),
            read_s=_read_cost(reading, draft),
            adapts=adapts,
        )

    def alpha(self) -> float:
        """α of drafts that hold independently, as the drafting rows' measured tokens per step say: the α whose E(α, γ)
        over the γ measured is on average what they gave (bisection; E rises with α)."""
        measured = [(g, tokens) for g, tokens in self.tokens_at.items() if g > 0]
        low, high = 0.0, 1.0
        for _ in range(40):
            mid = (low + high) / 2
            short = sum(expected_tokens_per_step(mid, g) - tokens for g, tokens in measured) < 0
            low, high = (mid, high) if short else (low, mid)
        return (low + high) / 2

    def policy(self) -> BatchGamma:
        """Adaptive γ as the engine runs it, pricing steps with these costs: V(T) the verify forward, d_k a drafted
        position's seconds at k rows (each γ's draft over γ, their median), r a token read, a step's rest. Every
        row's drafts hold with one α, the lane's: a copying drafter, which the engine prices by how often each
        position held, is priced here as if its drafts held independently."""
        per_position = defaultdict(list)
        for (rows, gamma), seconds in self.draft_s.items():
            per_position[rows].append(seconds / gamma)
        drafted = DraftCosts({k: median(v) for k, v in per_position.items()}, read_seconds=self.read_s, read_tokens=1.0)
        rest = median(self.rest_s.values()) if self.rest_s else 0.0
        costs = ForwardCosts(dict(self.verify_s), drafted=drafted)
        return BatchGamma(self.adapts, costs, bookkeeping=rest, prior=self.alpha())

    def gamma(self, rows: int) -> tuple[int, int]:
        """(γ, rows drafting) at `rows` rows: as chosen at the nearest count measured, at most `rows` drafting."""
        near = min(self.gamma_at, key=lambda b: (abs(b - rows), b))
        gamma, drafting = self.gamma_at[near]
        return gamma, rows if drafting == near else min(rows, drafting)  # all rows, or as many as there

    def step_s(self, rows: int, gamma: int, drafting: int) -> float:
        seconds = read_cost(self.verify_s, rows + drafting * gamma) + read_cost(self.rest_s, rows)
        return seconds + (_draft_at(self.draft_s, drafting, gamma) if gamma and drafting else 0.0)

    def new_tokens(self, gamma: int) -> float:
        if gamma in self.tokens_at:
            return self.tokens_at[gamma]
        return interpolate(self.tokens_at, gamma) if self.tokens_at else 1.0

    def prefill_s(self, tokens: int) -> float:
        a, b = self.prefill
        return max(0.0, a + b * tokens)


def _read_cost(steps: list, draft: dict) -> float:
    """r: the median over steps that read rows' texts of the draft's seconds past a steady step's, per token read."""
    past = [(s.draft_s - _draft_at(draft, s.drafting_rows, s.gamma)) / s.read_tokens for s in steps]
    return max(0.0, median(past)) if past else 0.0


def _draft_at(draft: dict, rows: int, gamma: int) -> float:
    at = {b: seconds for (b, g), seconds in draft.items() if g == gamma}
    return read_cost(at, rows) if at else 0.0


def _voted(runs: list[TrafficRun], read) -> dict:
    """key -> seconds, from `read(step)` = (key, seconds) or None: each run's median at the key, then the median of
    the runs' (one vote a run), so a run the machine stalled for a while moves no cost."""
    votes = defaultdict(list)
    for run in runs:
        mine = defaultdict(list)
        for step in run.steps:
            if (found := read(step)) is not None:
                mine[found[0]].append(found[1])
        for key, seconds in mine.items():
            votes[key].append(median(seconds))
    return {key: median(v) for key, v in votes.items()}


def read_cost(costs: dict, x: float) -> float:
    """A measured cost at x: between measured points as theory.interpolate reads them; past the largest measured, on
    the least-squares line through all of them (never below the largest's own), not along the last two points, which
    a few noisy timings can tilt far off."""
    if not costs:
        return 0.0
    if x <= max(costs) or len(costs) < 3:
        return interpolate(costs, x, rising=True)
    a, b = _line(list(costs.items()))
    return max(costs[max(costs)], a + b * x)


def _line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least squares a + b·x; one point (or one x): a line through 0 and it."""
    if not points:
        return 0.0, 0.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx = fmean(xs)
    my = fmean(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    if spread == 0:
        return 0.0, my / mx if mx else 0.0
    b = sum((x - mx) * (y - my) for x, y in points) / spread
    return my - b * mx, b


def simulate(
    calibration: Calibration, arrivals: tuple[float, ...], prompts: list[int], max_rows: int
) -> list[RequestTiming]:
    """Request r (asking prompt prompts[r], arriving at arrivals[r]) served as the decode loop serves it."""
    order = sorted(range(len(arrivals)), key=lambda r: (arrivals[r], r))
    queue = []  # decoding: [request, tokens so far (fractional), tokens the draft read]
    now = 0.0
    decoding = []
    at = 0
    admitted = {}
    first = {}
    last = {}
    policy = calibration.policy() if calibration.adapts else None  # one per run, as the engine's
    while at < len(order) or queue or decoding:
        while at < len(order) and arrivals[order[at]] <= now:
            heapq.heappush(queue, (arrivals[order[at]], order[at]))
            at += 1
        if not decoding and not queue:
            now = arrivals[order[at]]
            continue
        joining = [heapq.heappop(queue)[1] for _ in range(min(len(queue), max_rows - len(decoding)))]
        if joining:
            admitted.update(dict.fromkeys(joining, now))
            now += calibration.prefill_s(sum(calibration.prompt_tokens[prompts[r]] for r in joining))
            decoding += [[r, 0.0, 0.0] for r in joining]
        gamma, drafting, read = _drafting(calibration, policy, decoding, prompts)
        now += calibration.step_s(len(decoding), gamma, len(drafting)) + calibration.read_s * read
        gained = calibration.new_tokens(gamma)
        staying = []
        for i, row in enumerate(decoding):
            r = row[0]
            drafts = i in drafting
            row[1] = min(row[1] + (gained if drafts else 1.0), calibration.lengths[prompts[r]])
            row[2] = calibration.prompt_tokens[prompts[r]] + row[1] if drafts else row[2]  # drafting: all read
            first.setdefault(r, now)
            last[r] = now
            if row[1] < calibration.lengths[prompts[r]]:
                staying.append(row)
        decoding = staying
    return [
        RequestTiming(prompts[r], arrivals[r], admitted[r], first[r], last[r], calibration.lengths[prompts[r]])
        for r in range(len(arrivals))
    ]


def _drafting(calibration: Calibration, policy: BatchGamma | None, decoding: list, prompts: list[int]):
    """This step's γ, which of the decoding rows draft (their indices) and the tokens of their texts the draft reads
    first: adaptive γ's choice, given each row's unread text (the root at least) and tokens left; else the lane's γ
    at this many rows, for the rows the draft read most of."""
    if policy is None:
        gamma, count = calibration.gamma(len(decoding))
        if not gamma:
            return 0, set(), 0.0
        unread = [_unread(calibration, row, prompts) for row in decoding]
        drafting = set(sorted(range(len(unread)), key=unread.__getitem__)[:count])
        return gamma, drafting, sum(unread[i] for i in drafting)
    unread = [_unread(calibration, row, prompts) for row in decoding]
    left = [max(1, round(calibration.lengths[prompts[r]] - made)) for r, made, _ in decoding]
    gammas = policy.next_gammas([row[0] for row in decoding], [max(1, round(u)) for u in unread], left)
    drafting = {i for i, g in enumerate(gammas) if g}
    return max(gammas), drafting, sum(unread[i] for i in drafting)


def _unread(calibration: Calibration, row: list, prompts: list[int]) -> float:
    """The tokens of a decoding row's text the draft has not read, past the steady feed (the root, a last draft)."""
    behind = calibration.prompt_tokens[prompts[row[0]]] + row[1] - row[2]
    return behind if behind > 1 else 0.0


def simulated_figures(
    calibration: Calibration, rate: float, arrivals: tuple[float, ...], prompts: list[int], max_rows: int, slo: Slo
) -> RateFigures:
    return RateFigures.of(rate, simulate(calibration, arrivals, prompts, max_rows), slo)


def held_out(view, prompt_tokens: dict, schedules: dict, max_rows: int) -> None:
    """For each lane and rate run: the simulator calibrated on runs at the other rates only (the lane's, and every
    lane's for the device's costs), on the same arrivals, its figures put beside the measured ones (view.simulated)."""
    for lane in view.lanes:
        for rate, arrivals in schedules.items():
            elsewhere = [run for (_, r), runs in view.runs.items() if r != rate for run in runs if not run.stopped]
            others = [run for run in elsewhere if run.lane == lane]
            if not others or not view.rounds_of(lane, rate):
                continue
            calibration = Calibration.of(others, prompt_tokens, elsewhere, adaptive_limit(lane))
            asked = [r % len(prompt_tokens) for r in range(len(arrivals))]
            view.simulated[(lane, rate)] = simulated_figures(calibration, rate, arrivals, asked, max_rows, view.slo)


def projected(view, prompt_tokens: dict, rates: list[float], requests: int, max_rows: int, seed: int) -> dict:
    """Each lane calibrated on all its runs, then `requests` simulated at each of `rates`: lane -> [RateFigures]."""
    out = {}
    for lane in view.lanes:
        every = [run for found in view.runs.values() for run in found if not run.stopped]
        runs = [run for run in every if run.lane == lane]
        if not runs:
            continue
        calibration = Calibration.of(runs, prompt_tokens, every, adaptive_limit(lane))
        asked = [r % len(prompt_tokens) for r in range(requests)]
        out[lane] = [
            simulated_figures(calibration, rate, poisson_arrivals(rate, requests, seed), asked, max_rows, view.slo)
            for rate in rates
        ]
    return out


def project(view, prompt_tokens: dict, requests: int, max_rows: int, seed: int) -> None:
    """The simulator's capacity and stop-paying rate around the rates run (view.projection), timed; nothing for a
    recorded trace's own arrival times (no rate to go around)."""
    if not view.rates or min(view.rates) <= 0:
        return
    began = time.perf_counter()
    view.projection = projected(view, prompt_tokens, rate_grid(view.rates), requests, max_rows, seed)
    view.projection_s = time.perf_counter() - began


def adaptive_limit(lane: str) -> int:
    """G for a lane named NAME@aG (adaptive γ up to G, as the lanes are written), else 0."""
    try:
        written = parse_lane(lane)
    except InvalidRequest:  # a name no run was made under: no limit to read
        return 0
    return written.gamma if written.adaptive and written.gamma else 0


def rate_grid(measured: tuple[float, ...], points: int = 16) -> list[float]:
    """Rates to simulate: from half the lowest measured to twice the highest, evenly on a log scale."""
    low, high = min(measured) / 2, max(measured) * 2
    if points < 2 or low == high:
        return [low]
    return [low * (high / low) ** (i / (points - 1)) for i in range(points)]
