"""The one event type: engine, CLI, UI and tests all speak StepEvent. Pure Python, no torch.

A step is one target forward. Plain decoding is a step that proposes nothing, so a consumer
cannot tell plain from speculative except by what the events contain.
"""

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields, replace

from . import reading as read
from .errors import InvalidEvent

PROBABILITY = 1.001  # the most a recorded probability may be: 1, and what a float's round-off adds to it


def _chances(values, what: str) -> tuple[float, ...]:
    return read.each(read.number, values, what, 0.0, PROBABILITY)


NEXT_KINDS = ("correction", "bonus", "plain", "end")
PLAIN = "plain"  # the side that decodes with no drafter, as traces, views, reports and the screen name it

# Where a step's draft came from, in words (StepEvent.origin): a lookup's copy names its source; a hybrid's step that
# its model drafted instead of copying names the model.
PROMPT = "the prompt"
OUTPUT = "this output"
EARLIER = "an earlier run"
MODEL = "the draft model"
HEAD = "the EAGLE head"
DRAFTED = (MODEL, HEAD)


@dataclass(frozen=True)
class Trial:
    """One drafted token put to the test, in the order the acceptance rule tried it."""

    depth: int  # its position in the draft: 1 = the token right after the last committed one
    token: int
    p: float  # the target's probability of it when tried (a later sibling: of what the rejected ones left over)
    q: float  # the drafter's probability of it (1 for a point mass: a lookup or Medusa names one token)
    accepted: bool
    u: float | None = None  # the uniform draw that decided it: accepted iff u < p / q (greedy and typical draw none)
    bar: float | None = None  # typical acceptance: accepted iff p > this bar, min(ε, δ·exp(−H(p)))


@dataclass(frozen=True)
class Leading:
    """The leading tokens at one position of the shown candidate, and how likely each one was."""

    ids: tuple[int, ...]  # the target's and the drafter's likeliest tokens, the drafted one and the one emitted here
    p: tuple[float, ...]  # the target's probability of each
    q: tuple[float, ...] | None = None  # the drafter's (a sampled chain only)
    r: tuple[float, ...] | None = None  # where the target's own token was drawn from when not p: the residual


@dataclass(frozen=True)
class StepDetail:
    """What a step's explanation needs, bounded: a few leading tokens per position, never whole distributions."""

    rule: str  # greedy | lossless | typical
    trials: tuple[Trial, ...]
    leading: tuple[Leading, ...]  # position 1 .. the target's own token, along the shown candidate

    @staticmethod
    def from_json(data: dict) -> "StepDetail":
        """Read back, every value checked (reading.py): a damaged trace fails here, in one line."""
        data = read.mapping(data, "detail")

        def trial(t, what):
            t = read.mapping(t, what)
            return Trial(
                read.integer(t["depth"], f"{what}.depth", 1),
                read.integer(t["token"], f"{what}.token"),
                read.number(t["p"], f"{what}.p", 0.0, PROBABILITY),
                read.number(t["q"], f"{what}.q", 0.0, PROBABILITY),
                read.flag(t["accepted"], f"{what}.accepted"),
                read.maybe(read.number, t.get("u"), f"{what}.u", 0.0, 1.0),
                read.maybe(read.number, t.get("bar"), f"{what}.bar", 0.0, 1.0),
            )

        def lead(x, what):
            x = read.mapping(x, what)
            ids = read.each(read.integer, x["ids"], f"{what}.ids")
            q, r = (read.maybe(_chances, x.get(k), f"{what}.{k}") for k in ("q", "r"))
            return Leading(ids, _chances(x["p"], f"{what}.p"), q, r)

        trials = read.each(trial, data["trials"], "detail.trials")
        return StepDetail(read.text(data["rule"], "detail.rule"), trials, read.each(lead, data["leading"], "leading"))

    def up_to(self, depth: int) -> "StepDetail":
        """The explanation of the first `depth` draft positions only (the run ended there)."""
        return replace(self, trials=tuple(t for t in self.trials if t.depth <= depth), leading=self.leading[:depth])


