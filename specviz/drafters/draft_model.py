"""A smaller model of the same vocabulary drafts autoregressively, with its own KV cache, sampling as the target
would (same temperature, top-k, top-p), so its probabilities q go to the rejection rule with each token."""

import torch

from ..engine.cached_lm import CachedLM
from ..engine.sampling import choose, probabilities
from ..engine.static_lm import open_lm
from ..engine.step import BaseDrafter, Proposal, Verdict
from ..errors import InvalidRequest
from ..settings import MAX_GAMMA, Settings
from ..models.vocabulary import check_draft_fits, same_vocabulary
from .cross_tokenizer import CrossTokenizerDrafter
from .kinds import DrafterKind


def fit_vocab(logits: torch.Tensor, size: int) -> torch.Tensor:
    """Give the draft's logits the target's width: extra ids are cut, missing ones can never be drafted."""
    width = logits.shape[-1]
    if width >= size:
        return logits[..., :size]
    return torch.nn.functional.pad(logits, (0, size - width), value=float("-inf"))


class DraftModelDrafter(BaseDrafter):
    stops_early = True

    def __init__(self, model: torch.nn.Module, settings: Settings, generator: torch.Generator, vocab_size: int):
        self.model, self.settings, self.generator, self.vocab_size = model, settings, generator, vocab_size
        self.readable = model.get_input_embeddings().num_embeddings  # ids the draft can be fed
        self.lm: CachedLM | None = None
        self.blind = False  # the text holds a token the draft cannot read: it drafts no more this run
        self._base = self._count = 0

    def start(self, prompt_ids: list[int], target=None) -> None:
        self.lm = open_lm(self.model, len(prompt_ids) + self.settings.max_new_tokens + MAX_GAMMA + 1)
        self.blind = any(t >= self.readable for t in prompt_ids)
        if len(prompt_ids) > 1 and not self.blind:
            self.lm.extend(torch.tensor(prompt_ids[:-1]), last_only=True)

    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        # The cache may lag behind `tokens` (tokens accepted last step, the target's own token):
        # the first forward feeds all of them at once, then one drafted token per forward.
        self.blind = self.blind or any(t >= self.readable for t in tokens[self.lm.length :])
        if self.blind:  # a draft with fewer embedding rows than the target has ids: plain steps, still exact
            return None
        self._base = len(tokens)
        feed = torch.tensor(tokens[self.lm.length :])
        drafted, dists, confidence = [], [], []
        for _ in range(gamma):
            probs = probabilities(fit_vocab(self.lm.extend(feed, last_only=True), self.vocab_size), self.settings)
            feed = choose(probs, self.settings, self.generator)
            drafted.append(feed)
            dists.append(probs)
            if self.keep_drafting is not None:  # the length is decided here, from the draft's own probabilities
                confidence.append(float(probs[0, feed[0]]))
                if not self.keep_drafting(confidence):
                    break
        self._count = len(drafted)
        return Proposal((tuple(torch.cat(drafted).tolist()),), torch.cat(dists), forwards=len(drafted),
                        confidence=tuple(confidence) or None)

    def observe(self, verdict: Verdict) -> None:
        # The last drafted token was never fed, so at most gamma - 1 drafts sit in the cache.
        self.lm.truncate(self._base + min(verdict.accepted, self._count - 1))


def _build(options, ctx):
    if ctx.draft is None:
        raise InvalidRequest("the draft-model drafter needs a draft model (--draft MODEL)")
    if not same_vocabulary(ctx.target, ctx.draft):  # another tokenizer: bridged through text
        check_draft_fits(ctx.target, ctx.draft)
        return CrossTokenizerDrafter(ctx.draft, ctx.target, ctx.settings, ctx.generator)
    return DraftModelDrafter(ctx.draft.model, ctx.settings, ctx.generator, ctx.target.vocab_size)


KIND = DrafterKind("draft", "draft model", "a smaller model drafts γ tokens, one forward each (any tokenizer: another "
                   "one is bridged through text)", _build, needs_draft=True, order=10)
