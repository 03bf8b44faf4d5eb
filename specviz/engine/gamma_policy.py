"""How the decode loop gets each step's γ: one protocol, whatever chooses it, so the loop never asks which it has.

    judges()            once, before decoding: what it lends a drafter that sizes its own draft or tree (or None)
    next_gammas(rows, behind, left)   before each step: each row's γ, 0 being a plain step for that row
    learn(step)         after each step: what its rows' verdicts and its timings teach it (a FinishedStep)

Three kinds speak it: FixedGamma (the set γ, or 0 without a drafter, or γ by the batch's size from a table, as vLLM's
num_speculative_tokens_per_batch_size; it learns nothing), GammaController (adaptive.py: one row, priced by its own
V(k) = V(1)·(1 + s·(k − 1))) and BatchGamma (batch_gamma.py: a batch, or a sweep's batch of one, priced by the
measured forward over T tokens).
"""

from dataclasses import dataclass
from typing import Protocol

from ..settings import Settings
from .adaptive import GammaController
from .batch_gamma import BatchGamma, ForwardCosts
from .step import FinishedStep, Judges, RowDrafting


class GammaPolicy(Protocol):
    def judges(self) -> Judges | None:
        """What adaptive γ lends a drafter that decides while drafting (start's `judges`); None: γ is all it gets."""

    def next_gammas(self, rows: list[int], behind: list[int] | None = None, left: list[int] | None = None) -> list[int]:
        """Each row's γ for this step (`rows`: the ids of the rows still decoding, in the batch's order; `behind`: the
        tokens the drafting would read for each before drafting (RowDrafting.behind); `left`: the tokens each may
        still write)."""

    def learn(self, step: FinishedStep) -> None:
        """What a finished step teaches: each row's draft and verdict, and what the step cost."""


def gamma_at(table: tuple, batch: int) -> int:
    """The draft length a table of [first, last, γ] ranges gives a batch of `batch` rows: its range's; below or
    between ranges, the next range's; past the last, the last's (a table measured up to 8 requests says nothing of 9:
    its widest range is the best guess)."""
    return next((gamma for _, last, gamma in table if batch <= last), table[-1][2])


@dataclass(frozen=True)
class FixedGamma:
    """γ as set: every row drafts `gamma` each step (0: plain decoding), or, given a `table` of [first, last, γ]
    ranges, the γ it gives the number of rows decoding (gamma_at: the schedule vLLM follows with such a table),
    whatever the steps show. Given the caller's forward costs, it notes what each step's verify forward cost: a cost
    that adaptive γ stopped paying for (a plain step of a large batch, once one slow measurement made it look dear) is
    kept fresh by the runs that still pay it."""

    gamma: int
    costs: ForwardCosts | None = None
    table: tuple = ()

    def judges(self) -> None:
        return None

    def next_gammas(self, rows: list[int], behind=None, left=None) -> list[int]:
        return [gamma_at(self.table, len(rows)) if self.table else self.gamma] * len(rows)

    def learn(self, step: FinishedStep) -> None:
        if self.costs is not None:
            self.costs.note(step.verify_tokens, step.verify_s)


def gamma_policy(
    settings: Settings,
    drafting: RowDrafting | None,
    rows: int,
    costs: ForwardCosts | None,
    table: tuple = (),
    curve: dict | None = None,
) -> GammaPolicy:
    """The policy for a run: the set γ (0 without a drafter), γ by batch size from `table` where one is given, or
    adaptive γ for the drafter its profile describes, priced by the whole batch's step when several rows decode or
    the caller keeps the forward costs (a sweep's batch of one is priced like its batches); one row by its own
    steps, from the target's measured forward `curve` where its runtime measured one."""
    if drafting is None:
        return FixedGamma(0, costs)
    if table or not settings.adaptive:
        return FixedGamma(settings.gamma, costs, table)
    if rows > 1 or costs is not None:
        return BatchGamma.for_drafter(settings.gamma, drafting.profile, costs or ForwardCosts(), rows)
    return GammaController.for_drafter(settings.gamma, drafting.profile, curve)