@dataclass(frozen=True)
class StepEvent:
    index: int
    proposed: tuple[int, ...]  # draft tokens shown to the target
    accepted: int  # length of the accepted prefix of `proposed`
    next_token: int | None  # token the target added; None when an accepted draft token ended the run
    next_kind: str  # correction (after a rejection) | bonus (all accepted) | plain (nothing proposed) | end (no token
    #                 of the target's own: an accepted draft token was EOS)
    p: tuple[float, ...]  # target probability of each proposed token
    q: tuple[float, ...] | None  # drafter probability of each proposed token; None for deterministic drafters
    draft_s: float
    verify_s: float  # the verify forward alone
    step_s: float  # wall time of the whole step: draft + verify + bookkeeping (the acceptance rule, the rollback, ...)
    draft_forwards: int = 0
    prefill_s: float = 0.0  # set on the first event: prompt processing before it
    finish: str | None = None  # set on the last event: "eos" or "length"
    candidates: tuple[tuple[int, ...], ...] | None = None  # a tree step: every candidate; `proposed` is the winner's
    winner: int | None = None  # index into `candidates` of the path the target accepted
    gamma: int = 0  # draft length asked of the drafter this step (adaptive γ: chosen per step; 0 = a plain step)
    forward_tokens: int = 1  # tokens in the verify forward: the last token plus every draft or tree node
    detail: StepDetail | None = None  # how the verdict came about (a drafting step); None for a plain step
    draft_tokens: tuple[str, ...] | None = None  # a draft with another tokenizer: its guess in its own tokens
    origin: str | None = None  # a copied draft: where from ("the prompt", "this output", "an earlier run")
    block: int = 0  # a block drafter's step: the positions its one pass filled (the first γ of them verified)
    batch: int = 1  # rows decoded together in this step's forward (1: the prompt alone)
    batch_tokens: int = 0  # tokens that forward took over all its rows (0 in traces written before batches)
    draft_read: int = 0  # tokens of this row's text its drafter read before drafting (catching up), if it drafted

    def __post_init__(self):  # checked always (not with assert, which python -O drops): traces are read back
        n = len(self.proposed)
        if not 0 <= self.accepted <= n:
            raise InvalidEvent(f"step {self.index}: {self.accepted} drafts accepted of {n} proposed")
        if self.next_kind not in NEXT_KINDS:
            raise InvalidEvent(f"step {self.index}: the next token's kind {self.next_kind!r} is not in {NEXT_KINDS}")
        if len(self.p) != n or (self.q is not None and len(self.q) != n):
            raise InvalidEvent(f"step {self.index}: p and q must have one value per proposed token ({n})")
        if self.candidates is not None and not (self.winner is not None and 0 <= self.winner < len(self.candidates)):
            raise InvalidEvent(f"step {self.index}: winner {self.winner!r} is not one of its candidates")

    @property
    def tokens(self) -> tuple[int, ...]:
        """Tokens this step appended to the output, in order."""
        extra = () if self.next_token is None else (self.next_token,)
        return self.proposed[: self.accepted] + extra

    def ended_by_draft(self, n: int) -> "StepEvent":
        """This step cut after its n-th draft token, an accepted EOS: the run ends there, with no token of the
        target's own, and nothing after it was ever tested."""
        return replace(
            self,
            proposed=self.proposed[:n],
            accepted=n,
            next_token=None,
            next_kind="end",
            p=self.p[:n],
            q=None if self.q is None else self.q[:n],
            detail=None if self.detail is None else self.detail.up_to(n),
            finish="eos",
        )

    def to_json(self) -> dict:
        out = asdict(self)
        out["next"] = out.pop("next_token")
        return out

    @staticmethod
    def from_json(data: dict) -> "StepEvent":
        """The inverse of to_json (a recorded trace read back), every value checked for the kind and range it was
        written with (reading.py): a damaged trace fails here, in one line naming the field."""
        data = dict(read.mapping(data, "step"))
        step = f"step {data.get('index')!r}"[:40]
        data["next_token"] = read.maybe(read.integer, data.pop("next"), f"{step}: next")
        for key in (f.name for f in fields(StepEvent) if f.type in (int, "int")):
            if key in data:
                data[key] = read.integer(data[key], f"{step}: {key}")
        data["proposed"] = read.each(read.integer, data["proposed"], f"{step}: proposed")
        data["p"] = _chances(data["p"], f"{step}: p")
        data["q"] = read.maybe(_chances, data.get("q"), f"{step}: q")
        for key in ("draft_s", "verify_s", "step_s", "prefill_s"):
            if key in data:
                data[key] = read.number(data[key], f"{step}: {key}")
        for key in ("next_kind", "finish", "origin"):
            data[key] = read.maybe(read.text, data.get(key), f"{step}: {key}")
        if data.get("candidates") is not None:
            data["candidates"] = read.each(lambda c, w: read.each(read.integer, c, w), data["candidates"], step)
        data["winner"] = read.maybe(read.integer, data.get("winner"), f"{step}: winner")
        if data.get("detail") is not None:
            data["detail"] = StepDetail.from_json(data["detail"])
        data["draft_tokens"] = read.maybe(lambda v, w: read.each(read.text, v, w), data.get("draft_tokens"), step)
        return StepEvent(**data)


