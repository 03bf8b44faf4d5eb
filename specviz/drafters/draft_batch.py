"""The draft model for concurrent requests: it drafts a chain for every row of a batch at once, one draft forward per
position for all rows (its own BatchedLM), each row sampling from its own distribution with its own generator (the
one its verification draws from), so each row's q goes to the rejection rule with its tokens as a draft model's chain
does alone. The first forward of a step feeds each row what was committed since its last one (the target's token, and
the last draft when every draft held), so rows feed one or two tokens; the drafts each row keeps are re-aligned once,
after the verdicts."""

import torch

from ..engine.batched_lm import BatchedLM, Feed
from ..engine.sampling import choose, fit_vocab, probabilities
from ..settings import Settings
from .contract import DrafterProfile, Proposal, Verdict

PAD = 0  # what a row that drafts no further at some position feeds: its column is never kept nor seen by the row


class BatchedDraftModel:
    profile = DrafterProfile()  # γ is the batch's: rows do not stop early on their own

    def __init__(self, model: torch.nn.Module, settings: Settings, generators: list, vocab_size: int):
        self.model, self.settings, self.vocab_size = model, settings, vocab_size
        self.by_row = list(generators)  # row r's generator, from when it starts
        self.generators: list = []  # the rows decoding now, in the batch's order
        self.lm: BatchedLM | None = None
        self.caught: list[int] = []  # per row, the committed tokens its last step's first forward fed
        self.drafted: list[int] = []  # per row, the drafts of its last proposal

    def max_nodes(self, gamma: int) -> int:
        return gamma

    def start(self, prompts: list[list[int]], target=None, judges=None, rows: list[int] | None = None) -> None:
        """The rows' prompts into the draft's own batch: a new one, or rows joining between two steps."""
        if self.lm is None:
            self.lm = BatchedLM(self.model)
        rows = range(len(self.generators), len(self.generators) + len(prompts)) if rows is None else rows
        self.lm.start(prompts, list(rows))
        self.generators += [self.by_row[r] for r in rows]
        self.caught += [0] * len(prompts)
        self.drafted += [0] * len(prompts)

    @torch.inference_mode()
    def propose(self, tokens: list[list[int]], gammas: list[int]) -> list[Proposal | None]:
        lm = self.lm
        new = [t[lm.lengths[i] :] for i, t in enumerate(tokens)]  # the root at least: the cache holds tokens[:-1]
        self.caught, self.drafted = [len(n) for n in new], [0] * len(tokens)
        feeds, drafts, dists, forwards = [Feed.chain(n) for n in new], [[] for _ in tokens], [[] for _ in tokens], 0
        for depth in range(max(gammas, default=0)):
            logits = lm.extend(feeds)
            forwards += 1
            lm.hold(
                [list(range(len(f.tokens))) if depth == 0 or gammas[i] > depth else [] for i, f in enumerate(feeds)]
            )
            feeds = []
            for i, rows in enumerate(logits):
                if gammas[i] <= depth:
                    feeds.append(Feed.chain([PAD]))
                    continue
                probs = probabilities(fit_vocab(rows[-1:], self.vocab_size), self.settings)
                token = int(choose(probs, self.settings, self.generators[i])[0])
                drafts[i].append(token), dists[i].append(probs)
                feeds.append(Feed.chain([token]))
        if forwards == 0:
            return [None] * len(tokens)
        self.drafted = [len(d) for d in drafts]
        return [Proposal((tuple(d),), torch.cat(q), forwards=forwards) if d else None for d, q in zip(drafts, dists)]

    def observe(self, verdicts: list[Verdict | None], staying: list[int]) -> None:
        """Each row keeps what it caught up on and its drafts that held and were fed (the last draft never was)."""
        if not any(self.drafted):  # no forward this step: the catch-up waits for the next one
            if len(staying) == len(verdicts):
                return
            held = [0] * len(verdicts)
        else:
            held = [
                self.caught[i] + (0 if v is None else max(0, min(v.accepted, self.drafted[i] - 1)))
                for i, v in enumerate(verdicts)
            ]
        self.lm.keep([[] for _ in verdicts], staying, held)
        self.generators = [self.generators[i] for i in staying]
