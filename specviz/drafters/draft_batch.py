"""The draft model for concurrent requests: it drafts a chain for every row of a batch at once, one draft forward per
position for all rows (its own BatchedLM), each row sampling from its own distribution with its own generator (the
one its verification draws from), so each row's q goes to the rejection rule with its tokens as a draft model's chain
does alone. The first forward of a step feeds each row what was committed since its last one (the target's token, and
the last draft when every draft held, or the tokens of the plain steps since it last drafted); the drafts each row
keeps are re-aligned once, after the verdicts. A row's text is read into the draft's cache only at the first step that
drafts after it joined: under load adaptive γ may take plain steps for as long as the row lives, and then the draft
never reads it (a prompt read by the draft model stalls every row of the batch as the target's own reading does)."""

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
        self.unread = 0  # the batch's last rows, which joined after the last drafting step: the draft has not read them

    def max_nodes(self, gamma: int) -> int:
        return gamma

    def start(self, prompts: list[list[int]], target=None, judges=None, rows: list[int] | None = None) -> None:
        """Rows joining the batch (a new one, or one decoding, between two steps): read at the next drafting step."""
        if self.lm is None:
            self.lm = BatchedLM(self.model)
        rows = range(len(self.generators), len(self.generators) + len(prompts)) if rows is None else rows
        self.generators += [self.by_row[r] for r in rows]
        self.caught += [0] * len(prompts)
        self.drafted += [0] * len(prompts)
        self.unread += len(prompts)

    @torch.inference_mode()
    def propose(self, tokens: list[list[int]], gammas: list[int]) -> list[Proposal | None]:
        if max(gammas, default=0) == 0:  # a plain step: nothing read, nothing drafted
            self.drafted = [0] * len(tokens)
            return [None] * len(tokens)
        lm = self.lm
        if self.unread:  # the rows that joined since the last drafting step: their text so far, but the root
            lm.start([list(t) for t in tokens[len(tokens) - self.unread :]])
            self.unread = 0
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
        self.drafted = [len(d) for d in drafts]
        return [Proposal((tuple(d),), torch.cat(q), forwards=forwards) if d else None for d, q in zip(drafts, dists)]

    def observe(self, verdicts: list[Verdict | None], staying: list[int]) -> None:
        """Each row keeps what it caught up on and its drafts that held and were fed (the last draft never was)."""
        read = len(verdicts) - self.unread  # the rows in the draft's cache: the batch's first ones
        if not any(self.drafted):  # no forward this step: the catch-up waits for the next one
            held = [0] * read
        else:
            held = [
                self.caught[i] + (0 if v is None else max(0, min(v.accepted, self.drafted[i] - 1)))
                for i, v in enumerate(verdicts)
            ]
        if read and (any(self.drafted) or any(i not in staying for i in range(read))):
            self.lm.keep([[] for _ in range(read)], [i for i in staying if i < read], held)
        self.unread = sum(1 for i in staying if i >= read)
        self.generators = [self.generators[i] for i in staying]
        self.caught = [self.caught[i] for i in staying]
        self.drafted = [self.drafted[i] for i in staying]
