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

    from ..events import StepDetail, Trial
    from .cached_lm import CachedLM


@dataclass(frozen=True)
class Provenance:
    """Where a proposal's tokens came from, for the screen and the analysis; nothing of it changes what is verified."""

    origin: str | None = None  # who drafted it, in words (events.py ORIGINS): a copy's source, or a hybrid's model
    origins: tuple[str | None, ...] | None = None  # per candidate, when two drafters' candidates share the step
    spelled: tuple[str, ...] | None = None  # the guess in the drafter's own tokens, when its tokenizer is another
    block: int = 0  # a block drafter: the positions its one pass filled, of which the candidate is the first γ


@dataclass(frozen=True)
class Proposal:
    candidates: tuple[tuple[int, ...], ...]  # one chain, or alternatives verified together as a tree
    q: torch.Tensor | None = None  # [g, V] drafter probabilities of a single sampled chain; None: point masses
    forwards: int = 0  # drafter model forwards spent on this proposal
    shape: TreeShape | None = None  # the candidates' trie shape, when the drafter keeps a fixed one
    confidence: tuple[float, ...] | None = None  # the drafter's own probability of each token of its first
    # candidate, when those probabilities decided where it stopped
    source: Provenance = Provenance()

    def __post_init__(self):
        if not self.candidates or not all(isinstance(c, (tuple, list)) and c for c in self.candidates):
            raise TypeError(
                f"a Proposal's candidates are non-empty token sequences, e.g. ((5, 9),) for one chain; "
                f"got {self.candidates!r}"
            )
        if self.q is not None and len(self.candidates) != 1:
            raise TypeError("q belongs to a single sampled chain")
        if self.source.origins is not None and len(self.source.origins) != len(self.candidates):
            raise TypeError("origins name one origin per candidate")

    def tree(self) -> TokenTree:
        return build_tree(self.candidates) if self.shape is None else fill_shape(self.shape, self.candidates)

    def origin_of(self, candidate: int) -> str | None:
        """Where the candidate shown after verification came from (its index among the candidates)."""
        origins = self.source.origins
        return self.source.origin if origins is None else origins[candidate]

    def first_held(self, tree: TokenTree, verdict: Verdict) -> int:
        """How many leading tokens of the first candidate the target kept (a chain: the accepted count)."""
        kept = tree.candidate(verdict.winner)[: verdict.accepted]
        first = self.candidates[0]
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


@dataclass(frozen=True)
class Checked:
    """One step of one row: its draft and what the target's verification made of it."""

    proposal: Proposal | None  # None: a plain step
    tree: TokenTree
    verdict: Verdict
    detail: StepDetail | None  # for the screen

    @property
    def rejected(self) -> bool:
        """Whether the target turned down a draft of the shown candidate (not when it held whole or none was made)."""
        shown = self.tree.paths[self.verdict.winner] if self.tree.paths else ()
        return self.verdict.accepted < len(shown)


@dataclass(frozen=True)
class FinishedStep:
    """A step of the whole batch as adaptive γ learns from it (gamma_policy.py's learn)."""

    rows: list[int]  # the ids of the rows that decoded it, in the batch's order
    checked: list[Checked]  # each row's draft and verdict
    gamma: int  # the batch's γ: the largest any row was given, before a row's budget cut it
    verify_tokens: int  # the positions the verify forward computed: each row's root and nodes, packed
    draft_s: float
    verify_s: float  # the verify forward alone
    bookkeeping_s: float  # the rest: the acceptance rule, the cache rollback, the drafter's update


KeepDrafting = Callable[[list[float]], bool]  # the draft's own probabilities so far -> whether one more token pays
TreeSize = Callable[[list[list[float]], int], int]  # each node's path chances, best first, and depth -> nodes that pay


@dataclass(frozen=True)
class Judges:
    """Adaptive γ's judges of what pays, handed to a drafter when a generation starts (None under a fixed γ). A
    drafter that sizes neither its draft nor its tree ignores them."""

    tree_size: TreeSize  # for a drafter that grows a tree: how many of its best nodes to send
    keep_drafting: KeepDrafting | None = None  # only for a drafter that stops_early: one more token, or stop
    # whether drafted tokens costing this many seconds each could beat a plain step even if all held, by costs
    # measured on the device before the run (None: none were): a drafter with a dear side may leave it out
    could_pay: Callable[[float], bool] | None = None


@dataclass(frozen=True)
class DrafterProfile:
    """What the loop and adaptive γ need to know about a drafter, declared once when it is built."""

    hidden_layers: tuple[int, ...] = ()  # the target's hidden states it reads (indexes into transformers'
    # hidden_states; -1: the final, normed one), so the target's cache must keep them; (): none
    longest: int | None = None  # the deepest draft it can make (Medusa: its tree's depth); None: any γ
    drafts_block: bool = False  # one pass drafts every position up to `longest` (DFlash): the same cost for any γ
    stops_early: bool = False  # under adaptive γ it decides its draft's length while drafting, asking keep_drafting
    copies: bool = False  # its drafts are copied spans (a lookup): they hold in runs, so adaptive γ counts them by
    # position
    position_s: float | None = None  # seconds a drafted position costs as measured for its model before the run
    # (a draft model's one-token forward); None: adaptive γ learns it from the run


