"""The contract between the decode loop and a drafter: each step the drafter hands in a Proposal, the target's
verification hands back a Verdict, and the drafter observes it.

A proposal is candidates, plus the drafter's probabilities q when it sampled a single chain. One candidate is
verified as a chain (the causal mask, any attention kernel); several are merged into a token tree. A drafter
with no q (a lookup, Medusa) proposes point masses: q(x) = 1 for the token it names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .tree import TokenTree, TreeShape, build_tree, fill_shape

if TYPE_CHECKING:
    import torch

    from ..events import Trial
    from .cached_lm import CachedLM


@dataclass(frozen=True)
class Proposal:
    candidates: tuple[tuple[int, ...], ...]  # one chain, or alternatives verified together as a tree
    q: torch.Tensor | None = None  # [g, V] drafter probabilities of a single sampled chain; None: point masses
    forwards: int = 0  # drafter model forwards spent on this proposal
    shape: TreeShape | None = None  # the candidates' trie shape, when the drafter keeps a fixed one
    spelled: tuple[str, ...] | None = None  # the guess in the drafter's own tokens, when its tokenizer is another
    origin: str | None = None  # where a copied draft came from: "the prompt", "this output" or "an earlier run"
    confidence: tuple[float, ...] | None = None  # the drafter's own probability of each token of its first
    # candidate, when those probabilities decided where it stopped
    block: int = 0  # a block drafter: the positions its one pass filled, of which the candidate is the first γ
    origins: tuple[str | None, ...] | None = None  # per candidate, when two drafters' candidates share the step

    def __post_init__(self):
        if not self.candidates or not all(isinstance(c, (tuple, list)) and c for c in self.candidates):
            raise TypeError(
                f"a Proposal's candidates are non-empty token sequences, e.g. ((5, 9),) for one chain; "
                f"got {self.candidates!r}"
            )
        if self.q is not None and len(self.candidates) != 1:
            raise TypeError("q belongs to a single sampled chain")
        if self.origins is not None and len(self.origins) != len(self.candidates):
            raise TypeError("origins name one origin per candidate")

    def tree(self) -> TokenTree:
        return build_tree(self.candidates) if self.shape is None else fill_shape(self.shape, self.candidates)

    def origin_of(self, candidate: int) -> str | None:
        """Where the candidate shown after verification came from (its index among the candidates)."""
        return self.origin if self.origins is None else self.origins[candidate]

    def first_held(self, tree: TokenTree, verdict: Verdict) -> int:
        """How many leading tokens of the first candidate the target kept (a chain: the accepted count)."""
        kept, first = tree.candidate(verdict.winner)[: verdict.accepted], self.candidates[0]
        return next((i for i, (a, b) in enumerate(zip(first, kept)) if a != b), min(len(first), len(kept)))


@dataclass(frozen=True)
class Verdict:
    path: tuple[int, ...]  # the accepted nodes of the token tree, root downwards (a chain: 0 .. accepted − 1)
    next_token: int  # the target's own token after them: a correction after a rejection, else a bonus
    winner: int = 0  # the candidate shown: the longest one holding the accepted path
    p: tuple[float, ...] = ()  # the target's probability of each of the winner's tokens
    q: tuple[float, ...] | None = None  # the drafter's, for a sampled chain
    trials: tuple[Trial, ...] = ()  # every drafted token the rule tested, in order, with its draw
    drawn_from: torch.Tensor | None = None  # [V] the residual the next token came from; None: a row of p

    @property
    def accepted(self) -> int:
        return len(self.path)


KeepDrafting = Callable[[list[float]], bool]  # the draft's own probabilities so far -> whether one more token pays
TreeSize = Callable[[list[list[float]], int], int]  # each node's path chances, best first, and depth -> nodes that pay


class Drafter(Protocol):
    """Everything the decode loop (and the hybrid, which holds two drafters) reads or calls; nothing else of a
    drafter is touched from outside it."""

    reads_hidden: bool  # it reads the target's hidden states, so the target's cache must keep them
    hidden_layers: tuple[int, ...]  # which (indexes into transformers' hidden_states; -1: the final, normed one)
    longest: int | None  # the deepest draft it can make (Medusa: its tree's depth); None: any γ
    drafts_block: bool  # one pass drafts every position up to `longest` (DFlash): drafting costs the same for any γ
    stops_early: bool  # under adaptive γ it decides its draft's length while drafting, asking keep_drafting
    copies: bool  # its drafts are copied spans (a lookup): they hold in runs, so adaptive γ counts them by position

    def max_nodes(self, gamma: int) -> int:
        """The most tokens one proposal for `gamma` sends to verification (sizes the target's cache)."""

    def start(self, prompt_ids: list[int], target: CachedLM) -> None:
        """Once per generation, after the prompt is in the target's cache (counted as prefill)."""

    def adapt(self, keep_drafting: KeepDrafting | None, tree_size: TreeSize) -> None:
        """Adaptive γ only, once before the first step: the two judges of what pays. keep_drafting is given only
        to a drafter that stops_early; tree_size serves one that grows a tree. A drafter that sizes neither ignores
        them."""

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        """Guess up to `gamma` tokens after `tokens` (the prompt and everything generated); None: a plain step."""

    def observe(self, verdict: Verdict) -> None:
        """The target accepted `verdict.path` of the last proposal; forget the rest."""

    def forget(self) -> None:
        """Its last proposal was not verified (the hybrid's other drafter took the step): drop what it kept of it."""


class BaseDrafter:
    """Defaults for the protocol: a chain of up to γ tokens, no hidden state, nothing to set up or forget."""

    reads_hidden = False
    hidden_layers = (-1,)
    longest: int | None = None
    drafts_block = False
    stops_early = False
    copies = False
    keep_drafting: KeepDrafting | None = None  # what adapt() was given
    tree_size: TreeSize | None = None

    def max_nodes(self, gamma: int) -> int:
        return gamma

    def start(self, prompt_ids: list[int], target: CachedLM) -> None:
        pass

    def adapt(self, keep_drafting: KeepDrafting | None, tree_size: TreeSize) -> None:
        self.keep_drafting, self.tree_size = keep_drafting, tree_size

    def observe(self, verdict: Verdict) -> None:
        pass

    def forget(self) -> None:
        pass
