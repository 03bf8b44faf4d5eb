"""A drafter with a set acceptance rate, for measuring the engine against the theory (benchmarks only).

It knows the target's greedy continuation (a plain run made beforehand) and proposes, at every draft position,
the target's own next token with probability α and a wrong one otherwise, so acceptance is exactly the
paper's i.i.d. model with no drafting cost: E(γ) = (1 − α^(γ+1)) / (1 − α) tokens for one verify forward.
Greedy only. If the run ever leaves the reference (a bf16 near-tie), it stops proposing: plain steps.
"""

import random

from ..errors import InvalidRequest
from ..serving.declaration import Nearest, Serving
from .contract import BaseDrafter, Proposal, Recipe
from .listing import Listing
from .options import Options, option


class OracleDrafter(BaseDrafter):
    def __init__(self, reference: list[int], alpha: float, vocab_size: int, seed: int = 0):
        self.reference = list(reference)
        self.alpha = alpha
        self.vocab_size = vocab_size
        self.rng = random.Random(seed)
        self.prompt_len = 0

    def start(self, prompt_ids: list[int], target=None, judges=None) -> None:
        self.prompt_len = len(prompt_ids)

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        done = len(tokens) - self.prompt_len
        if tokens[self.prompt_len :] != self.reference[:done]:
            return None  # off the reference: the target's next token is no longer known
        follow = self.reference[done : done + gamma]
        if not follow:
            return None
        draft = [
            t if self.rng.random() < self.alpha else (t + 1 + self.rng.randrange(self.vocab_size - 1)) % self.vocab_size
            for t in follow
        ]
        return Proposal((tuple(draft),))


class OracleOptions(Options):
    alpha: float = option(
        0.8, "oracle acceptance rate", "the share of drafts that are the target's own token", cli=False, app=False
    )
    reference: tuple = option((), "reference", "the target's greedy output, made beforehand", cli=False, app=False)

    def check(self) -> None:
        if not 0 <= self.alpha <= 1:
            raise InvalidRequest(f"the oracle's acceptance rate must be in [0, 1], got {self.alpha!r}")


def _build(options, ctx) -> OracleDrafter:
    if not ctx.settings.greedy:
        raise InvalidRequest("the set-acceptance-rate drafter knows only the greedy continuation: use temperature 0")
    return OracleDrafter(options.reference, options.alpha, ctx.target.vocab_size, ctx.settings.seed)


NOT_A_DRAFTER = Nearest("the oracle is a stand-in with a set acceptance, not a drafter")  # in no engine

KIND = Recipe(
    "oracle",
    OracleOptions,
    _build,
    Listing(
        "oracle (set α)",
        "proposes the target's own token with probability α, for free",
        order=90,
        menu=False,
        sets_alpha=True,
    ),
    serving=Serving(transformers=NOT_A_DRAFTER, vllm=NOT_A_DRAFTER, sglang=NOT_A_DRAFTER, llama_cpp=NOT_A_DRAFTER),
)
