"""The DFlash drafter: one draft pass fills a block, the first γ tokens of it are verified as a chain.

Each step:

1. the target's features of the tokens committed since the last pass (kept beside the target's cache, from the
   verify forwards that committed them) become new context rows of the draft's cache;
2. one pass over [the last committed token, mask × (block − 1)] scores every position of the block at once; each
   position's best token is the draft (a point mass: the verification's lookup rule keeps sampling lossless);
3. the chain of the first γ drafts (γ ≤ block − 1; with adaptive γ, chosen before drafting from the verify
   forward's measured cost and how often each position of the block has held) goes to the shared verification.

Nothing needs cutting after a rejection: the draft's cache only ever holds committed context, and the block's own
keys and values are dropped at the end of each pass.
"""

import torch

from ...engine.step import BaseDrafter, Proposal
from .model import DFlashDraft


class DFlashDrafter(BaseDrafter):
    reads_hidden = True
    drafts_block = True

    def __init__(self, draft: DFlashDraft):
        self.draft = draft
        self.hidden_layers = tuple(i + 1 for i in draft.target_layers)  # hidden_states[0] is the embedding
        self.longest = draft.block_size - 1
        self.target_lm = self.cache = None

    def max_nodes(self, gamma: int) -> int:
        return min(gamma, self.longest)

    def start(self, prompt_ids: list[int], target) -> None:
        self.target_lm, self.cache = target, self.draft.new_cache()

    @torch.inference_mode()
    def propose(self, tokens: list[int], gamma: int) -> Proposal | None:
        if self.target_lm is None:
            return None
        committed = self.target_lm.length  # entries whose features the target has computed: tokens[:-1]
        self.cache.crop(committed)
        if committed > self.cache.length:  # step 1
            features = self.target_lm.hidden(self.cache.length, committed)
        else:  # nothing new (a one-token prompt's first step has no context at all)
            features = self.draft.fc.weight.new_zeros(0, self.draft.fc.in_features)
        scores = self.draft.fill(features, tokens[-1], self.cache)  # step 2
        best = scores.argmax(dim=-1)[: self.max_nodes(gamma)]  # step 3
        return Proposal((tuple(best.tolist()),), forwards=1, block=len(scores))