class Drafter(Protocol):
    """Everything the decode loop reads or calls of a drafter; nothing else of it is touched from outside."""

    profile: DrafterProfile

    def max_nodes(self, gamma: int) -> int:
        """The most tokens one proposal for `gamma` sends to verification (sizes the target's cache)."""

    def start(self, prompt_ids: list[int], target: CachedLM, judges: Judges | None = None) -> None:
        """Once per generation, after the prompt is in the target's cache (counted as prefill); `judges` under
        adaptive γ."""

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        """Guess up to `gamma` tokens after `tokens` (the prompt and everything generated); None: a plain step."""

    def observe(self, verdict: Verdict) -> None:
        """The target accepted `verdict.path` of the last proposal; forget the rest."""


class RowDrafting(Protocol):
    """A batch's drafting, as the loop calls it: a proposal for every row still decoding each step, then their
    verdicts. Per-row drafters side by side (EachRow), or one drafter whose forwards serve every row at once (a draft
    model in a batch). A batch of one is a single Drafter in EachRow."""

    profile: DrafterProfile

    def max_nodes(self, gamma: int) -> int: ...

    def start(
        self, prompts: list[list[int]], target: CachedLM | None, judges: Judges | None, rows: list[int] | None = None
    ) -> None:
        """The rows `rows` (default 0, 1, ...: the batch's ids, each with its own generator) begin with these
        prompts: every row when the batch opens, or rows joining it between two steps (appended to its order)."""

    def propose(self, tokens: list[list[int]], gammas: list[int]) -> list[Proposal | None]:
        """Row i guesses up to gammas[i] tokens after tokens[i] (0: a plain step for that row, None back)."""

    def observe(self, verdicts: list[Verdict | None], staying: list[int]) -> None:
        """Each row's verdict (None: it proposed nothing); then only the rows `staying` (indexes into this step's
        rows) go on."""

    def behind(self, tokens: list[list[int]]) -> list[int]:
        """Per row, the committed tokens before its root that its drafter has not read: what drafting for it now
        would read first (a row's whole text before it first drafts, then what plain steps wrote since it last did);
        0 where reading costs nothing worth pricing."""


class EachRow:
    """One drafter per row, side by side: each proposes for its own row and observes its own verdict. `drafters[r]`
    is row r's, used from when that row starts."""

    def __init__(self, drafters: list[Drafter]):
        self.pool = list(drafters)
        self.drafters: list[Drafter] = []  # the rows decoding now, in the batch's order
        self.profile = self.pool[0].profile

    def max_nodes(self, gamma: int) -> int:
        return max(d.max_nodes(gamma) for d in self.pool)

    def start(
        self, prompts: list[list[int]], target: CachedLM | None, judges: Judges | None, rows: list[int] | None = None
    ) -> None:
        rows = range(len(self.drafters), len(self.drafters) + len(prompts)) if rows is None else rows
        for row, prompt in zip(rows, prompts):
            self.pool[row].start(prompt, target, judges)
            self.drafters.append(self.pool[row])

    def propose(self, tokens: list[list[int]], gammas: list[int]) -> list[Proposal | None]:
        return [d.propose(t, g) if g > 0 else None for d, t, g in zip(self.drafters, tokens, gammas)]

    def observe(self, verdicts: list[Verdict | None], staying: list[int]) -> None:
        for drafter, verdict in zip(self.drafters, verdicts):
            if verdict is not None:
                drafter.observe(verdict)
        self.drafters = [self.drafters[i] for i in staying]

    def behind(self, tokens: list[list[int]]) -> list[int]:
        """None to price: a lookup reads nothing, and a row's own drafter (a batch of one, which adaptive γ for one
        row sizes) reads inside its proposal's time."""
        return [0] * len(tokens)


class BaseDrafter:
    """Defaults for the protocol: a chain of up to γ tokens, no hidden state, nothing to set up; the judges kept."""

    profile = DrafterProfile()
    judges: Judges | None = None

    @property
    def keep_drafting(self) -> KeepDrafting | None:
        return self.judges.keep_drafting if self.judges else None

    @property
    def tree_size(self) -> TreeSize | None:
        return self.judges.tree_size if self.judges else None

    def max_nodes(self, gamma: int) -> int:
        return gamma

    def start(self, prompt_ids: list[int], target: CachedLM | None = None, judges: Judges | None = None) -> None:
        self.judges = judges

    def observe(self, verdict: Verdict) -> None:
        pass
