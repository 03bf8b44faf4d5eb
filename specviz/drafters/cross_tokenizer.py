"""A draft model whose tokenizer is not the target's (SmolLM2 drafting for Qwen, or any two models).

The draft reads the committed text in its own tokens: before every proposal the target's text is encoded again
with the draft's tokenizer, and the draft's cache is kept up to the longest prefix it shares with what it held.
Its guesses reach the target in one of two ways:

- greedy: the draft writes γ tokens of its own, freely; their text, encoded with the target's tokenizer, is the chain
  the target checks (universal assisted decoding). The greedy rule needs no q, so the output is exactly the target's.
- sampling: the draft samples only among the tokens both vocabularies spell the same way, its q renormalised over
  them and carried onto the target's ids (token-level intersection; where several draft tokens spell one target
  token, as a character and its byte-fallback piece do, their probabilities add up). Then q is a distribution over
  the target's vocabulary and the usual rejection rule keeps the target's distribution exactly.
"""

import torch

from ..engine.cached_lm import CachedLM
from ..engine.sampling import choose, probabilities
from ..models import LoadedModel
from ..models.vocabulary import shared_tokens
from ..settings import MAX_GAMMA, Settings
from .contract import BaseDrafter, Proposal, Provenance


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class CrossTokenizerDrafter(BaseDrafter):
    def __init__(self, draft: LoadedModel, target: LoadedModel, settings: Settings, generator: torch.Generator):
        self.draft = draft
        self.target = target
        self.settings = settings
        self.generator = generator
        self.width = draft.vocab_size
        self.readable = draft.readable
        self.target_rows = min(target.vocab_size, target.readable)  # ids the target can be fed and can produce
        # Ids a tokenizer knows past its model's rows (added tokens, trimmed embeddings) are never drafted.
        pairs = [(d, t) for d, t in zip(*shared_tokens(target, draft)) if d < self.width and t < self.target_rows]
        self.to_target = torch.full((self.width,), -1, dtype=torch.long)  # draft id -> target id, -1: not shared
        if pairs:
            draft_ids, target_ids = zip(*pairs)
            self.to_target[torch.tensor(draft_ids, dtype=torch.long)] = torch.tensor(target_ids, dtype=torch.long)
        self.shared = (self.to_target >= 0).to(draft.device)
        named = [i for i in draft.tokenizer.get_vocab().values() if i < self.width]
        self.named = torch.zeros(self.width, dtype=torch.bool)  # ids with a token (not padding rows): greedy's choice
        self.named[torch.tensor(named, dtype=torch.long)] = True
        self.named = self.named.to(draft.device)
        self.to_target = self.to_target.to(draft.device)
        self.lm: CachedLM | None = None
        self.cached: list[int] = []  # the draft ids whose keys and values the draft's cache holds, in order

    def start(self, prompt_ids: list[int], target=None, judges=None) -> None:
        self.prompt_len = len(prompt_ids)
        self.prompt_text = self.target.tokenizer.decode(prompt_ids)
        room = len(self.draft.tokenizer.encode(self.prompt_text, add_special_tokens=False))
        self.lm = self.draft.open_lm(room + 4 * self.settings.max_new_tokens + MAX_GAMMA + 64)
        self.cached = []

    def _resync(self, tokens: list[int]) -> list[int]:
        """The committed text in the draft's tokens; the cache cut back to what it shares with them, never holding the
        last one (a proposal starts by feeding at least one token)."""
        text = self.prompt_text + self.target.tokenizer.decode(tokens[self.prompt_len :])
        # A token the draft's model has no row for (an added token, a trimmed vocabulary) is left out of what it reads.
        want = [t for t in self.draft.tokenizer.encode(text, add_special_tokens=False) if t < self.readable]
        keep = max(0, min(common_prefix(self.cached, want), len(want) - 1))
        self.lm.truncate(keep)
        self.cached = self.cached[:keep]
        return want

    def _next(self, feed: list[int]) -> torch.Tensor:
        need = len(self.cached) + len(feed)
        if need > getattr(self.lm, "capacity", need):  # the draft splits the text finer than planned: a larger
            self.lm = self.draft.open_lm(2 * need)  # cache, refilled with what the old one held
            feed = self.cached + feed
            self.cached = []
        logits = self.lm.extend(torch.tensor(feed, device=self.draft.device), last_only=True)[:, : self.width]
        self.cached += feed
        return logits

    def on_target(self, probs: torch.Tensor) -> torch.Tensor:
        """[1, V_draft] probabilities, zero outside the shared tokens -> the same over the target's ids. Several draft
        tokens can spell one target token (a character as a piece and as a byte, say): its q is their sum."""
        out = torch.zeros(1, self.target.vocab_size, device=probs.device)
        return out.index_add_(1, self.to_target[self.shared], probs[:, self.shared])

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        want = self._resync(tokens)
        feed = want[len(self.cached) :]
        if self.settings.greedy:
            own = []
            for _ in range(gamma):
                x = int(self._next(feed).masked_fill(~self.named, float("-inf")).argmax(-1))
                own.append(x)
                feed = [x]
            text = self.draft.tokenizer.decode(own)
            chain = self.target.tokenizer.encode(text, add_special_tokens=False)[:gamma]
            cut = next((i for i, t in enumerate(chain) if t >= self.target_rows), len(chain))
            chain = chain[
                :cut
            ]  # past an id the target cannot read nothing could be accepted: the target never writes it
            spelled = tuple(self.draft.tokenizer.decode([t]) for t in own)
            return Proposal((tuple(chain),), forwards=gamma, source=Provenance(spelled=spelled)) if chain else None
        own = []
        q = []
        for _ in range(gamma):
            probs = probabilities(self._next(feed).masked_fill(~self.shared, float("-inf")), self.settings)
            x = choose(probs, self.settings, self.generator)
            q.append(self.on_target(probs))
            own.append(x)
            feed = x.tolist()
        own = torch.cat(own)
        chain = tuple(self.to_target[own].tolist())
        spelled = tuple(self.draft.tokenizer.decode([t]) for t in own.tolist())
        return Proposal((chain,), torch.cat(q), forwards=gamma, source=Provenance(spelled=spelled))
