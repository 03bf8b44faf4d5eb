"""Drafters propose tokens; the target verifies them. See base.Drafter for the protocol."""

from .base import Drafter, Proposal
from .draft_model import DraftModelDrafter

DRAFTER_KINDS = ("none", "draft")


def build_drafter(kind, settings, generator, target, draft=None) -> Drafter | None:
    """The drafter named `kind` for `target` (LoadedModel); None means plain decoding."""
    if kind == "none":
        return None
    if kind == "draft":
        return DraftModelDrafter(draft.model, settings, generator, target.vocab_size)
    raise ValueError(f"unknown drafter {kind!r}")


__all__ = ["DRAFTER_KINDS", "Drafter", "Proposal", "DraftModelDrafter", "build_drafter"]