@dataclass(frozen=True)
class Metrics:
    new_tokens: int
    tokens_per_s: float  # decode speed: new tokens / decode seconds (prefill excluded)
    acceptance_rate: float | None  # alpha = accepted / drafted; None when nothing was drafted
    mean_tokens_per_step: float  # tau = new tokens / target forwards
    target_forwards: int  # decode forwards (the prefill forward is counted in prefill_s)
    draft_forwards: int
    draft_s: float
    verify_s: float
    prefill_s: float
    decode_s: float
    total_s: float  # prefill + decode
    # k = 1, 2, ...: (steps that tested a k-th draft token, those of them that accepted it). A step tests its k-th
    # token when it drafted one and accepted the k − 1 before it.
    by_position: tuple[tuple[int, int], ...] = ()
    accepted_lengths: tuple[int, ...] = ()  # drafting steps by the drafts they accepted: 0, 1, ..., the longest draft

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def acceptance_by_position(self) -> list[float | None]:
        """α_k, k = 1, 2, ...: of the steps that tested a k-th draft token, the share that accepted it."""
        return acceptance_rates(self.by_position)


def summarize(events: Iterable[StepEvent]) -> Metrics:
    events = list(events)
    new = sum(len(e.tokens) for e in events)
    drafted = sum(len(e.proposed) for e in events)
    accepted = sum(e.accepted for e in events)
    decode_s = sum(e.step_s for e in events)
    prefill_s = sum(e.prefill_s for e in events)
    return Metrics(
        new_tokens=new,
        tokens_per_s=new / decode_s if decode_s > 0 else 0.0,
        acceptance_rate=accepted / drafted if drafted else None,
        mean_tokens_per_step=new / len(events) if events else 0.0,
        target_forwards=len(events),
        draft_forwards=sum(e.draft_forwards for e in events),
        draft_s=sum(e.draft_s for e in events),
        verify_s=sum(e.verify_s for e in events),
        prefill_s=prefill_s,
        decode_s=decode_s,
        total_s=prefill_s + decode_s,
        by_position=position_counts(events),
        accepted_lengths=accepted_lengths(events),
    )


def position_counts(events: list[StepEvent], depth: int | None = None) -> tuple[tuple[int, int], ...]:
    """(tested, accepted) for each draft position k = 1..depth (default: the longest draft)."""
    depth = max((len(e.proposed) for e in events), default=0) if depth is None else depth
    out = []
    for k in range(1, depth + 1):
        tested = [e for e in events if len(e.proposed) >= k and e.accepted >= k - 1]
        out.append((len(tested), sum(e.accepted >= k for e in tested)))
    return tuple(out)


def accepted_lengths(events: list[StepEvent]) -> tuple[int, ...]:
    drafted = [e for e in events if e.proposed]
    counts = [0] * (1 + max((len(e.proposed) for e in drafted), default=-1))
    for e in drafted:
        counts[e.accepted] += 1
    return tuple(counts)


def generated_ids(events: Iterable[StepEvent]) -> list[int]:
    return [t for e in events for t in e.tokens]


def depth_acceptance(events: Iterable[StepEvent], depth: int) -> list[float | None]:
    """α by draft position k = 1..depth (Medusa: position k + 1 is head k's guess)."""
    return acceptance_rates(position_counts(list(events), depth))


def acceptance_rates(counts: Iterable[tuple[int, int]]) -> list[float | None]:
    """α_k from (tested, accepted) counts by position: of the steps that drafted a k-th token and accepted the k − 1
    before it, the share that accepted it too (None where no step tested one)."""
    return [accepted / tested if tested else None for tested, accepted in counts]
