"""The draft model for concurrent requests: it drafts a chain for every row of a batch that drafts, one draft forward
per position for all of them (its own BatchedLM), each row sampling from its own distribution with its own generator
(the one its verification draws from), so each row's q goes to the rejection rule with its tokens as a draft model's
chain does alone. The first forward of a step feeds each drafting row what was committed since its last one (the
target's token, and the last draft when every draft held, or the tokens of the plain steps since it last drafted);
the drafts each row keeps are packed once, after the verdicts. A row is read into the draft's cache at the first
step it drafts, and a row that does not draft in a step is not fed: under load adaptive γ takes plain steps, then
probes one row at a time, and the draft's work (a prompt read stalls every row of the batch, as the target's own
reading does) is then the probing row's alone, or none for a row that never drafts."""

import torch

from ..engine.batched_lm import BatchedLM, Feed
from ..engine.sampling import choose, fit_vocab, probabilities
from ..settings import Settings
from .contract import DrafterProfile, Proposal, Verdict


class BatchedDraftModel:
    profile = DrafterProfile()  # γ is the batch's: rows do not stop early on their own

    def __init__(self, draft, settings: Settings, generators: list, vocab_size: int):
        self.draft = draft  # a LoadedModel, which opens its runtime's batch cache
        self.settings = settings
        self.vocab_size = vocab_size
        self.by_row = list(generators)  # row r's generator, from when it starts
        self.generators: list = []  # the rows decoding now, in the batch's order
        self.lm: BatchedLM | None = None
        self.slot: list[int | None] = []  # per row, its row in the draft's cache (None: not read yet)
        self.caught: list[int] = []  # per row, the committed tokens its last step's first forward fed
        self.drafted: list[int] = []  # per row, the drafts of its last proposal

    def max_nodes(self, gamma: int) -> int:
        return gamma

    def start(self, prompts: list[list[int]], target=None, judges=None, rows: list[int] | None = None) -> None:
        """Rows joining the batch (a new one, or one decoding, between two steps): read when they first draft."""
        if self.lm is None:
            self.lm = self.draft.open_batch()
        rows = range(len(self.generators), len(self.generators) + len(prompts)) if rows is None else rows
        self.generators += [self.by_row[r] for r in rows]
        self.slot += [None] * len(prompts)
        self.caught += [0] * len(prompts)
        self.drafted += [0] * len(prompts)

    def behind(self, tokens: list[list[int]]) -> list[int]:
        """Per row, what a step drafting for it would read before its root: its whole text if it never drafted, else
        what was committed since its last draft forward (plain steps' tokens; the last draft, when all held)."""
        length = {i: self.lm.lengths[j] for j, i in enumerate(self._order())} if self.lm else {}
        return [len(t) - 1 - length.get(i, 0) for i, t in enumerate(tokens)]

    def _order(self) -> list[int]:
        """The batch row each row of the draft's cache holds, in the cache's order."""
        return [i for _, i in sorted((j, i) for i, j in enumerate(self.slot) if j is not None)]

    @torch.inference_mode()
    def propose(self, tokens: list[list[int]], gammas: list[int]) -> list[Proposal | None]:
        self.caught = [0] * len(tokens)
        self.drafted = [0] * len(tokens)
        if max(gammas, default=0) == 0:  # a plain step: nothing read, nothing fed
            return [None] * len(tokens)
        lm = self.lm
        unread = [i for i, g in enumerate(gammas) if g > 0 and self.slot[i] is None]
        if unread:  # their text so far, but the root
            lm.start([list(tokens[i]) for i in unread])
            for k, i in enumerate(unread):
                self.slot[i] = len(lm.rows) - len(unread) + k
        order = self._order()
        feeds = []
        for j, i in enumerate(order):  # the root at least for a drafting row: the cache holds tokens[:-1]
            new = tokens[i][lm.lengths[j] :] if gammas[i] > 0 else []
            self.caught[i] = len(new) if gammas[i] > 0 else 0
            feeds.append(Feed.chain(new))
        drafts = [[] for _ in tokens]
        dists = [[] for _ in tokens]
        forwards = 0
        for depth in range(max(gammas)):
            logits = lm.extend(feeds)
            forwards += 1
            lm.hold([list(range(len(f.tokens))) if gammas[i] > depth else [] for i, f in zip(order, feeds)])
            feeds = []
            for i, rows in zip(order, logits):
                if gammas[i] <= depth:
                    feeds.append(Feed.chain([]))  # the packed forward takes nothing of it
                    continue
                probs = probabilities(fit_vocab(rows[-1:], self.vocab_size), self.settings)
                token = int(choose(probs, self.settings, self.generators[i])[0])
                drafts[i].append(token), dists[i].append(probs)
                feeds.append(Feed.chain([token]))
        self.drafted = [len(d) for d in drafts]
        return [Proposal((tuple(d),), torch.cat(q), forwards=forwards) if d else None for d, q in zip(drafts, dists)]

    def observe(self, verdicts: list[Verdict | None], staying: list[int]) -> None:
        """Each drafting row keeps what it caught up on and its drafts that held and were fed (the last draft never
        was); rows that finished leave the draft's cache too."""
        order = self._order()
        stays = set(staying)
        if order and (any(self.drafted) or not stays.issuperset(order)):
            held = [
                self.caught[i] + (0 if verdicts[i] is None else max(0, min(verdicts[i].accepted, self.drafted[i] - 1)))
                for i in order
            ]
            kept = [j for j, i in enumerate(order) if i in stays]
            self.lm.keep([[] for _ in order], kept, held)
            moved = {order[j]: k for k, j in enumerate(kept)}  # batch row -> its row in the re-aligned cache
            self.slot = [moved.get(i) for i in range(len(self.slot))]
        self.slot = [self.slot[i] for i in staying]
        self.generators = [self.generators[i] for i in staying]
        self.caught = [self.caught[i] for i in staying]
        self.drafted = [self.drafted[i] for i in staying]
