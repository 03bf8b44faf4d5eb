"""The target's cache as the decode loop sees it: one row (CachedLM's verbs, whichever runtime opened it) or several
decoded together (BatchedLM's). Both read prompts, verify one proposal tree per row in one forward and keep each row's
root and accepted path; a batch also lets the rows that finished leave, and new rows join between two steps.
"""

import torch

from .batched_lm import BatchedLM, Feed
from .cached_lm import CachedLM
from .tree import TokenTree, row_after


class OneRow:
    """A single prompt: the loop's forwards go to its CachedLM as they always did (the drafter reads it too)."""

    def __init__(self, lm: CachedLM):
        self.lm = lm
        self.drafters_read = lm  # a drafter of this row reads the target's cache (heads: its hidden states)

    def start(self, prompts: list[list[int]], rows: list[int] | None = None) -> None:
        (prompt,) = prompts
        self.lm.read_prompt(prompt)  # the cache holds every token but the last, which each step feeds

    def verify(self, roots: list[int], trees: list[TokenTree]) -> list[torch.Tensor]:
        return [self.lm.extend_tree(roots[0], trees[0])]

    def keep(self, committed: list[int], paths: list[list[int]], staying: list[int]) -> None:
        if staying:
            self.lm.keep(committed[0], paths[0])


class ManyRows:
    """Several prompts in one BatchedLM: each verify is one forward of every row still decoding."""

    def __init__(self, lm: BatchedLM):
        self.lm = lm
        self.drafters_read = None  # no row's drafter reads the batch's cache

    def start(self, prompts: list[list[int]], rows: list[int] | None = None) -> None:
        """The prompts' rows into the batch: all of them at first, or rows joining between two steps."""
        self.lm.start(prompts, rows)

    def verify(self, roots: list[int], trees: list[TokenTree]) -> list[torch.Tensor]:
        return self.lm.extend([Feed.verify(root, tree) for root, tree in zip(roots, trees)])

    def keep(self, committed: list[int], paths: list[list[int]], staying: list[int]) -> None:
        """`staying`: indexes of the rows (in this step's order) that go on; the others leave the batch."""
        self.lm.keep([[0, *map(row_after, path)] for path in paths], staying)


def open_rows(target, capacity: int, rows: int, keep_hidden: tuple[int, ...] = ()):
    """The target's cache for `rows` prompts (`target`: a LoadedModel, which opens its runtime's caches): one row's,
    or a batch's."""
    if rows == 1:
        return OneRow(target.open_lm(capacity, keep_hidden=keep_hidden))
    return ManyRows(target.open_batch(capacity * rows))
